"""Replay a token stream the way llama.cpp's lookup-stats does, and report its figures.

Protocol (``docs/rules.md``, "Replay"): the stream is cut into chunks of
n_ctx tokens that have a next token; in each, the pseudo output starts with
the chunk's first token, and each step drafts, accepts drafted tokens up to
the first mismatch (updating the context cache after each), then appends the
true next token (updating again). After a chunk its context cache is merged
into the dynamic cache, which upstream does not time either.

The chunk loop is one numba kernel (:func:`replay_chunk`) over a drafter's
state (``drafting/state.py``), drafting with the same draft step a Drafter
does; the suffix rules' (:func:`replay_suffix_chunk`) over a SuffixDrafter's.
"""

import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from ..caches.base import Cache
from ..caches.corpus import SuffixCorpus
from ..caches.ngram import NgramCache, as_mutable
from ..caches.requests import RequestMemory
from ..caches.static import as_static
from ..errors import CorruptFileError, ShortStreamWarning, WrongFileKindError
from ..files.tokens import tokens_of
from ..kernels import table as T
from ..kernels.frozen import CORRUPT
from ..kernels.handles import frozen_at, int32s, table_at
from ..progress import Progress
from ..rules import suffix as R
from ..rules.llamacpp import NGRAM_MAX, NGRAM_MIN, draft_step, prefetch_step
from ..validation import check_int
from . import state as S
from .drafter import check_rules
from .suffix import SuffixDrafter

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..caches.static import StaticCache


@dataclass
class ReplayResult:
    n_ctx: int
    n_draft: int
    n_predict: int  # tokens replayed: n_ctx times the number of chunks
    n_calls: int
    n_drafted: int
    n_accept: int
    t_draft_ms: float
    t_load_ms: float  # opening the caches (what llama.cpp's load time covers)
    t_startup_ms: float = 0.0  # loading the compiled kernels (or compiling them), once a process
    dump: np.ndarray | None = field(default=None, repr=False)

    @property
    def accept(self) -> float:
        """Accepted drafted tokens, percent."""
        return 100.0 * self.n_accept / self.n_drafted if self.n_drafted else 0.0

    @property
    def us_per_drafted(self) -> float:
        return 1000.0 * self.t_draft_ms / self.n_drafted if self.n_drafted else 0.0

    @property
    def passes(self) -> int:
        """Forward passes a model would need for n_predict tokens: one per token not drafted."""
        return self.n_predict - self.n_accept

    @property
    def tokens_per_pass(self) -> float:
        return self.n_predict / self.passes if self.passes else 0.0

    @property
    def from_drafts(self) -> float:
        """Share of the replayed tokens that came from accepted drafts, percent."""
        return 100.0 * self.n_accept / self.n_predict if self.n_predict else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("dump")
        for name in ("accept", "us_per_drafted", "passes", "tokens_per_pass", "from_drafts"):
            d[name] = getattr(self, name)
        return d


