"""llama.cpp's rules over many sequences in one call: a batch's kernels.

A BatchDrafter (``batch.py``) keeps its sequences' states (``state.py``) as
the rows of one table; each kernel here runs the draft, accept or sync of
one sequence (the same kernels a Drafter calls) for the rows it is given,
and each ``_parallel`` twin splits the rows over threads. The rows of one
call are distinct: each writes only its own state and sequence, and reads
the shared caches. Statuses are every batch's (``drafting/batch.py``).

The serial kernels pass their first row as ``np.int64(0)``, not ``0``: numba
compiles a kernel called with a constant once more, for that constant. The
draft span calls ``draft_state`` rather than inlining the draft step, so the
step is compiled once for a Drafter and a batch; together these took half a
minute off an installation's first run.
"""

import numpy as np
from numba import njit, prange

from ...drafting.batch import MISMATCH, NEED_ROOM
from ...kernels.extends import extends
from ...kernels.handles import int32s
from .state import BUF, SEQ, N, accept_state, draft_state, request_state, tables
from .step import NGRAM_MAX


@njit(cache=True, nogil=True, inline="always")
def _draft_row(states, row, out, lengths, i):
    state = states[row]
    d = draft_state(state)
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
    ctx, dyn, stat = tables(state)
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
    _draft_span(states, rows, out, lengths, np.int64(0), rows.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def draft_rows_parallel(states, rows, out, lengths, n_threads):
    """draft_rows over n_threads threads, a contiguous share of rows each (rows distinct)."""
    n = rows.shape[0]
    for t in prange(n_threads):
        _draft_span(states, rows, out, lengths, n * t // n_threads, n * (t + 1) // n_threads)


@njit(cache=True, nogil=True)
def _accept_span(states, rows, tokens, starts, ends, status, lo, hi):
    for i in range(lo, hi):
        state = states[rows[i]]
        a, b = starts[i], ends[i]
        if state[N] + (b - a) > state[SEQ + 1]:
            status[i] = NEED_ROOM
            continue
        status[i] = accept_state(state, tokens[a:b], np.int64(0))


@njit(cache=True, nogil=True)
def accept_rows(states, rows, tokens, starts, ends, status):
    """accept_state for states[rows[i]] with tokens[starts[i]:ends[i]], where it fits.

    status[i] is -1 for a row done, else what accept_state returned, or
    NEED_ROOM when the row's sequence buffer is too short: the caller makes
    room for those rows and accepts them again; the others are done.
    """
    _accept_span(states, rows, tokens, starts, ends, status, np.int64(0), rows.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def accept_rows_parallel(states, rows, tokens, starts, ends, status, n_threads):
    """accept_rows over n_threads threads, a contiguous share of rows each (rows distinct)."""
    n = rows.shape[0]
    for t in prange(n_threads):
        lo, hi = n * t // n_threads, n * (t + 1) // n_threads
        _accept_span(states, rows, tokens, starts, ends, status, lo, hi)


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
            status[i] = NEED_ROOM
        else:
            status[i] = accept_state(state, row[n:m], np.int64(0))


@njit(cache=True, nogil=True)
def sync_rows(states, rows, token_ids, sources, lengths, status):
    """Follow whole sequences: token_ids[sources[i], :lengths[i]] for states[rows[i]].

    A row that extends its state's sequence has its new tokens accepted
    (status as accept_rows); one that does not, or whose new tokens include a
    negative id, gets MISMATCH and its state is left as it was
    (``kernels/extends.py``).
    """
    _sync_span(states, rows, token_ids, sources, lengths, status, np.int64(0), rows.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def sync_rows_parallel(states, rows, token_ids, sources, lengths, status, n_threads):
    """sync_rows over n_threads threads, a contiguous share of rows each (rows distinct)."""
    n = rows.shape[0]
    for t in prange(n_threads):
        lo, hi = n * t // n_threads, n * (t + 1) // n_threads
        _sync_span(states, rows, token_ids, sources, lengths, status, lo, hi)
