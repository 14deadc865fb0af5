"""One sequence's kernel state, and the kernels that draft and accept from it.

A drafter's state is one int64 array (layout below). Its caches appear in it
as the address of each cache's own handle (``kernels/handles.py``): an
``NgramCache`` rewrites its handle whenever its table is replaced (a growth,
a merge), so a state never goes stale and no caller re-points anything. A
call from Python checks and unboxes one array instead of twenty, so the call
costs less than the drafting it does; a BatchDrafter keeps its sequences'
states as the rows of one table and drafts for all of them in one call.

======  =====  ============================================================
words   name   contents
======  =====  ============================================================
0       CTX    address of the context cache's table handle
1       DYN    address of the dynamic cache's table handle
2       STAT   address of the static cache's frozen handle
3-4     SEQ    sequence buffer: address, capacity (int32)
5-6     BUF    draft buffer: address, length (int32, NGRAM_MAX + n_draft)
7       N      tokens in the sequence
8-10           n_draft, ngram_min, ngram_max
======  =====  ============================================================

Replay (``drafting/replay.py``) keeps the same state for its one sequence,
so drafter and replay run the one draft step of ``rules/llamacpp.py``.
"""

import numpy as np
from numba import njit, prange

from ..kernels.extends import extends
from ..kernels.frozen import empty_frozen
from ..kernels.handles import frozen_at, frozen_handle, int32s, table_at
from ..kernels.table import update_from
from ..rules.llamacpp import NGRAM_MAX, NGRAM_MIN, draft_step, prefetch_step

CTX, DYN, STAT = 0, 1, 2
SEQ = 3
BUF = 5
N = 7
N_DRAFT, NMIN, NMAX = 8, 9, 10
STATE_WORDS = 11
NEED_SEQ = 3  # an accept status beside table.NEED_SLOTS / NEED_POOL: the sequence is full
MISMATCH = 4  # a sync status: the row does not extend the sequence (or holds a negative id)

# The handle of "no static cache", for states without one (its arrays live here).
_EMPTY = empty_frozen()
NO_STATIC = frozen_handle(_EMPTY)


def new_state(n_draft: int, sizes: tuple[int, int]) -> np.ndarray:
    """A state with its sizes set; its caches and buffers are pointed by the caller."""
    state = np.zeros(STATE_WORDS, dtype=np.int64)
    state[N_DRAFT], state[NMIN], state[NMAX] = n_draft, *sizes
    return state


def point(state: np.ndarray, at: int, array: np.ndarray) -> None:
    """Store the address of ``array`` (a cache's handle) at word ``at`` of ``state``.

    ``at`` is CTX, DYN or STAT. The state borrows: the caller keeps the
    cache, whose handle lives as long as it does.
    """
    state[at] = array.ctypes.data


def point_buffer(state: np.ndarray, at: int, buffer: np.ndarray) -> None:
    """Store the address and length of an int32 ``buffer`` at SEQ or BUF."""
    state[at], state[at + 1] = buffer.ctypes.data, len(buffer)


@njit(cache=True, inline="always")
def _tables(state):
    """(context, dynamic, static) of a state, rebuilt from the handles it points at."""
    return table_at(state, CTX), table_at(state, DYN), frozen_at(state, STAT)


@njit(cache=True, nogil=True, inline="always")
def draft_in(state, ctx, dyn, stat):
    """draft_step for the state's sequence, its tables given: the count drafted, or CORRUPT."""
    return draft_step(
        int32s(state, SEQ),
        state[N],
        state[N_DRAFT],
        (state[NMIN], state[NMAX]),
        ctx,
        dyn,
        stat,
        int32s(state, BUF),
    )


@njit(cache=True, nogil=True)
def draft_state(state):
    """draft_step for the state's sequence: the count drafted into its buffer, or CORRUPT."""
    ctx, dyn, stat = _tables(state)
    return draft_in(state, ctx, dyn, stat)


@njit(cache=True, nogil=True)
def accept_state(state, tokens, resume):
    """Append ``tokens`` to the sequence and count their n-grams in the context table.

    The sequence buffer must have room (the caller grows it). Returns -1 when
    done, else ``position << 2 | status`` as table.update_from: the caller
    grows the context (its handle follows) and calls again with ``resume =
    position``; the sequence length advances only once everything is counted.
    """
    seq = int32s(state, SEQ)
    for i in range(tokens.shape[0]):
        seq[state[N] + i] = tokens[i]
    return _count(state, seq, tokens.shape[0], resume)


@njit(cache=True, nogil=True)
def accept_token(state, token, resume):
    """accept_state of the one token ``token`` (a decoding loop's commonest call)."""
    seq = int32s(state, SEQ)
    seq[state[N]] = token
    return _count(state, seq, 1, resume)


@njit(cache=True, inline="always")
def _count(state, seq, k, resume):
    n = state[N] + k
    r = update_from(table_at(state, CTX), seq, n, k, (NGRAM_MIN, NGRAM_MAX), resume)
    if r < 0:
        state[N] = n
    return r


@njit(cache=True, nogil=True, inline="always")
def request_state(state, ctx, dyn, stat):
    """Request the lines the first draft step of the state's sequence reads (rules' prefetch)."""
    prefetch_step(int32s(state, SEQ), state[N], (state[NMIN], state[NMAX]), ctx, dyn, stat)


@njit(cache=True, nogil=True, inline="always")
def _draft_row(states, row, out, lengths, i):
    state = states[row]
    ctx, dyn, stat = _tables(state)
    d = draft_in(state, ctx, dyn, stat)
    if d < 0:
        lengths[i] = d
        return
    buf = int32s(state, BUF)
    tail = min(state[N], NGRAM_MAX)
    for j in range(d):
        out[i, j] = buf[tail + j]
    lengths[i] = d


@njit(cache=True, nogil=True, inline="always")
def _request_row(states, row):
    state = states[row]
    ctx, dyn, stat = _tables(state)
    request_state(state, ctx, dyn, stat)


@njit(cache=True, nogil=True)
def _draft_span(states, rows, out, lengths, lo, hi):
    # Each sequence's first lines are requested while the one before drafts:
    # the sequences' tables are far apart in memory, and their misses overlap.
    # A call of its own, not inlined, for each thread of the parallel kernels:
    # numba's parfor analysis cannot follow the tables' namedtuples.
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


@njit(cache=True, nogil=True)
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


@njit(cache=True, nogil=True)
def _sync_span(states, rows, token_ids, sources, lengths, status, lo, hi):
    for i in range(lo, hi):
        state = states[rows[i]]
        n, m = state[N], lengths[i]
        row = token_ids[sources[i]]
        if not extends(int32s(state, SEQ), n, row, m):
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
    negative id, gets MISMATCH and its state is left as it was
    (``kernels/extends.py``).
    """
    _sync_span(states, rows, token_ids, sources, lengths, status, 0, rows.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def sync_rows_parallel(states, rows, token_ids, sources, lengths, status, n_threads):
    """sync_rows over n_threads threads, a contiguous share of rows each (rows distinct)."""
    n = rows.shape[0]
    for t in prange(n_threads):
        lo, hi = n * t // n_threads, n * (t + 1) // n_threads
        _sync_span(states, rows, token_ids, sources, lengths, status, lo, hi)