def replay(
    tokens: "ArrayLike | str | os.PathLike[str]",
    n_ctx: int = 4096,
    n_draft: int = 8,
    static: "StaticCache | Cache | SuffixCorpus | str | os.PathLike[str] | None" = None,
    dynamic: "NgramCache | Cache | RequestMemory | str | os.PathLike[str] | None" = None,
    *,
    dump: bool = False,
    quiet: bool = True,
    rules: str = "llamacpp",
) -> ReplayResult:
    """Replay ``tokens`` in chunks of n_ctx, drafting n_draft at a time (lookup-stats).

    ``tokens``: an integer array or sequence, or the path of a token file
    (``.i32``/``.bin`` little-endian int32, ``.npy``).

    ``static`` and ``dynamic`` may be caches or paths; opening them is timed as
    t_load. The dynamic cache starts as given (empty by default) and collects
    each chunk's context cache; the caller's cache object is not modified.
    With ``dump``, the result carries the recorded drafts in the format of
    ``../shared/parity`` (int32 ``chunk_start position n tokens...`` per call).
    ``rules="suffix"`` (opt-in) drafts by the suffix rules, as
    :func:`replay_suffix` does: ``static`` a suffix file, ``dynamic`` a
    requests file or RequestMemory.
    """
    if rules == "suffix":
        if isinstance(static, Cache) or isinstance(dynamic, Cache):
            raise WrongFileKindError(
                "rules='suffix' replays with a SuffixCorpus (or suffix file) as static and a "
                "RequestMemory (or requests file) as dynamic, not an n-gram cache"
            )
        return replay_suffix(tokens, n_ctx, n_draft, static, dynamic, dump=dump, quiet=quiet)
    check_rules(rules)
    seq = tokens_of(tokens)
    n_ctx = check_int(n_ctx, "n_ctx", 2)
    n_draft = check_int(n_draft, "n_draft", 1, 4096)
    t0 = time.perf_counter()
    _load_kernels(n_draft)
    t_startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    opened = None if static is None else as_static(static)
    if opened is not None:
        opened.check_tokens(seq)
        opened.prefault().done.wait()  # mapping and checking the pages is loading, not drafting
    dyn = as_mutable(dynamic, "dynamic")
    if dyn is dynamic:  # the caller's cache is not modified
        dyn = NgramCache.from_cache(dyn)
    t_load = time.perf_counter() - t0

    starts = _chunk_starts(len(seq), n_ctx)
    # Sized by what a chunk can hold, never by n_ctx alone (a chunk exists only
    # when the stream is longer than n_ctx). A chunk adds fewer than 4 * n_ctx
    # n-grams, and a part's pool rooms sum to less than four times its length:
    # sized so, the context never grows.
    size = max(2, min(n_ctx, len(seq)))
    ctx = NgramCache("context")
    ctx.reserve(4 * size, 8 * size)
    out = np.zeros(size, dtype=np.int32)
    buf = np.zeros(NGRAM_MAX + n_draft, dtype=np.int32)
    state = _state(n_draft, ctx, dyn, S.NO_STATIC if opened is None else opened.handle, out, buf)
    counters = np.zeros(4, dtype=np.int64)
    dumps = []
    chunk_dump = np.zeros(dump_capacity(size, n_draft) if dump else 0, dtype=np.int32)
    t_draft = 0.0
    with Progress("replay", len(starts) * n_ctx, " tok", quiet=quiet) as progress:
        for start in starts:
            before = counters.copy()
            while True:
                counters[:] = before
                counters[3] = 0
                t1 = time.perf_counter()
                status = replay_chunk(
                    state, seq[start : start + n_ctx], start, chunk_dump, counters
                )
                t_draft += time.perf_counter() - t1
                if status == CORRUPT:
                    raise _damaged(opened)
                if status == T.OK:
                    break
                ctx.grow(status)  # never with the sizes above; kept exact anyway
                ctx.clear()
            if dump:
                dumps.append(chunk_dump[: counters[3]].copy())
            dyn.table = T.merge(dyn.table, ctx.table)
            ctx.clear()
            progress.update(n_ctx)
    if opened is not None:
        opened.prefault().wait()  # figures drafted from a damaged file are not reported
    return ReplayResult(
        n_ctx=n_ctx,
        n_draft=n_draft,
        n_predict=len(starts) * n_ctx,
        n_calls=int(counters[0]),
        n_drafted=int(counters[1]),
        n_accept=int(counters[2]),
        t_draft_ms=1000 * t_draft,
        t_load_ms=1000 * t_load,
        t_startup_ms=1000 * t_startup,
        dump=(np.concatenate(dumps) if dumps else np.zeros(0, np.int32)) if dump else None,
    )


