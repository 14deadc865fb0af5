"""The suffix rules' step over many sequences in one call: a batch's kernels.

Each sequence's state (``rules/suffix.py``) is given by its address, as
(address, length) pairs, so that one call takes any set of SuffixDrafters
(``drafting/suffix_batch.py``); each ``_parallel`` twin splits the sequences
over threads, as llama.cpp's rules' batch does (``drafting/state.py``). The
sequences of one call are distinct: each writes only its own state, index
and output row, and reads the earlier requests and the corpus.
"""

from numba import njit, prange

from ..kernels.extends import extends
from ..kernels.handles import POSITIONS_N, int32s, int64s, positions_at
from ..rules import suffix as R


@njit(cache=True, nogil=True)
def _draft_span(states, out, lengths, lo, hi):
    for i in range(lo, hi):
        st = int64s(states, 2 * i)
        d = R.draft_step(st)
        out[i, :d] = int32s(st, R.OUT)[:d]
        lengths[i] = d


@njit(cache=True, nogil=True)
def draft_rows(states, out, lengths):
    """``draft_step`` for many sequences in one call: ``states`` holds each one's state as
    (address, length); row i of out gets sequence i's draft, lengths[i] its count."""
    _draft_span(states, out, lengths, 0, lengths.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def draft_rows_parallel(states, out, lengths, n_threads):
    """``draft_rows`` over n_threads threads, a contiguous share of the sequences each."""
    n = lengths.shape[0]
    for t in prange(n_threads):
        _draft_span(states, out, lengths, n * t // n_threads, n * (t + 1) // n_threads)


# A sequence's outcome in a batch's accept or sync: its new tokens accepted
# (or, told not to accept, found to extend it), its index without room for
# them (the caller grows it and accepts them), or not its sequence (left as it was).
DONE, NEED_ROOM, MISMATCH = 0, 1, 2


@njit(cache=True, nogil=True)
def _accept_span(states, flat, offsets, status, lo, hi):
    for i in range(lo, hi):
        st = int64s(states, 2 * i)
        seq, _, _, seq_h = positions_at(st, R.SEQ_INDEX)
        new = flat[offsets[i] : offsets[i + 1]]
        if seq_h[POSITIONS_N] + new.shape[0] > seq.shape[0]:
            status[i] = NEED_ROOM
        else:
            R.accept_step(st, new)
            status[i] = DONE


@njit(cache=True, nogil=True)
def accept_rows(states, flat, offsets, status):
    """``accept_step`` for many sequences in one call: sequence i's new tokens are
    flat[offsets[i]:offsets[i + 1]] (the sequences distinct); status as ``DONE`` etc."""
    _accept_span(states, flat, offsets, status, 0, offsets.shape[0] - 1)


@njit(cache=True, nogil=True, parallel=True)
def accept_rows_parallel(states, flat, offsets, status, n_threads):
    """``accept_rows`` over n_threads threads, a contiguous share of the sequences each."""
    n = offsets.shape[0] - 1
    for t in prange(n_threads):
        _accept_span(states, flat, offsets, status, n * t // n_threads, n * (t + 1) // n_threads)


@njit(cache=True, nogil=True)
def _sync_span(states, token_ids, sources, lengths, accept, status, lo, hi):
    for i in range(lo, hi):
        st = int64s(states, 2 * i)
        seq, _, _, seq_h = positions_at(st, R.SEQ_INDEX)
        n, m, row = seq_h[POSITIONS_N], lengths[i], token_ids[sources[i]]
        if not extends(seq, n, row, m):
            status[i] = MISMATCH
        elif accept and m > seq.shape[0]:
            status[i] = NEED_ROOM
        else:
            if accept:
                R.accept_step(st, row[n:m])
            status[i] = DONE


@njit(cache=True, nogil=True)
def sync_rows(states, token_ids, sources, lengths, accept, status):
    """Follow whole sequences: sequence i is token_ids[sources[i], :lengths[i]]; where
    that extends what it holds, the new tokens are accepted if ``accept``; status as
    ``DONE`` etc."""
    _sync_span(states, token_ids, sources, lengths, accept, status, 0, lengths.shape[0])


@njit(cache=True, nogil=True, parallel=True)
def sync_rows_parallel(states, token_ids, sources, lengths, accept, status, n_threads):
    """``sync_rows`` over n_threads threads, a contiguous share of the sequences each."""
    n = lengths.shape[0]
    for t in prange(n_threads):
        lo, hi = n * t // n_threads, n * (t + 1) // n_threads
        _sync_span(states, token_ids, sources, lengths, accept, status, lo, hi)
