"""The drafting interface every cache shares, and the mutable cache (context and dynamic roles)."""

import abc
import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import llamacpp
from .build import make_constmap
from .errors import InvalidParameterError
from .fileformat import (
    HEADER_SIZE,
    KIND_DYNAMIC,
    KIND_NAMES,
    MAGIC,
    NATIVE_SUFFIX,
    Header,
    map_file,
    parse_header,
    read_header,
    section_array,
    verify_sections,
    write_file,
)
from .kernels import table as T
from .kernels.draft import constmap_values
from .kernels.triples import span_stats
from .validation import as_tokens, check_cache_arrays, check_int, check_ngram, check_ngram_range

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

FORMATS = ("native", "llamacpp")


class Cache(abc.ABC):
    """What every cache answers, whatever its role or storage.

    * ``followers(ngram)``: the followers of an n-gram as (tokens, counts)
      int32 arrays, ascending by token; empty arrays when the n-gram is absent;
    * ``len(cache)``: the number of n-grams; ``cache.n_entries``: the number
      of (n-gram, follower) pairs;
    * ``arrays()``: everything as flat arrays sorted by n-gram;
    * iteration: ``(ngram, tokens, counts)`` in n-gram order;
    * ``save(path, format="native" | "llamacpp")``.
    """

    role = "cache"

    @abc.abstractmethod
    def followers(self, ngram: "ArrayLike") -> tuple[np.ndarray, np.ndarray]: ...

    @abc.abstractmethod
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(keys[K, width], offsets[K+1], tokens, counts), keys ascending, padding -1."""

    @abc.abstractmethod
    def __len__(self): ...

    @property
    @abc.abstractmethod
    def n_entries(self) -> int: ...

    @abc.abstractmethod
    def _save_native(self, path): ...

    @property
    def max_token(self) -> int:
        """The largest token id in any n-gram or follower (-1 when empty)."""
        keys, _, tokens, _ = self.arrays()
        return int(max(keys.max(initial=-1), tokens.max(initial=-1)))

    def __contains__(self, ngram):
        return len(self.followers(ngram)[0]) > 0

    def __iter__(self):
        keys, offsets, tokens, counts = self.arrays()
        for i in range(len(keys)):
            ngram = tuple(int(t) for t in keys[i] if t >= 0)
            yield ngram, tokens[offsets[i] : offsets[i + 1]], counts[offsets[i] : offsets[i + 1]]

    def save(self, path: str | os.PathLike, format: str = "native") -> None:
        """Write the cache atomically: ``native`` (.ngd) or ``llamacpp`` (lookup file)."""
        if format == "llamacpp":
            llamacpp.write(path, *self.arrays())
        elif format == "native":
            self._save_native(path)
        else:
            raise InvalidParameterError(f"format must be one of {FORMATS}, got {format!r}")

    def __repr__(self):
        return (
            f"<{type(self).__name__} role={self.role} ngrams={len(self)} entries={self.n_entries}>"
        )


def file_kind(path: str | os.PathLike) -> str:
    """'static' or 'dynamic' for a native cache file, 'llama.cpp lookup file' otherwise."""
    if file_format(path) == "llamacpp":
        return "llama.cpp lookup file"
    return KIND_NAMES[read_header(path).kind]


def file_format(path: str | os.PathLike) -> str:
    """'native' if the file starts with the ngramdraft magic, else 'llamacpp'.

    A ``.ngd`` file without the magic is not taken for a llama.cpp file (an
    empty or foreign file would otherwise read as an empty lookup cache).
    """
    with open(path, "rb") as f:
        head = f.read(HEADER_SIZE)
    if head[: len(MAGIC)] == MAGIC:
        return "native"
    if Path(path).suffix == NATIVE_SUFFIX:
        parse_header(head, os.path.getsize(path), path)  # raises, naming the problem
    return "llamacpp"


class NgramCache(Cache):
    """A mutable n-gram cache: n-grams of sizes 1..4 -> followers with counts.

    Fills the context role (the current sequence) and the dynamic role (earlier
    sequences). Storage is a numba hash table over compact arrays, described in
    ``ngramdraft.kernels.table``; ``_check()`` verifies its invariants.

    Threads may share one cache: a lock (``lock``, reentrant) guards it. Every
    method here holds it, and a drafter holds it for each draft (one kernel
    call, about a microsecond), so a merge in one thread never changes the
    table under a draft in another; a draft sees the cache before the merge or
    after it, never between. A lock rather than copy on write: a merge of one
    finished sequence touches a few parts of the table, where a copy would
    move all of it (128 bytes per n-gram and more) at every ``finish()``.
    Drafts from drafters sharing a cache therefore run one at a time; a server
    drafting for many sequences at once uses one BatchDrafter, which holds the
    lock once per step and drafts over all threads inside it.
    """

    def __init__(self, role="dynamic", *, max_ngrams: int | None = None):
        if role not in ("context", "dynamic"):
            raise InvalidParameterError(f"role must be 'context' or 'dynamic', got {role!r}")
        if max_ngrams is not None and (
            isinstance(max_ngrams, bool) or not isinstance(max_ngrams, int) or max_ngrams < 1
        ):
            raise InvalidParameterError(
                f"max_ngrams must be at least 1 (a budget that holds no n-gram), got {max_ngrams!r}"
            )
        self.role = role
        self.max_ngrams = max_ngrams
        self.lock = threading.RLock()
        self._t = T.new_table()
        self.path = None
        self.format = None

    @classmethod
    def from_cache(cls, cache: Cache, role: str = "dynamic") -> "NgramCache":
        """A mutable copy of any cache's n-grams."""
        new = cls(role)
        new.merge(cache)
        return new

    @classmethod
    def load(
        cls, path: str | os.PathLike, role: str = "dynamic", *, max_ngrams: int | None = None
    ) -> "NgramCache":
        """Load a native cache file (static or dynamic) or a llama.cpp lookup file.

        Loading reads every byte anyway, so a native file's checksums are
        always verified, and every record is checked before the table is built.
        With ``max_ngrams``, a larger file is cut to the budget as a merge is.
        """
        new = cls(role, max_ngrams=max_ngrams)
        fmt = file_format(path)
        if fmt == "native":
            mm, header = map_file(path)
            verify_sections(mm, header, path)
            arrays = _native_arrays(mm, header)
        else:
            arrays = llamacpp.read(path)
        check_cache_arrays(*arrays, where=str(path))
        new._t = T.load_sorted(new._t, *arrays)
        new.path, new.format = Path(path), fmt
        if max_ngrams is not None and len(new) > max_ngrams:
            new._evict()
        return new

    def update(
        self,
        tokens: "ArrayLike",
        nnew: int | None = None,
        ngram_min: int = 1,
        ngram_max: int = 4,
    ) -> None:
        """Count the n-grams ending in the last ``nnew`` tokens (default: all of them).

        As llama.cpp's common_ngram_cache_update: for each size n, every token at
        position i >= max(len - nnew, n) is counted as a follower of tokens[i-n:i].
        """
        tokens = as_tokens(tokens)
        nnew = len(tokens) if nnew is None else check_int(nnew, "nnew", 0, len(tokens))
        ngram_min, ngram_max = check_ngram_range(ngram_min, ngram_max)
        with self.lock:
            self._t = T.update(self._t, tokens, len(tokens), nnew, ngram_min, ngram_max)

    def merge(self, other: Cache) -> None:
        """Add every (n-gram, follower, count) of another cache (counts add up)."""
        if not isinstance(other, Cache):
            raise InvalidParameterError(f"can only merge a cache, got {type(other).__name__}")
        if other is self:
            source = None  # T.merge reads a copy of a table merged into itself
        elif isinstance(other, NgramCache):
            # A snapshot taken under the other's lock alone: holding both at
            # once could deadlock against a merge the other way round.
            with other.lock:
                source = T.Table(*(a.copy() for a in other._t))
        else:
            keys, offsets, tokens, counts = other.arrays()
        with self.lock:
            if isinstance(other, NgramCache):
                self._t = T.merge(self._t, self._t if source is None else source)
            else:
                self._t = T.load_sorted(self._t, keys, offsets, tokens, counts)
            if self.max_ngrams is not None and len(self) > self.max_ngrams:
                self._evict()

    def _evict(self):
        """Shrink to 90% of max_ngrams, keeping the n-grams with the most samples.

        The rule: n-grams rank by their total count (samples), highest first;
        ties keep the shorter n-gram, then the smaller ids. Few-sample n-grams
        are the ones the dynamic role's strict thresholds (2 samples and more)
        rarely let draft, so they cost the fewest drafts. The slack of 10%
        makes eviction a pass over the table every so many merges, not each.
        """
        keys, rows = T.export(self._t)
        totals = self._t.slots[rows, T.TOTAL]
        sizes = (keys >= 0).sum(axis=1)
        keep = np.lexsort((*keys.T[::-1], sizes, -totals))[: max(1, self.max_ngrams * 9 // 10)]
        keep = keep[np.lexsort(keys[keep].T[::-1])]
        offsets, tokens, counts = T.gather(self._t, rows[keep])
        self._t = T.load_sorted(T.new_table(), keys[keep], offsets, tokens, counts)

    def clear(self) -> None:
        with self.lock:
            T.clear(self._t)

    def _replace(self, other: "NgramCache") -> None:
        """Take ``other``'s n-grams in place of this cache's (drafters holding it see them)."""
        with self.lock:
            self._t = other._t

    def __len__(self):
        return int(self._t.meta[T.N_NGRAMS])

    @property
    def n_entries(self):
        return int(self._t.meta[T.N_ENTRIES])

    def followers(self, ngram):
        k = check_ngram(ngram)
        with self.lock:
            t = self._t
            s = T.lookup(t.slots, t.tags, *k)
            if s < 0:
                return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
            a, n = t.slots[s, T.START], t.slots[s, T.LENGTH]
            return t.tok[a : a + n].copy(), t.cnt[a : a + n].copy()

    def arrays(self):
        with self.lock:
            keys, rows = T.export(self._t)
            order = np.lexsort(keys.T[::-1])
            offsets, tokens, counts = T.gather(self._t, rows[order])
        return keys[order], offsets, tokens, counts

    def _save_native(self, path):
        keys, offsets, tokens, counts = self.arrays()
        stats = span_stats(offsets, tokens, counts)
        seed, seglen, segs, fuse = make_constmap(keys, constmap_values(stats, 0))
        header = Header(
            kind=KIND_DYNAMIC,
            n_keys=len(keys),
            n_entries=len(tokens),
            fuse_seed=seed,
            fuse_segment_length=seglen,
            fuse_segment_count=segs,
            max_token=int(max(keys.max(initial=-1), tokens.max(initial=-1))),
            n_source_tokens=0,
            max_count=int(stats[:, 1].max(initial=0)),
        )
        sections = {
            "meta": b"{}",
            "keys": keys,
            "offsets": offsets,
            "stats": stats,
            "tokens": tokens,
            "counts": counts,
            "fuse": fuse,
        }
        write_file(path, header, sections)

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["lock"]  # a lock belongs to one process's threads
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.lock = threading.RLock()

    def _check(self):
        """Verify every invariant of the table; raises AssertionError naming the slot."""
        with self.lock:
            bad = T.check(self._t)
        if bad >= 0:
            raise AssertionError(f"NgramCache invariant broken at slot {bad}")


def _native_arrays(mm, header):
    k, n, w = header.n_keys, header.n_entries, header.key_width
    return (
        section_array(mm, header, "keys", np.int32, (k, w)),
        section_array(mm, header, "offsets", np.int64, (k + 1,)),
        section_array(mm, header, "tokens", np.int32, (n,)),
        section_array(mm, header, "counts", np.int32, (n,)),
    )


def as_mutable(
    cache: "Cache | str | os.PathLike | None", role: str = "dynamic", max_ngrams: int | None = None
) -> "NgramCache":
    """An NgramCache for a role that gets updated: the cache itself, or a copy of another kind.

    ``max_ngrams`` budgets a cache made here; an NgramCache given keeps its own.
    """
    if isinstance(cache, NgramCache):
        if max_ngrams is not None:
            raise InvalidParameterError(
                "this NgramCache has its own budget: create it as NgramCache(max_ngrams=...)"
            )
        return cache
    if cache is None:
        return NgramCache(role, max_ngrams=max_ngrams)
    if isinstance(cache, Cache):
        new = NgramCache(role, max_ngrams=max_ngrams)
        new.merge(cache)
        return new
    if isinstance(cache, str | os.PathLike):
        if Path(cache).exists():
            return NgramCache.load(cache, role, max_ngrams=max_ngrams)
        return NgramCache(role, max_ngrams=max_ngrams)
    raise InvalidParameterError(f"expected a cache or a path, got {type(cache).__name__}")
