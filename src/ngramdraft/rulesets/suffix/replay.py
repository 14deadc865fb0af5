"""The suffix rules replaying a stream as lookup-stats does: one kernel call per chunk.

A chunk is one SuffixDrafter sequence, finished into the drafter's earlier
requests as llama.cpp's replay merges a chunk into the dynamic cache; its
steps are one kernel call (:func:`replay_chunk`). The protocol and the
result are ``drafting/replay.py``'s.
"""

import os
import time
from typing import TYPE_CHECKING

import numpy as np
from numba import njit

from ...caches.requests import RequestMemory
from ...caches.suffix_corpus import SuffixCorpus
from ...drafting.replay import Chunks, ReplayResult, count_call
from ...files.tokens import tokens_of
from ...kernels.handles import int32s
from ...validation import check_int
from .drafter import SuffixDrafter
from .state import OUT
from .step import accept_step, draft_step

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


def replay(
    tokens: "ArrayLike | str | os.PathLike[str]",
    n_ctx: int = 4096,
    n_draft: int = 8,
    static: "SuffixCorpus | str | os.PathLike[str] | None" = None,
    dynamic: "RequestMemory | str | os.PathLike[str] | None" = None,
    *,
    dump: bool = False,
    quiet: bool = True,
    tokenizer: object = None,
) -> ReplayResult:
    """replay's protocol drafted by the suffix rules: each chunk remembered for the next ones.

    ``dynamic`` (a requests file's path, or a RequestMemory) holds the
    earlier requests the replay starts from. The chunks are remembered in a
    copy: neither the file nor the memory is changed, as lookup-stats leaves
    its -lcd file and ``replay`` the caller's cache as they were (a replay
    that saved its text would draft that text from memory the next time).
    """
    seq = tokens_of(tokens)
    n_ctx = check_int(n_ctx, "n_ctx", 2)
    n_draft = check_int(n_draft, "n_draft", 1, 4096)
    t0 = time.perf_counter()
    drafter = SuffixDrafter(static, _own_memory(dynamic), n_draft=n_draft, tokenizer=tokenizer)
    t_load = time.perf_counter() - t0
    chunks = Chunks(seq, n_ctx, n_draft, dump)
    drafter.start(seq[:1])  # loads the kernels, apart from the clock that times drafting
    replay_chunk(drafter.kernel_state, seq[:1], 0, np.zeros(0, np.int32), np.zeros(4, np.int64))
    t_startup = time.perf_counter() - t0 - t_load
    counters = chunks.counters
    for start in chunks.each(quiet):
        chunk = seq[start : start + n_ctx]
        t1 = time.perf_counter()
        drafter.start(chunk[:1])
        drafter.reserve(len(chunk))
        counters[3] = 0
        with drafter.dynamic.lock:
            replay_chunk(drafter.kernel_state, chunk, start, chunks.chunk_dump, counters)
        drafter.finish()
        chunks.t_draft += time.perf_counter() - t1
        chunks.dumped()
    drafter.wait_checked()  # figures drafted from a damaged file are not reported
    drafter.flush()
    return chunks.result(t_load, t_startup)


def _own_memory(
    dynamic: RequestMemory | str | os.PathLike[str] | None,
) -> RequestMemory | None:
    """A replay's earlier requests: a copy of ``dynamic``'s (a missing file holds none, as
    lookup-stats reads one). Anything else is passed on for SuffixDrafter to name."""
    if isinstance(dynamic, str | os.PathLike):
        return RequestMemory.load(dynamic, missing_ok=True)
    if isinstance(dynamic, RequestMemory):
        memory = RequestMemory(dynamic.max_tokens)
        with dynamic.lock:
            held = dynamic.index.tokens.copy()
        memory.hold(held)
        return memory
    return dynamic


@njit(cache=True, nogil=True)
def replay_chunk(
    st: np.ndarray, chunk: np.ndarray, chunk_start: int, dump: np.ndarray, counters: np.ndarray
) -> None:
    """``replay_chunk`` by the suffix rules: ``st`` is a SuffixDrafter's state, its
    sequence started with the chunk's first token and with room for the whole chunk."""
    n_ctx = chunk.shape[0]
    out = int32s(st, OUT)
    n_out = 1
    while n_out < n_ctx:
        d = draft_step(st)
        count_call(counters, dump, chunk_start, n_out, out, 0, d)
        accepted = 0
        while (
            accepted < d and n_out + accepted < n_ctx and out[accepted] == chunk[n_out + accepted]
        ):
            accepted += 1
        counters[2] += accepted
        step = min(n_out + accepted + 1, n_ctx)
        accept_step(st, chunk[n_out:step])
        n_out = step
