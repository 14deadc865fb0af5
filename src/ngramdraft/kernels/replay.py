"""One chunk of llama.cpp's lookup-stats loop, entirely in numba.

Protocol (SPEC.md "Replay"): the pseudo output starts with the chunk's first
token; each step drafts, accepts drafted tokens up to the first mismatch
(updating the context cache after each), then appends the true next token
(updating again). The caller times this function and merges the context into
the dynamic cache between chunks, which upstream does not time either.
"""

from numba import njit

from .draft import NGRAM_MAX, NGRAM_MIN, draft
from .frozen import CORRUPT
from .table import update


@njit(cache=True, nogil=True)
def replay_chunk(chunk, chunk_start, n_draft, ctx, dyn, stat, out, buf, dump, counters):
    """Replay one chunk; returns the (possibly regrown) context table.

    counters (int64): [n_calls, n_drafted, n_accept, dump_used, status];
    status is set to CORRUPT when the static cache turned out to be damaged.
    dump, when not empty, receives `chunk_start position n tokens...` per call.
    """
    n_ctx = chunk.shape[0]
    out[0] = chunk[0]
    n_out = 1
    tail_max = NGRAM_MAX
    while n_out < n_ctx:
        d = draft(out, n_out, n_draft, NGRAM_MIN, NGRAM_MAX, ctx, dyn, stat, buf)
        if d == CORRUPT:
            counters[4] = CORRUPT
            return ctx
        tail = min(n_out, tail_max)
        counters[0] += 1
        counters[1] += d
        if dump.shape[0] > 0:
            p = counters[3]
            dump[p] = chunk_start
            dump[p + 1] = n_out
            dump[p + 2] = d
            dump[p + 3 : p + 3 + d] = buf[tail : tail + d]
            counters[3] = p + 3 + d
        for j in range(d):
            if n_out == n_ctx or buf[tail + j] != chunk[n_out]:
                break
            counters[2] += 1
            out[n_out] = chunk[n_out]
            n_out += 1
            ctx = update(ctx, out, n_out, 1, NGRAM_MIN, NGRAM_MAX)
        if n_out < n_ctx:
            out[n_out] = chunk[n_out]
            n_out += 1
            ctx = update(ctx, out, n_out, 1, NGRAM_MIN, NGRAM_MAX)
    return ctx


def dump_capacity(n_ctx, n_draft):
    """Upper bound of the int32 words replay_chunk writes to dump for one chunk."""
    return n_ctx * (3 + n_draft)
