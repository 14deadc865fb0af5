"""One sequence's draft and accept, from its state handle (the Drafter's hot path).

A drafter's state is one int64 array (layout below) holding the handles of
its three caches (kernels/handles.py), its sequence and draft buffer, and
its sizes. ``draft_state`` and ``accept_state`` take it and nothing else of
the caches, so a call from Python checks and unboxes one array instead of
twenty: the call costs less than the drafting it does.

======  =====  ============================================================
words   name   contents
======  =====  ============================================================
0-11    CTX    context table handle
12-23   DYN    dynamic table handle
24-37   STAT   static (frozen) cache handle
38-39   SEQ    sequence buffer: address, capacity (int32)
40-41   BUF    draft buffer: address, length (int32, NGRAM_MAX + n_draft)
42      N      tokens in the sequence
43-45          n_draft, ngram_min, ngram_max
======  =====  ============================================================
"""

import numpy as np
from numba import carray, njit, prange

from .draft import draft_arrays, prefetch_step
from .handles import FROZEN_WORDS, TABLE_WORDS, _pointer, frozen_arrays, table_arrays
from .table import update_arrays
from .thresholds import NGRAM_MAX, NGRAM_MIN

CTX = 0
DYN = CTX + TABLE_WORDS
STAT = DYN + TABLE_WORDS
SEQ = STAT + FROZEN_WORDS
BUF = SEQ + 2
N = BUF + 2
N_DRAFT, NMIN, NMAX = N + 1, N + 2, N + 3
STATE_WORDS = NMAX + 1


@njit(cache=True, inline="always")
def _int32s(state, at):
    return carray(_pointer(state[at]), (state[at + 1],), np.int32)


@njit(cache=True, nogil=True)
def draft_state(state):
    """draft_arrays for the sequence of ``state``: the count drafted into its buffer, or CORRUPT."""
    c_slots, c_tags, c_tok, c_cnt, _, _ = table_arrays(state, CTX)
    d_slots, d_tags, d_tok, d_cnt, _, d_cand = table_arrays(state, DYN)
    keys, fuse, params, offsets, stats, stok, scnt = frozen_arrays(state, STAT)
    return draft_arrays(
        _int32s(state, SEQ), state[N], state[N_DRAFT], state[NMIN], state[NMAX],
        c_slots, c_tags, c_tok, c_cnt, d_slots, d_tags, d_tok, d_cnt, d_cand,
        keys, fuse, params, offsets, stats, stok, scnt, _int32s(state, BUF),
    )  # fmt: skip


@njit(cache=True, nogil=True)
def accept_state(state, tokens, resume):
    """Append ``tokens`` to the sequence and count their n-grams in the context table.

    The sequence buffer must have room (the caller grows it). Returns -1 when
    done, else ``position << 2 | status`` as update_arrays: the caller grows
    the table, refreshes the handle and calls again with ``resume =
    position``; the sequence length advances only once everything is counted.
    """
    seq = _int32s(state, SEQ)
    for i in range(tokens.shape[0]):
        seq[state[N] + i] = tokens[i]
    return _count(state, seq, tokens.shape[0], resume)


@njit(cache=True, nogil=True)
def accept_token(state, token, resume):
    """accept_state of the one token ``token`` (a decoding loop's commonest call)."""
    seq = _int32s(state, SEQ)
    seq[state[N]] = token
    return _count(state, seq, 1, resume)


@njit(cache=True, inline="always")
def _count(state, seq, k, resume):
    n = state[N] + k
    slots, tags, tok, cnt, meta, cand = table_arrays(state, CTX)
    r = update_arrays(slots, tags, tok, cnt, meta, cand, seq, n, k, NGRAM_MIN, NGRAM_MAX, resume)
    if r < 0:
        state[N] = n
    return r


@njit(cache=True, nogil=True, inline="always")
def _draft_row(states, row, out, lengths, i):
    state = states[row]
    d = draft_state(state)
    if d < 0:
        lengths[i] = d
        return
    buf = _int32s(state, BUF)
    tail = min(state[N], NGRAM_MAX)
    for j in range(d):
        out[i, j] = buf[tail + j]
    lengths[i] = d


@njit(cache=True, nogil=True, inline="always")
def _request_row(states, row):
    """Request the lines the first draft step of states[row] reads (kernels/draft.py)."""
    state = states[row]
    c_slots, c_tags, _, _, _, _ = table_arrays(state, CTX)
    d_slots, d_tags, _, _, _, d_cand = table_arrays(state, DYN)
    keys, fuse, params, _, _, _, _ = frozen_arrays(state, STAT)
    prefetch_step(
        _int32s(state, SEQ), state[N], state[NMIN], state[NMAX], c_slots, c_tags,
        d_slots, d_tags, d_cand, fuse, params, keys.shape[0],
    )  # fmt: skip


