"""One chunk of llama.cpp's lookup-stats loop, entirely in numba.

Protocol (SPEC.md "Replay"): the pseudo output starts with the chunk's first
token; each step drafts, accepts drafted tokens up to the first mismatch
(updating the context cache after each), then appends the true next token
(updating again). The caller times this function and merges the context into
the dynamic cache between chunks, which upstream does not time either.
"""

from numba import njit

from .draft import draft_arrays, prefetch_step
from .frozen import CORRUPT
from .table import OK, append_token
from .thresholds import NGRAM_MAX, NGRAM_MIN


@njit(cache=True, nogil=True, _nrt=False)
def replay_chunk(chunk, chunk_start, n_draft, ctx, dyn, stat, out, buf, dump, counters):
    """Replay one chunk; returns OK, CORRUPT (damaged static cache) or the table's need to grow.

    The caches' arrays are taken out of their tuples once, and the function
    allocates nothing, so it runs without numba's runtime: no reference count
    is touched, and drafting and updating are inlined into its loop. The context
    table must be large enough for the chunk (the caller sizes it, and on a
    growth status grows it, clears it and replays the chunk again).
    counters (int64): [n_calls, n_drafted, n_accept, dump words used].
    dump, when not empty, receives `chunk_start position n tokens...` per call.
    """
    c_slots, c_tags, c_tok, c_cnt, c_meta, c_cand = ctx
    d_slots, d_tags, d_tok, d_cnt, d_cand = dyn.slots, dyn.tags, dyn.tok, dyn.cnt, dyn.cand
    keys, fuse, params, offsets, stats, stok, scnt = (
        stat.keys,
        stat.fuse,
        stat.params,
        stat.offsets,
        stat.stats,
        stat.tokens,
        stat.counts,
    )
    n_ctx = chunk.shape[0]
    out[0] = chunk[0]
    n_out = 1
    while n_out < n_ctx:
        d = draft_arrays(
            out, n_out, n_draft, NGRAM_MIN, NGRAM_MAX,
            c_slots, c_tags, c_tok, c_cnt,
            d_slots, d_tags, d_tok, d_cnt, d_cand,
            keys, fuse, params, offsets, stats, stok, scnt,
            buf,
        )  # fmt: skip
        if d == CORRUPT:
            return CORRUPT
        tail = min(n_out, NGRAM_MAX)
        counters[0] += 1
        counters[1] += d
        if dump.shape[0] > 0:
            p = counters[3]
            dump[p] = chunk_start
            dump[p + 1] = n_out
            dump[p + 2] = d
            for j in range(d):
                dump[p + 3 + j] = buf[tail + j]
            counters[3] = p + 3 + d
        accepted = 0
        while accepted < d and n_out < n_ctx and buf[tail + accepted] == chunk[n_out]:
            accepted += 1
            counters[2] += 1
            out[n_out] = chunk[n_out]
            n_out += 1
            status = append_token(c_slots, c_tags, c_tok, c_cnt, c_meta, c_cand, out, n_out)
            if status != OK:
                return status
        if n_out < n_ctx:
            out[n_out] = chunk[n_out]
            n_out += 1
            prefetch_step(
                out, n_out, NGRAM_MIN, NGRAM_MAX, c_slots, c_tags, d_slots, d_tags, d_cand,
                fuse, params, keys.shape[0],
            )  # fmt: skip
            status = append_token(c_slots, c_tags, c_tok, c_cnt, c_meta, c_cand, out, n_out)
            if status != OK:
                return status
    return OK


def dump_capacity(n_ctx, n_draft):
    """Upper bound of the int32 words replay_chunk writes to dump for one chunk."""
    return n_ctx * (3 + n_draft)