def replay_suffix(
    tokens: "ArrayLike | str | os.PathLike[str]",
    n_ctx: int = 4096,
    n_draft: int = 8,
    static: "SuffixCorpus | str | os.PathLike[str] | None" = None,
    dynamic: "RequestMemory | str | os.PathLike[str] | None" = None,
    *,
    dump: bool = False,
    quiet: bool = True,
) -> ReplayResult:
    """replay's protocol drafted by the suffix rules: each chunk remembered for the next ones.

    ``dynamic`` (a requests file's path, or a RequestMemory) holds the
    earlier requests the replay starts from. The chunks are remembered in a
    copy: neither the file nor the memory is changed, as lookup-stats leaves
    its -lcd file and ``replay`` the caller's cache as they were (a replay
    that saved its text would draft that text from memory the next time).

    A chunk is one SuffixDrafter sequence, finished into the drafter's
    earlier requests as replay merges a chunk into the dynamic cache; a
    chunk's steps are one kernel call (:func:`replay_suffix_chunk`).
    """
    seq = tokens_of(tokens)
    n_ctx = check_int(n_ctx, "n_ctx", 2)
    n_draft = check_int(n_draft, "n_draft", 1, 4096)
    t0 = time.perf_counter()
    drafter = SuffixDrafter(static, _own_memory(dynamic), n_draft=n_draft)
    t_load = time.perf_counter() - t0
    counters = np.zeros(4, dtype=np.int64)
    drafter.start(seq[:1])  # loads the kernels, apart from the clock that times drafting
    replay_suffix_chunk(drafter._st, seq[:1], 0, np.zeros(0, np.int32), counters)
    t_startup = time.perf_counter() - t0 - t_load
    starts = _chunk_starts(len(seq), n_ctx)
    dumps: list[np.ndarray] = []
    size = max(2, min(n_ctx, len(seq)))
    chunk_dump = np.zeros(dump_capacity(size, n_draft) if dump else 0, dtype=np.int32)
    t_draft = 0.0
    with Progress("replay", len(starts) * n_ctx, " tok", quiet=quiet) as progress:
        for start in starts:
            chunk = seq[start : start + n_ctx]
            t1 = time.perf_counter()
            drafter.start(chunk[:1])
            drafter._index.reserve(len(chunk))
            counters[3] = 0
            with drafter.dynamic.lock:
                replay_suffix_chunk(drafter._st, chunk, start, chunk_dump, counters)
            drafter.finish()
            t_draft += time.perf_counter() - t1
            if dump:
                dumps.append(chunk_dump[: counters[3]].copy())
            progress.update(n_ctx)
    drafter._warmup.wait()  # figures drafted from a damaged file are not reported
    drafter.flush()
    return ReplayResult(
        n_ctx=n_ctx,
        n_draft=n_draft,
        n_predict=len(starts) * n_ctx,
        n_calls=int(counters[0]),
        n_drafted=int(counters[1]),
        n_accept=int(counters[2]),
        t_draft_ms=1000 * t_draft,
        t_load_ms=1000 * t_load,
        t_startup_ms=1000 * t_startup,
        dump=(np.concatenate(dumps) if dumps else np.zeros(0, np.int32)) if dump else None,
    )


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


def _chunk_starts(n: int, n_ctx: int) -> range:
    """lookup-stats' chunks: every n_ctx tokens that have a next token (a warning if none)."""
    starts = range(0, max(n - n_ctx, 0), n_ctx)
    if not starts:
        warnings.warn(
            f"the stream has {n} tokens, and lookup-stats replays chunks of n_ctx = "
            f"{n_ctx} tokens that have a next token: nothing was replayed (lower n_ctx)",
            ShortStreamWarning,
            stacklevel=3,
        )
    return starts


def _damaged(static: "StaticCache | None") -> CorruptFileError:
    """The error a damaged static cache gets (a checksum names the damage better, if it sees it)."""
    if static is not None:
        static.prefault().wait()
    return CorruptFileError(
        f"{getattr(static, 'path', None)}: the static cache is damaged "
        "(run `ngramdraft inspect --verify`)"
    )


