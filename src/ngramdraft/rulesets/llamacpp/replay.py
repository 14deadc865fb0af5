"""llama.cpp's rules replaying a stream as lookup-stats does: one kernel call per chunk.

The chunk loop (:func:`replay_chunk`) runs over a drafter's state
(``state.py``) with the same draft step a Drafter runs (``step.py``), the
context updated in the loop; the protocol and the result are
``drafting/replay.py``'s.
"""

import os
import time
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from ...build.static import as_static
from ...caches.base import Cache
from ...caches.ngram import NgramCache, as_mutable
from ...drafting.drafter import damaged
from ...drafting.replay import Chunks, ReplayResult, count_call
from ...files.tokens import tokens_of
from ...kernels import table
from ...kernels.frozen import CORRUPT
from ...kernels.handles import frozen_at, int32s, table_at
from ...validation import check_int
from .state import (
    BUF,
    CTX,
    DYN,
    N_DRAFT,
    NMAX,
    NMIN,
    NO_STATIC,
    SEQ,
    STAT,
    new_state,
    point,
    point_buffer,
)
from .step import NGRAM_MAX, NGRAM_MIN, draft_step, prefetch_step

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ...caches.static import StaticCache


def replay(
    tokens: "ArrayLike | str | os.PathLike[str]",
    n_ctx: int = 4096,
    n_draft: int = 8,
    static: "StaticCache | Cache | str | os.PathLike[str] | None" = None,
    dynamic: "NgramCache | Cache | str | os.PathLike[str] | None" = None,
    *,
    dump: bool = False,
    quiet: bool = True,
    tokenizer: object = None,
) -> ReplayResult:
    """:func:`ngramdraft.replay` by llama.cpp's rules (its documentation)."""
    seq = tokens_of(tokens)
    n_ctx = check_int(n_ctx, "n_ctx", 2)
    n_draft = check_int(n_draft, "n_draft", 1, 4096)
    t0 = time.perf_counter()
    _load_kernels(n_draft)
    t_startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    opened = None if static is None else as_static(static, tokenizer=tokenizer)
    if opened is not None:
        opened.check_tokens(seq)
        opened.prefault().done.wait()  # mapping and checking the pages is loading, not drafting
    dyn = as_mutable(dynamic, "dynamic")
    if dyn is dynamic:  # the caller's cache is not modified
        dyn = NgramCache.from_cache(dyn)
    t_load = time.perf_counter() - t0

    chunks = Chunks(seq, n_ctx, n_draft, dump)
    # A chunk adds fewer than 4 * n_ctx n-grams, and a part's pool rooms sum to less
    # than four times its length: sized so, the context never grows.
    size = chunks.size
    ctx = NgramCache("context")
    ctx.reserve(4 * size, 8 * size)
    out = np.zeros(size, dtype=np.int32)
    buf = np.zeros(NGRAM_MAX + n_draft, dtype=np.int32)
    state = _state(n_draft, ctx, dyn, NO_STATIC if opened is None else opened.handle, out, buf)
    counters = chunks.counters
    for start in chunks.each(quiet):
        before = counters.copy()
        while True:
            counters[:] = before
            counters[3] = 0
            t1 = time.perf_counter()
            status = replay_chunk(
                state, seq[start : start + n_ctx], start, chunks.chunk_dump, counters
            )
            chunks.t_draft += time.perf_counter() - t1
            if status == CORRUPT:
                raise damaged(opened)
            if status == table.OK:
                break
            ctx.grow(status)  # never with the sizes above; kept exact anyway
            ctx.clear()
        chunks.dumped()
        dyn.table = table.merge(dyn.table, ctx.table)
        ctx.clear()
    if opened is not None:
        opened.prefault().wait()  # figures drafted from a damaged file are not reported
    return chunks.result(t_load, t_startup)


def _state(
    n_draft: int,
    ctx: NgramCache,
    dyn: NgramCache,
    static_handle: np.ndarray,
    out: np.ndarray,
    buf: np.ndarray,
) -> np.ndarray:
    """A drafter's state for replay's one sequence: ``out`` is the sequence buffer."""
    state = new_state(n_draft, (NGRAM_MIN, NGRAM_MAX))
    point(state, CTX, ctx.handle)
    point(state, DYN, dyn.handle)
    point(state, STAT, static_handle)
    point_buffer(state, SEQ, out)
    point_buffer(state, BUF, buf)
    return state


@njit(cache=True, nogil=True)
def replay_chunk(
    state: np.ndarray,
    chunk: np.ndarray,
    chunk_start: int,
    dump: np.ndarray,
    counters: np.ndarray,
) -> int:
    """Replay one chunk; returns OK, CORRUPT (damaged static cache) or the table's need to grow.

    ``state`` is a drafter's state whose sequence buffer holds a chunk. The
    context table must be large enough for the chunk (the caller sizes it,
    and on a growth status grows it, clears it and replays the chunk again).
    counters (int64): [n_calls, n_drafted, n_accept, dump words used].
    dump, when not empty, receives `chunk_start position n tokens...` per call.
    """
    views = (
        table_at(state, CTX),
        table_at(state, DYN),
        frozen_at(state, STAT),
        int32s(state, SEQ),
        int32s(state, BUF),
        state[N_DRAFT],
        (state[NMIN], state[NMAX]),
    )
    return _replay_loop(views, chunk, chunk_start, dump, counters)


@njit(cache=True, nogil=True, _nrt=False)
def _replay_loop(
    views: tuple[Any, ...],
    chunk: np.ndarray,
    chunk_start: int,
    dump: np.ndarray,
    counters: np.ndarray,
) -> int:
    """replay_chunk's loop, given the state's views (tables, buffers, sizes) once.

    It allocates nothing, so it runs without numba's runtime: no reference
    count is touched, and drafting and updating are inlined into it.
    """
    ctx, dyn, stat, out, buf, n_draft, sizes = views
    n_ctx = chunk.shape[0]
    out[0] = chunk[0]
    n_out = 1
    while n_out < n_ctx:
        d = draft_step(out, n_out, n_draft, sizes, ctx, dyn, stat, buf)
        if d == CORRUPT:
            return CORRUPT
        tail = min(n_out, NGRAM_MAX)
        count_call(counters, dump, chunk_start, n_out, buf, tail, d)
        accepted = 0
        while accepted < d and n_out < n_ctx and buf[tail + accepted] == chunk[n_out]:
            accepted += 1
            counters[2] += 1
            out[n_out] = chunk[n_out]
            n_out += 1
            status = table.append_token(ctx, out, n_out)
            if status != table.OK:
                return status
        if n_out < n_ctx:
            out[n_out] = chunk[n_out]
            n_out += 1
            prefetch_step(out, n_out, sizes, ctx, dyn, stat)
            status = table.append_token(ctx, out, n_out)
            if status != table.OK:
                return status
    return table.OK


def _load_kernels(n_draft: int) -> None:
    """Load (or compile) every kernel replay runs, on empty data.

    The first call of each kernel in a process loads its compiled code and
    numba's runtime; that is neither loading caches nor drafting, so replay
    reports it apart (t_startup), before either clock runs.
    """
    ctx, dyn = NgramCache("context"), NgramCache()
    dyn.table = table.merge(dyn.table, ctx.table)
    buf = np.zeros(NGRAM_MAX + n_draft, dtype=np.int32)
    state = _state(n_draft, ctx, dyn, NO_STATIC, np.zeros(2, np.int32), buf)
    replay_chunk(state, np.zeros(2, np.int32), 0, np.zeros(0, np.int32), np.zeros(4, np.int64))
