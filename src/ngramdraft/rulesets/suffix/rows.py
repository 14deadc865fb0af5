"""The suffix rules' step over many sequences in one call: a batch's kernels.

Each sequence's state (``state.py``) is given by its address, as (address,
length) pairs, so that one call takes any set of SuffixDrafters
(``batch.py``); each ``_parallel`` twin splits the sequences over threads,
as llama.cpp's rules' batch does. The sequences of one call are distinct:
each writes only its own state, index and output row, and reads the earlier
requests and the corpus. Statuses are every batch's (``drafting/batch.py``).

The serial kernels pass their first row as ``np.int64(0)``, not ``0``, as
llama.cpp's rules' do (their ``rows.py`` says why): a constant would have
numba compile each span a second time.
"""

import numpy as np
from numba import njit, prange

from ...drafting.batch import DONE, MISMATCH, NEED_ROOM
from ...kernels.extends import extends
from ...kernels.handles import POSITIONS_N, int32s, int64s, positions_at
from .state import OUT, SEQ_INDEX
from .step import accept_step, draft_step


@njit(cache=True, nogil=True)
def _draft_span(states, out, lengths, lo, hi):
    for i in range(lo, hi):
        st = int64s(states, 2 * i)
        d = draft_step(st)
        out[i, :d] = int32s(st, OUT)[:d]
        lengths[i] = d


@njit(cache=True, nogil=True)
def draft_rows(states, out, lengths):
    """``draft_step`` for many sequences in one call: ``states`` holds each one's state as
    (address, length); row i of out gets sequence i's draft, lengths[i] its count."""
    _draft_span(states, out, lengths, np.int64(0), lengths.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def draft_rows_parallel(states, out, lengths, n_threads):
    """``draft_rows`` over n_threads threads, a contiguous share of the sequences each."""
    n = lengths.shape[0]
    for t in prange(n_threads):
        _draft_span(states, out, lengths, n * t // n_threads, n * (t + 1) // n_threads)


@njit(cache=True, nogil=True)
def _accept_span(states, flat, starts, ends, status, lo, hi):
    for i in range(lo, hi):
        st = int64s(states, 2 * i)
        seq, _, _, seq_h = positions_at(st, SEQ_INDEX)
        new = flat[starts[i] : ends[i]]
        if seq_h[POSITIONS_N] + new.shape[0] > seq.shape[0]:
            status[i] = NEED_ROOM
        else:
            accept_step(st, new)
            status[i] = DONE


@njit(cache=True, nogil=True)
def accept_rows(states, flat, starts, ends, status):
    """``accept_step`` for many sequences in one call: sequence i's new tokens are
    flat[starts[i]:ends[i]] (the sequences distinct); status DONE, or NEED_ROOM where
    the sequence's index has no room for them (the caller grows it and accepts them)."""
    _accept_span(states, flat, starts, ends, status, np.int64(0), starts.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def accept_rows_parallel(states, flat, starts, ends, status, n_threads):
    """``accept_rows`` over n_threads threads, a contiguous share of the sequences each."""
    n = starts.shape[0]
    for t in prange(n_threads):
        _accept_span(
            states, flat, starts, ends, status, n * t // n_threads, n * (t + 1) // n_threads
        )


@njit(cache=True, nogil=True)
def _sync_span(states, token_ids, sources, lengths, accept, status, lo, hi):
    for i in range(lo, hi):
        st = int64s(states, 2 * i)
        seq, _, _, seq_h = positions_at(st, SEQ_INDEX)
        n, m, row = seq_h[POSITIONS_N], lengths[i], token_ids[sources[i]]
        if not extends(seq, n, row, m):
            status[i] = MISMATCH
        elif accept and m > seq.shape[0]:
            status[i] = NEED_ROOM
        else:
            if accept:
                accept_step(st, row[n:m])
            status[i] = DONE


@njit(cache=True, nogil=True)
def sync_rows(states, token_ids, sources, lengths, accept, status):
    """Follow whole sequences: sequence i is token_ids[sources[i], :lengths[i]]; where
    that extends what it holds, the new tokens are accepted if ``accept``; status DONE,
    NEED_ROOM as accept_rows', or MISMATCH where the row is another sequence (left as
    it was)."""
    _sync_span(states, token_ids, sources, lengths, accept, status, np.int64(0), lengths.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def sync_rows_parallel(states, token_ids, sources, lengths, accept, status, n_threads):
    """``sync_rows`` over n_threads threads, a contiguous share of the sequences each."""
    n = lengths.shape[0]
    for t in prange(n_threads):
        lo, hi = n * t // n_threads, n * (t + 1) // n_threads
        _sync_span(states, token_ids, sources, lengths, accept, status, lo, hi)