def _state(
    n_draft: int,
    ctx: NgramCache,
    dyn: NgramCache,
    static_handle: np.ndarray,
    out: np.ndarray,
    buf: np.ndarray,
) -> np.ndarray:
    """A drafter's state for replay's one sequence: ``out`` is the sequence buffer."""
    state = S.new_state(n_draft, (NGRAM_MIN, NGRAM_MAX))
    S.point(state, S.CTX, ctx.handle)
    S.point(state, S.DYN, dyn.handle)
    S.point(state, S.STAT, static_handle)
    S.point_buffer(state, S.SEQ, out)
    S.point_buffer(state, S.BUF, buf)
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
        table_at(state, S.CTX),
        table_at(state, S.DYN),
        frozen_at(state, S.STAT),
        int32s(state, S.SEQ),
        int32s(state, S.BUF),
        state[S.N_DRAFT],
        (state[S.NMIN], state[S.NMAX]),
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
        _count_call(counters, dump, chunk_start, n_out, buf, tail, d)
        accepted = 0
        while accepted < d and n_out < n_ctx and buf[tail + accepted] == chunk[n_out]:
            accepted += 1
            counters[2] += 1
            out[n_out] = chunk[n_out]
            n_out += 1
            status = T.append_token(ctx, out, n_out)
            if status != T.OK:
                return status
        if n_out < n_ctx:
            out[n_out] = chunk[n_out]
            n_out += 1
            prefetch_step(out, n_out, sizes, ctx, dyn, stat)
            status = T.append_token(ctx, out, n_out)
            if status != T.OK:
                return status
    return T.OK


@njit(cache=True, nogil=True, inline="always")
def _count_call(
    counters: np.ndarray,
    dump: np.ndarray,
    chunk_start: int,
    n_out: int,
    buf: np.ndarray,
    at: int,
    d: int,
) -> None:
    """Count a call that drafted buf[at:at+d] (counters: calls, drafted, accepted, dump words
    used) and, when dump is not empty, record it there: `chunk_start position n tokens...`."""
    counters[0] += 1
    counters[1] += d
    if dump.shape[0] > 0:
        p = counters[3]
        dump[p] = chunk_start
        dump[p + 1] = n_out
        dump[p + 2] = d
        for j in range(d):  # no slices: replay_chunk's loop runs without numba's runtime
            dump[p + 3 + j] = buf[at + j]
        counters[3] = p + 3 + d


@njit(cache=True, nogil=True)
def replay_suffix_chunk(
    st: np.ndarray, chunk: np.ndarray, chunk_start: int, dump: np.ndarray, counters: np.ndarray
) -> None:
    """``replay_chunk`` by the suffix rules: ``st`` is a SuffixDrafter's state, its
    sequence started with the chunk's first token and with room for the whole chunk."""
    n_ctx = chunk.shape[0]
    out = int32s(st, R.OUT)
    n_out = 1
    while n_out < n_ctx:
        d = R.draft_step(st)
        _count_call(counters, dump, chunk_start, n_out, out, 0, d)
        accepted = 0
        while (
            accepted < d and n_out + accepted < n_ctx and out[accepted] == chunk[n_out + accepted]
        ):
            accepted += 1
        counters[2] += accepted
        step = min(n_out + accepted + 1, n_ctx)
        R.accept_step(st, chunk[n_out:step])
        n_out = step


def dump_capacity(n_ctx: int, n_draft: int) -> int:
    """Upper bound of the int32 words replay_chunk writes to dump for one chunk."""
    return n_ctx * (3 + n_draft)


def _load_kernels(n_draft: int) -> None:
    """Load (or compile) every kernel replay runs, on empty data.

    The first call of each kernel in a process loads its compiled code and
    numba's runtime; that is neither loading caches nor drafting, so replay
    reports it apart (t_startup), before either clock runs.
    """
    ctx, dyn = NgramCache("context"), NgramCache()
    dyn.table = T.merge(dyn.table, ctx.table)
    buf = np.zeros(NGRAM_MAX + n_draft, dtype=np.int32)
    state = _state(n_draft, ctx, dyn, S.NO_STATIC, np.zeros(2, np.int32), buf)
    replay_chunk(state, np.zeros(2, np.int32), 0, np.zeros(0, np.int32), np.zeros(4, np.int64))
