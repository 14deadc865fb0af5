"""One sequence's kernel state by llama.cpp's rules, and the kernels that draft and accept.

A drafter's state is one int64 array (layout below). Its caches appear in it
as the address of each cache's own handle (``kernels/handles.py``): an
``NgramCache`` rewrites its handle whenever its table is replaced (a growth,
a merge), so a state never goes stale and no caller re-points anything. A
call from Python checks and unboxes one array instead of twenty, so the call
costs less than the drafting it does; a BatchDrafter keeps its sequences'
states as the rows of one table and drafts for all of them in one call
(``rows.py``).

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

Replay (``replay.py``) keeps the same state for its one sequence, so drafter
and replay run the one draft step of ``step.py``.
"""

import numpy as np
from numba import njit

from ...kernels.frozen import empty_frozen
from ...kernels.handles import frozen_at, frozen_handle, int32s, table_at
from ...kernels.table import update_from
from .step import NGRAM_MAX, NGRAM_MIN, draft_step, prefetch_step

CTX, DYN, STAT = 0, 1, 2
SEQ = 3
BUF = 5
N = 7
N_DRAFT, NMIN, NMAX = 8, 9, 10
STATE_WORDS = 11

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
def tables(state):
    """(context, dynamic, static) of a state, rebuilt from the handles it points at."""
    return table_at(state, CTX), table_at(state, DYN), frozen_at(state, STAT)


@njit(cache=True, nogil=True)
def draft_state(state):
    """draft_step for the state's sequence: the count drafted into its buffer, or CORRUPT.

    The one kernel that inlines the draft step for a state: a Drafter calls it,
    and a batch's span calls it for each row, so the step is compiled once.
    """
    ctx, dyn, stat = tables(state)
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
