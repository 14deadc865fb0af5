"""Replay a token stream the way llama.cpp's lookup-stats does, and report its figures."""

import os
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .cache import as_mutable
from .errors import CorruptFileError, ShortStreamWarning
from .kernels import table as T
from .kernels.frozen import CORRUPT, empty_frozen
from .kernels.replay import dump_capacity, replay_chunk
from .kernels.thresholds import NGRAM_MAX
from .progress import Progress
from .static import as_static
from .tokenfile import tokens_of
from .validation import check_int

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .cache import Cache, NgramCache
    from .static import StaticCache


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
    def accept(self):
        """Accepted drafted tokens, percent."""
        return 100.0 * self.n_accept / self.n_drafted if self.n_drafted else 0.0

    @property
    def us_per_drafted(self):
        return 1000.0 * self.t_draft_ms / self.n_drafted if self.n_drafted else 0.0

    @property
    def passes(self):
        """Forward passes a model would need for n_predict tokens: one per token not drafted."""
        return self.n_predict - self.n_accept

    @property
    def tokens_per_pass(self):
        return self.n_predict / self.passes if self.passes else 0.0

    @property
    def from_drafts(self):
        """Share of the replayed tokens that came from accepted drafts, percent."""
        return 100.0 * self.n_accept / self.n_predict if self.n_predict else 0.0

    def to_dict(self):
        d = asdict(self)
        d.pop("dump")
        for name in ("accept", "us_per_drafted", "passes", "tokens_per_pass", "from_drafts"):
            d[name] = getattr(self, name)
        return d


def replay(
    tokens: "ArrayLike | str | os.PathLike",
    n_ctx: int = 4096,
    n_draft: int = 8,
    static: "StaticCache | Cache | str | os.PathLike | None" = None,
    dynamic: "NgramCache | Cache | str | os.PathLike | None" = None,
    *,
    dump: bool = False,
    quiet: bool = True,
) -> ReplayResult:
    """Replay ``tokens`` in chunks of n_ctx, drafting n_draft at a time (lookup-stats).

    ``tokens``: an integer array or sequence, or the path of a token file
    (``.i32``/``.bin`` little-endian int32, ``.npy``).

    ``static`` and ``dynamic`` may be caches or paths; opening them is timed as
    t_load. The dynamic cache starts as given (empty by default) and collects
    each chunk's context cache; the caller's cache object is not modified.
    With ``dump``, the result carries the recorded drafts in the format of
    ``../shared/parity`` (int32 ``chunk_start position n tokens...`` per call).
    """
    tokens = tokens_of(tokens)
    n_ctx = check_int(n_ctx, "n_ctx", 2)
    n_draft = check_int(n_draft, "n_draft", 1, 4096)
    t0 = time.perf_counter()
    _load_kernels(n_draft)
    t_startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    static = None if static is None else as_static(static)
    if static is not None:
        static.check_tokens(tokens)
    frozen = empty_frozen() if static is None else static._frozen
    warmup = None if static is None else static.prefault()
    if warmup is not None:
        warmup.done.wait()  # mapping and checking the pages is loading: t_load, not t_draft
    dyn = as_mutable(dynamic, "dynamic")
    dyn_t = T.merge(T.new_table(), dyn._t) if dyn is dynamic else dyn._t
    t_load = time.perf_counter() - t0

    starts = range(0, max(len(tokens) - n_ctx, 0), n_ctx)
    if not starts:
        warnings.warn(
            f"the stream has {len(tokens)} tokens, and lookup-stats replays chunks of n_ctx = "
            f"{n_ctx} tokens that have a next token: nothing was replayed (lower n_ctx)",
            ShortStreamWarning,
            stacklevel=2,
        )
    # Sized by what a chunk can hold, never by n_ctx alone (a chunk exists only
    # when the stream is longer than n_ctx). A chunk adds fewer than 4 * n_ctx
    # n-grams, and a part's pool rooms sum to less than four times its length:
    # sized so, the context never grows.
    size = max(2, min(n_ctx, len(tokens)))
    ctx = T.new_table(slots=1 << (8 * size - 1).bit_length(), pool=16 * size)
    out = np.zeros(size, dtype=np.int32)
    buf = np.zeros(NGRAM_MAX + n_draft, dtype=np.int32)
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
                    tokens[start : start + n_ctx],
                    start,
                    n_draft,
                    ctx,
                    dyn_t,
                    frozen,
                    out,
                    buf,
                    chunk_dump,
                    counters,
                )
                t_draft += time.perf_counter() - t1
                if status == CORRUPT:
                    if warmup is not None:
                        warmup.wait()  # a checksum names the damage better, if it sees it
                    raise CorruptFileError(
                        f"{static.path}: the static cache is damaged "
                        "(run `ngramdraft inspect --verify`)"
                    )
                if status == T.OK:
                    break
                ctx = T.grow(ctx, status)  # never with the sizes above; kept exact anyway
                T.clear(ctx)
            if dump:
                dumps.append(chunk_dump[: counters[3]].copy())
            dyn_t = T.merge(dyn_t, ctx)
            T.clear(ctx)
            progress.update(n_ctx)
    if warmup is not None:
        warmup.wait()  # figures drafted from a damaged file are not reported
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


def _load_kernels(n_draft):
    """Load (or compile) every kernel replay runs, on empty data.

    The first call of each kernel in a process loads its compiled code and
    numba's runtime; that is neither loading caches nor drafting, so replay
    reports it apart (t_startup), before either clock runs.
    """
    buf = np.zeros(NGRAM_MAX + n_draft, dtype=np.int32)
    empty = T.new_table()
    T.merge(empty, T.new_table())
    replay_chunk(
        np.zeros(2, np.int32), 0, n_draft, empty, T.new_table(), empty_frozen(),
        np.zeros(2, np.int32), buf, np.zeros(0, np.int32), np.zeros(4, np.int64),
    )  # fmt: skip
