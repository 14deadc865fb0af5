"""Replay a token stream the way llama.cpp's lookup-stats does, and report its figures.

Protocol (``docs/rules.md``, "Replay"): the stream is cut into chunks of
n_ctx tokens that have a next token; in each, the pseudo output starts with
the chunk's first token, and each step drafts, accepts drafted tokens up to
the first mismatch (updating the context after each), then appends the true
next token (updating again). After a chunk the sequence is filed for the
next ones (merged into the dynamic cache, or remembered among the earlier
requests), which upstream does not time either.

Each rule set replays with its own kernel, one call per chunk
(``rulesets/<name>/replay.py``); here, the result they return, what they
share and :func:`replay`, which dispatches by ``rules``.
"""

import os
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numba import njit

from ..errors import ShortStreamWarning
from ..progress import Progress
from .rulesets import rule_set

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..caches.base import Cache
    from ..caches.requests import RequestMemory
    from ..caches.suffix_corpus import SuffixCorpus


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
    static: "Cache | SuffixCorpus | str | os.PathLike[str] | None" = None,
    dynamic: "Cache | RequestMemory | str | os.PathLike[str] | None" = None,
    *,
    dump: bool = False,
    quiet: bool = True,
    rules: str = "llamacpp",
    tokenizer: object = None,
) -> ReplayResult:
    """Replay ``tokens`` in chunks of n_ctx, drafting n_draft at a time (lookup-stats).

    ``tokens``: an integer array or sequence, or the path of a token file
    (``.i32``/``.bin`` little-endian int32, ``.npy``).

    ``static`` and ``dynamic`` may be caches or paths of the rule set's kinds
    (llama.cpp's rules: a static cache and an n-gram cache or dynamic file;
    the suffix rules: a suffix file and a RequestMemory or requests file);
    opening them is timed as t_load; with ``tokenizer``, a static file
    recorded with another raises TokenizerMismatchError. The dynamic cache starts as given (empty
    by default) and collects each chunk; the caller's cache and file are not
    modified, as lookup-stats leaves its -lcd file as it was. With ``dump``,
    the result carries the recorded drafts in the format of
    ``../shared/parity`` (int32 ``chunk_start position n tokens...`` per call).
    """
    replay_by = rule_set(rules).replay
    return replay_by(
        tokens, n_ctx, n_draft, static, dynamic, dump=dump, quiet=quiet, tokenizer=tokenizer
    )


def chunk_starts(n: int, n_ctx: int) -> range:
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


class Chunks:
    """A rule set's replay's scaffold: the chunks to replay (``starts``), the time drafting
    them, their dumps, and the figures as a :class:`ReplayResult`.

    ``for start in chunks.each(quiet)`` walks the chunks with a progress bar;
    the rule set times its kernel's calls into ``t_draft`` and adds each
    chunk's dump with :meth:`dumped`.
    """

    def __init__(self, seq: np.ndarray, n_ctx: int, n_draft: int, dump: bool) -> None:
        self.n_ctx, self.n_draft, self.dump = n_ctx, n_draft, dump
        self.starts = chunk_starts(len(seq), n_ctx)
        # Sized by what a chunk can hold, never by n_ctx alone (a chunk exists only
        # when the stream is longer than n_ctx).
        self.size = max(2, min(n_ctx, len(seq)))
        self.chunk_dump = np.zeros(dump_capacity(self.size, n_draft) if dump else 0, np.int32)
        self.counters = np.zeros(4, dtype=np.int64)  # calls, drafted, accepted, dump words
        self.t_draft = 0.0
        self._dumps: list[np.ndarray] = []

    def each(self, quiet: bool) -> Iterator[int]:
        """Each chunk's start, a progress bar counting them."""
        with Progress("replay", len(self.starts) * self.n_ctx, " tok", quiet=quiet) as progress:
            for start in self.starts:
                yield start
                progress.update(self.n_ctx)

    def dumped(self) -> None:
        """Keep the chunk just replayed's dump (with ``dump``)."""
        if self.dump:
            self._dumps.append(self.chunk_dump[: self.counters[3]].copy())

    def result(self, t_load: float, t_startup: float) -> ReplayResult:
        """The figures of every chunk replayed (times in seconds)."""
        counters, dumps = self.counters, self._dumps
        return ReplayResult(
            n_ctx=self.n_ctx,
            n_draft=self.n_draft,
            n_predict=len(self.starts) * self.n_ctx,
            n_calls=int(counters[0]),
            n_drafted=int(counters[1]),
            n_accept=int(counters[2]),
            t_draft_ms=1000 * self.t_draft,
            t_load_ms=1000 * t_load,
            t_startup_ms=1000 * t_startup,
            dump=(np.concatenate(dumps) if dumps else np.zeros(0, np.int32)) if self.dump else None,
        )


def dump_capacity(n_ctx: int, n_draft: int) -> int:
    """Upper bound of the int32 words replay_chunk writes to dump for one chunk."""
    return n_ctx * (3 + n_draft)


@njit(cache=True, nogil=True, inline="always")
def count_call(
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
