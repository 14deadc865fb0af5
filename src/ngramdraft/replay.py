"""Replay a token stream the way llama.cpp's lookup-stats does, and report its figures."""

import time
from dataclasses import asdict, dataclass, field

import numpy as np

from .cache import as_mutable
from .errors import CorruptFileError
from .kernels import table as T
from .kernels.frozen import CORRUPT, empty_frozen
from .kernels.replay import dump_capacity, replay_chunk
from .kernels.thresholds import NGRAM_MAX
from .progress import Progress
from .static import as_static
from .validation import as_tokens, check_int


@dataclass
class ReplayResult:
    n_ctx: int
    n_draft: int
    n_predict: int  # tokens replayed: n_ctx times the number of chunks
    n_calls: int
    n_drafted: int
    n_accept: int
    t_draft_ms: float
    t_load_ms: float
    dump: np.ndarray | None = field(default=None, repr=False)

    @property
    def accept(self):
        """Accepted drafted tokens, percent."""
        return 100.0 * self.n_accept / self.n_drafted if self.n_drafted else 0.0

    @property
    def us_per_drafted(self):
        return 1000.0 * self.t_draft_ms / self.n_drafted if self.n_drafted else 0.0

    def to_dict(self):
        d = asdict(self)
        d.pop("dump")
        d["accept"] = self.accept
        d["us_per_drafted"] = self.us_per_drafted
        return d


def replay(tokens, n_ctx=4096, n_draft=8, static=None, dynamic=None, *, dump=False, quiet=True):
    """Replay ``tokens`` in chunks of n_ctx, drafting n_draft at a time (lookup-stats).

    ``static`` and ``dynamic`` may be caches or paths; opening them is timed as
    t_load. The dynamic cache starts as given (empty by default) and collects
    each chunk's context cache; the caller's cache object is not modified.
    With ``dump``, the result carries the recorded drafts in the format of
    ``../shared/parity`` (int32 ``chunk_start position n tokens...`` per call).
    """
    tokens = as_tokens(tokens)
    n_ctx = check_int(n_ctx, "n_ctx", 2)
    n_draft = check_int(n_draft, "n_draft", 1, 4096)
    t0 = time.perf_counter()
    static = None if static is None else as_static(static)
    frozen = empty_frozen() if static is None else static._frozen
    if static is not None and (populating := static.prefault()):
        populating.join()  # mapping the pages is loading, timed as t_load, not t_draft
    dyn = as_mutable(dynamic, "dynamic")
    dyn_t = T.merge(T.new_table(), dyn._t) if dyn is dynamic else dyn._t
    t_load = time.perf_counter() - t0

    # A chunk adds fewer than 4 * n_ctx n-grams, and a part's pool rooms sum to
    # less than four times its length: sized so, the context never grows.
    ctx = T.new_table(slots=1 << (8 * n_ctx - 1).bit_length(), pool=16 * n_ctx)
    out = np.zeros(n_ctx, dtype=np.int32)
    buf = np.zeros(NGRAM_MAX + n_draft, dtype=np.int32)
    counters = np.zeros(4, dtype=np.int64)
    dumps = []
    chunk_dump = np.zeros(dump_capacity(n_ctx, n_draft) if dump else 0, dtype=np.int32)
    # Compiling (or loading compiled code) is not drafting: do it before the clock runs.
    warm = tokens[:2] if len(tokens) >= 2 else np.zeros(2, np.int32)
    replay_chunk(
        warm,
        0,
        n_draft,
        T.new_table(),
        T.new_table(),
        frozen,
        out,
        buf,
        chunk_dump[:0],
        counters.copy(),
    )
    t_draft = 0.0
    starts = range(0, max(len(tokens) - n_ctx, 0), n_ctx)
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
                    raise CorruptFileError(
                        "the static cache is damaged (run `ngramdraft inspect --verify`)"
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
    return ReplayResult(
        n_ctx=n_ctx,
        n_draft=n_draft,
        n_predict=len(starts) * n_ctx,
        n_calls=int(counters[0]),
        n_drafted=int(counters[1]),
        n_accept=int(counters[2]),
        t_draft_ms=1000 * t_draft,
        t_load_ms=1000 * t_load,
        dump=(np.concatenate(dumps) if dumps else np.zeros(0, np.int32)) if dump else None,
    )
