"""The mutable cache: n-grams of sizes 1..4 and their followers (context and dynamic roles)."""

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InternalError, InvalidParameterError, WrongFileKindError
from ..files import llamacpp
from ..files.kinds import file_format
from ..files.ngd.header import KIND_DYNAMIC
from ..files.ngd.reading import frozen_view, map_file, verify_sections
from ..files.ngd.writing import write_cache
from ..kernels import table as table_kernels
from ..kernels.handles import table_handle
from ..validation import (
    TOKEN_MAX,
    as_tokens,
    check_cache_arrays,
    check_int,
    check_ngram,
    check_ngram_range,
)
from .base import Arrays, Cache
from .requests import RequestMemory

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


class NgramCache(Cache):
    """A mutable n-gram cache: n-grams of sizes 1..4 -> followers with counts.

    Fills the context role (the current sequence) and the dynamic role (earlier
    sequences). Storage is a numba hash table over compact arrays, described in
    ``ngramdraft.kernels.table``; ``verify()`` checks its invariants.

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

    For kernels: ``table`` is the table (``kernels.table.Table``) and
    ``handle`` its handle (``kernels.handles``), rewritten in place whenever
    the table is replaced, so a drafter's state that points at it never goes
    stale.
    """

    def __init__(self, role: str = "dynamic", *, max_ngrams: int | None = None) -> None:
        if not isinstance(role, str) or role not in ("context", "dynamic"):
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
        self.handle = np.zeros(12, dtype=np.int64)
        self.table = table_kernels.new_table()
        self.path: Path | None = None
        self.format: str | None = None

    @property
    def table(self) -> table_kernels.Table:
        return self._table

    @table.setter
    def table(self, table: table_kernels.Table) -> None:
        with self.lock:
            self._table = table
            table_handle(table, self.handle)

    @classmethod
    def from_cache(cls, cache: Cache, role: str = "dynamic") -> "NgramCache":
        """A mutable copy of any cache's n-grams."""
        new = cls(role)
        new.merge(cache)
        return new

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        role: str = "dynamic",
        *,
        max_ngrams: int | None = None,
    ) -> "NgramCache":
        """Load a native cache file (static or dynamic) or a llama.cpp lookup file.

        Loading reads every byte anyway, so a native file's checksums are
        always verified, and every record is checked before the table is built.
        With ``max_ngrams``, a larger file is cut to the budget as a merge is.
        """
        new = cls(role, max_ngrams=max_ngrams)
        fmt = file_format(path)
        arrays: Arrays
        if fmt == "native":
            mm, header = map_file(path)
            verify_sections(mm, header, path)
            f = frozen_view(mm, header, path)
            arrays = (f.keys, f.offsets, f.tokens, f.counts)
        else:
            arrays = llamacpp.read(path)
        check_cache_arrays(*arrays, where=str(path))
        new.table = table_kernels.load_sorted(new.table, *arrays)
        new.path, new.format = Path(path), fmt
        new._keep_budget()
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
        seq = as_tokens(tokens)
        nnew = len(seq) if nnew is None else check_int(nnew, "nnew", 0, len(seq))
        sizes = check_ngram_range(ngram_min, ngram_max)
        with self.lock:
            self.table = table_kernels.update(self.table, seq, len(seq), nnew, sizes)

    def rewind(self, tokens: np.ndarray, n: int) -> None:
        """Undo ``update(tokens, nnew=n)``: the n-grams ending in the last n tokens, exactly.

        Counts go down, emptied parts and n-grams leave the table, in time
        proportional to n. ``tokens`` must be what was counted (a drafter's
        own sequence); a count that is not there is a bug, not bad input.
        """
        seq = as_tokens(tokens)
        n = check_int(n, "n", 0, len(seq))
        with self.lock:
            missing = table_kernels.rewind(self.table, seq, len(seq), n)
        if missing:
            raise InternalError(f"rewind found {missing} counts missing from the cache")

    def reserve(self, n_ngrams: int, n_entries: int) -> None:
        """Grow the table once for n_ngrams more n-grams and n_entries more followers."""
        n_ngrams = check_int(n_ngrams, "n_ngrams", 0, TOKEN_MAX)
        n_entries = check_int(n_entries, "n_entries", 0, TOKEN_MAX)
        with self.lock:
            self.table = table_kernels.reserve(self.table, n_ngrams, n_entries)

    def grow(self, status: int) -> None:
        """Grow the table as a kernel's status (NEED_SLOTS or NEED_POOL) asks."""
        status = check_int(status, "status", table_kernels.NEED_SLOTS, table_kernels.NEED_POOL)
        with self.lock:
            self.table = table_kernels.grow(self.table, status)

    def merge(self, other: Cache) -> None:
        """Add every (n-gram, follower, count) of another cache (counts add up)."""
        if not isinstance(other, Cache):
            raise InvalidParameterError(f"can only merge a cache, got {type(other).__name__}")
        if isinstance(other, NgramCache):
            # A snapshot taken under the other's lock alone: holding both at
            # once could deadlock against a merge the other way round. A cache
            # merged into itself is copied by table_kernels.merge.
            with other.lock:
                source = (
                    other.table
                    if other is self
                    else table_kernels.Table(*(a.copy() for a in other.table))
                )
            with self.lock:
                self.table = table_kernels.merge(self.table, source)
                self._keep_budget()
            return
        arrays = other.arrays()
        with self.lock:
            self.table = table_kernels.load_sorted(self.table, *arrays)
            self._keep_budget()

    def _keep_budget(self) -> None:
        if self.max_ngrams is not None and len(self) > self.max_ngrams:
            self._evict(self.max_ngrams)

    def _evict(self, budget: int) -> None:
        """Shrink to 90% of max_ngrams, keeping the n-grams with the most samples.

        The rule: n-grams rank by their total count (samples), highest first;
        ties keep the shorter n-gram, then the smaller ids. Few-sample n-grams
        are the ones the dynamic role's strict thresholds (2 samples and more)
        rarely let draft, so they cost the fewest drafts. The slack of 10%
        makes eviction a pass over the table every so many merges, not each.
        """
        keys, rows = table_kernels.export(self.table)
        totals = self.table.slots[rows, table_kernels.TOTAL]
        sizes = (keys >= 0).sum(axis=1)
        keep = np.lexsort((*keys.T[::-1], sizes, -totals))[: max(1, budget * 9 // 10)]
        keep = keep[np.lexsort(keys[keep].T[::-1])]
        offsets, tokens, counts = table_kernels.gather(self.table, rows[keep])
        self.table = table_kernels.load_sorted(
            table_kernels.new_table(), keys[keep], offsets, tokens, counts
        )

    def clear(self) -> None:
        with self.lock:
            table_kernels.clear(self.table)

    def __len__(self) -> int:
        return int(self.table.meta[table_kernels.N_NGRAMS])

    @property
    def nbytes(self) -> int:
        """Bytes the cache's tables hold (its memory, but for a few small arrays)."""
        return sum(a.nbytes for a in self.table)

    @property
    def n_entries(self) -> int:
        return int(self.table.meta[table_kernels.N_ENTRIES])

    def followers(self, ngram: "ArrayLike") -> tuple[np.ndarray, np.ndarray]:
        key = check_ngram(ngram)
        with self.lock:
            t = self.table
            s = table_kernels.lookup(t.slots, t.tags, key)
            if s < 0:
                return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32)
            a, n = t.slots[s, table_kernels.START], t.slots[s, table_kernels.LENGTH]
            return t.tok[a : a + n].copy(), t.cnt[a : a + n].copy()

    def arrays(self) -> Arrays:
        with self.lock:
            keys, rows = table_kernels.export(self.table)
            order = np.lexsort(keys.T[::-1])
            offsets, tokens, counts = table_kernels.gather(self.table, rows[order])
        return keys[order], offsets, tokens, counts

    def _save_native(self, path: str | os.PathLike[str]) -> None:
        write_cache(path, KIND_DYNAMIC, self.arrays())

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        del state["lock"]  # a lock belongs to one process's threads
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.lock = threading.RLock()
        self.handle = np.zeros(12, dtype=np.int64)
        self.table = state["_table"]  # the addresses of this process's arrays

    def verify(self) -> None:
        """Check every invariant of the table; raises InternalError naming the slot.

        A table only ngramdraft writes breaks one only through a bug: the
        seeded stress tests call this after every mutation, ``inspect
        --verify`` after loading a file.
        """
        with self.lock:
            bad = table_kernels.check(self.table)
        if bad >= 0:
            raise InternalError(f"NgramCache invariant broken at slot {bad}")


def as_mutable(
    cache: "Cache | RequestMemory | str | os.PathLike[str] | None",
    role: str = "dynamic",
    max_ngrams: int | None = None,
) -> NgramCache:
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
    if isinstance(cache, RequestMemory):
        raise WrongFileKindError(
            "a RequestMemory holds the earlier requests of rules='suffix', which llama.cpp's "
            "rules cannot read: pass rules='suffix', or give llama.cpp's rules an NgramCache"
        )
    raise InvalidParameterError(f"expected a cache or a path, got {type(cache).__name__}")