@njit(cache=True, nogil=True, inline="always")
def _draft_span(states, rows, out, lengths, lo, hi):
    # Each sequence's first lines are requested while the one before drafts:
    # the sequences' tables are far apart in memory, and their misses overlap.
    if lo < hi:
        _request_row(states, rows[lo])
    for i in range(lo, hi):
        if i + 1 < hi:
            _request_row(states, rows[i + 1])
        _draft_row(states, rows[i], out, lengths, i)


@njit(cache=True, nogil=True)
def draft_rows(states, rows, out, lengths):
    """draft_state for states[rows[i]] into out[i, :lengths[i]], one sequence after another."""
    _draft_span(states, rows, out, lengths, 0, rows.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def draft_rows_parallel(states, rows, out, lengths, n_threads):
    """draft_rows over n_threads threads, a contiguous share of rows each (rows distinct)."""
    n = rows.shape[0]
    for t in prange(n_threads):
        _draft_span(states, rows, out, lengths, n * t // n_threads, n * (t + 1) // n_threads)


NEED_SEQ = 3  # an accept status beside table.NEED_SLOTS / NEED_POOL: the sequence is full


@njit(cache=True, nogil=True, inline="always")
def _accept_span(states, rows, tokens, offsets, status, lo, hi):
    for i in range(lo, hi):
        state = states[rows[i]]
        a, b = offsets[i], offsets[i + 1]
        if state[N] + (b - a) > state[SEQ + 1]:
            status[i] = NEED_SEQ
            continue
        status[i] = accept_state(state, tokens[a:b], 0)


@njit(cache=True, nogil=True)
def accept_rows(states, rows, tokens, offsets, status):
    """accept_state for states[rows[i]] with tokens[offsets[i]:offsets[i+1]], where it fits.

    status[i] is -1 for a row done, else what accept_state returned, or
    NEED_SEQ when the row's sequence buffer is too short: the caller makes
    room for those rows and accepts them again; the others are done.
    """
    _accept_span(states, rows, tokens, offsets, status, 0, rows.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def accept_rows_parallel(states, rows, tokens, offsets, status, n_threads):
    """accept_rows over n_threads threads, a contiguous share of rows each (rows distinct)."""
    n = rows.shape[0]
    for t in prange(n_threads):
        lo, hi = n * t // n_threads, n * (t + 1) // n_threads
        _accept_span(states, rows, tokens, offsets, status, lo, hi)


MISMATCH = 4  # a sync status: the row does not extend the sequence (or holds a negative id)


@njit(cache=True, inline="always")
def _extends(seq, n, row, m):
    """Whether row[:m] starts with seq[:n] and its other ids are all >= 0."""
    if m < n:
        return False
    # Branch-free reductions that LLVM vectorizes: most rows do match.
    differ = np.int32(0)
    for j in range(n):
        differ |= seq[j] ^ row[j]
    sign = np.int32(0)
    for j in range(n, m):
        sign |= row[j]
    return differ == 0 and sign >= 0


@njit(cache=True, nogil=True, inline="always")
def _sync_span(states, rows, token_ids, sources, lengths, status, lo, hi):
    for i in range(lo, hi):
        state = states[rows[i]]
        n, m = state[N], lengths[i]
        row = token_ids[sources[i]]
        if not _extends(_int32s(state, SEQ), n, row, m):
            status[i] = MISMATCH
        elif m == n:
            status[i] = -1
        elif m > state[SEQ + 1]:
            status[i] = NEED_SEQ
        else:
            status[i] = accept_state(state, row[n:m], 0)


@njit(cache=True, nogil=True)
def sync_rows(states, rows, token_ids, sources, lengths, status):
    """Follow whole sequences: token_ids[sources[i], :lengths[i]] for states[rows[i]].

    A row that extends its state's sequence has its new tokens accepted
    (status as accept_rows); one that does not, or whose new tokens include a
    negative id, gets MISMATCH and its state is left as it was. The known
    prefix is compared whole: rows that carry no identity but their content
    have no cheaper exact test.
    """
    _sync_span(states, rows, token_ids, sources, lengths, status, 0, rows.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def sync_rows_parallel(states, rows, token_ids, sources, lengths, status, n_threads):
    """sync_rows over n_threads threads, a contiguous share of rows each (rows distinct)."""
    n = rows.shape[0]
    for t in prange(n_threads):
        lo, hi = n * t // n_threads, n * (t + 1) // n_threads
        _sync_span(states, rows, token_ids, sources, lengths, status, lo, hi)
