"""Files that many drafters, threads and processes add to, losing nothing: a dynamic
cache (llama.cpp's rules) or earlier requests (the suffix rules).

Each writer keeps what it added since its last save (``pending``). Saving
takes the file's lock, and if another writer has replaced the file since this
one last read or wrote it (its inode, size or time changed), reads the file
again and adds the pending counts to it; then writes atomically and releases
the lock. So every contribution reaches the file exactly once, whatever the
interleaving, and each writer's cache also learns what the others saved.
Without another writer, a save writes the in-memory cache as it is.

Threads that share one file (a BatchDrafter's sequences do) save one at a
time, under a lock of its own; the store's own lock is held only while it
changes, so drafts go on while a save writes the file.
"""

import abc
import os
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import NgramdraftError, UnsavedCountsWarning, WrongFileKindError
from ..files.atomic import locked, output_directory, remove_abandoned
from ..files.kinds import file_format, file_kind
from .base import Cache
from .ngram import NgramCache, as_mutable
from .requests import MAX_TOKENS, RequestMemory, read_requests

LOCK_TIMEOUT = 30.0


def _state(path: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def format_for(path: str | os.PathLike[str]) -> str:
    """The format a new dynamic file is written in: llama.cpp's for ``.bin``, else native."""
    return "llamacpp" if Path(path).suffix == ".bin" else "native"


class SharedFile(abc.ABC):
    """A store (``cache``) backed by ``path``, which other writers may share.

    ``add(item)`` takes a finished sequence's contribution and saves;
    ``save()`` writes what is pending now. ``save_every`` spaces the saves:
    an ``add`` saves only if that many seconds have passed since the last
    save (0: every add, the default). A server with a large file sets it, so
    as not to rewrite the file for every request, and saves on the way out:
    what is pending at a crash is lost to the file.

    What goes wrong with the file never stops drafting. Opening reads the
    file without its lock (writers replace it atomically, so a reader sees a
    whole file) and creates nothing. A user who may read the file but not
    write its folder drafts from it and is told once, by an
    UnsavedCountsWarning, that nothing will be saved. A save that ``add``
    starts and that fails (the lock not taken within ``lock_timeout``
    seconds, a full disk, the file replaced by one that cannot be read)
    warns once and keeps its contribution pending for the next save;
    ``save()`` raises the named error instead. A file deleted under the
    writer is written again from the in-memory store, which holds everything
    this writer read or added.

    A subclass says how its store is read, added to, rebased on the file
    another writer saved, and written.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lock_timeout: float = LOCK_TIMEOUT,
        save_every: float = 0.0,
    ) -> None:
        self.path = Path(path)
        # A folder that does not exist is a mistyped path, not a read-only one (below): nothing
        # could be read from it or ever saved, which would pass unnoticed until the data was gone.
        output_directory(self.path)
        self.lock_timeout = lock_timeout
        self.save_every = save_every
        remove_abandoned(self.path)  # what a writer killed mid-save left
        # The state is taken before the read: if another writer replaces the
        # file in between, the first save sees a change and merges, never
        # overwriting what it did not read.
        self._seen = _state(self.path)
        self._open()
        self.read_only = not os.access(self.path.parent, os.W_OK)
        self._writing = threading.Lock()
        self._saved_at = time.monotonic()
        self._warned: set[type[BaseException]] = set()
        if self.read_only:
            self._warn(
                f"{self.path}: its folder is not writable by this user: drafting from "
                "what it holds, and nothing will be saved",
                PermissionError,
            )

    @abc.abstractmethod
    def _open(self) -> None:
        """Read the file (or start empty) into ``cache``; start an empty pending."""

    @abc.abstractmethod
    def _take(self, item: Any, pending: bool) -> None:
        """Add ``item`` to the store, and to what is pending if ``pending``."""

    @abc.abstractmethod
    def _has_pending(self) -> bool: ...

    @abc.abstractmethod
    def _rebase(self) -> None:
        """The file as another writer saved it, plus what is pending, into ``cache`` in place."""

    @abc.abstractmethod
    def _write(self) -> None:
        """Write the store to the file (atomically) and empty what is pending."""

    def add(self, item: Any) -> None:
        """Take ``item`` (a finished sequence's contribution) in, and save (see ``save_every``)."""
        with self._writing:
            self._take(item, pending=not self.read_only)
            if self.read_only or time.monotonic() - self._saved_at < self.save_every:
                return
            try:
                self._save()
            except (NgramdraftError, OSError) as e:
                self._warn(f"{e} (it waits for the next save)", type(e))

    def save(self) -> None:
        """Write what is pending now (nothing to write: no save); raises what stops it."""
        with self._writing:
            if self._has_pending() and not self.read_only:
                self._save()

    def _save(self) -> None:
        with locked(self.path, self.lock_timeout):
            now = _state(self.path)
            if now is not None and now != self._seen:  # another writer saved: build on it
                self._rebase()
            self._write()
            self._seen = _state(self.path)
            self._saved_at = time.monotonic()
            self._warned.clear()

    def _warn(self, message: str, kind: type[BaseException]) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            warnings.warn(message, UnsavedCountsWarning, stacklevel=4)


class SharedDynamicFile(SharedFile):
    """A dynamic cache file (llama.cpp's rules): ``cache`` an NgramCache; ``add(cache)``
    merges a finished sequence's n-grams. ``max_ngrams`` budgets the cache, and so the
    file (NgramCache's rule). See :class:`SharedFile` for saving and sharing."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lock_timeout: float = LOCK_TIMEOUT,
        max_ngrams: int | None = None,
        save_every: float = 0.0,
    ) -> None:
        self.max_ngrams = max_ngrams
        super().__init__(path, lock_timeout=lock_timeout, save_every=save_every)

    def _open(self) -> None:
        self.format = file_format(self.path) if self._seen else format_for(self.path)
        self.cache = as_mutable(self.path, max_ngrams=self.max_ngrams)
        self.pending = NgramCache(max_ngrams=self.max_ngrams)

    def _take(self, item: Cache, pending: bool) -> None:
        self.cache.merge(item)
        if pending:
            self.pending.merge(item)

    def _has_pending(self) -> bool:
        return len(self.pending) > 0

    def _rebase(self) -> None:
        current = as_mutable(self.path, max_ngrams=self.cache.max_ngrams)
        current.merge(self.pending)
        self.cache.table = current.table  # the same object: drafters hold it

    def _write(self) -> None:
        self.cache.save(self.path, self.format)
        self.pending.clear()


class SharedRequestFile(SharedFile):
    """A requests file (the suffix rules' earlier requests): ``cache`` a RequestMemory;
    ``add(tokens)`` remembers a finished sequence. ``max_tokens`` budgets the memory, and
    so the file (the oldest sequences go first). See :class:`SharedFile`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lock_timeout: float = LOCK_TIMEOUT,
        max_tokens: int = MAX_TOKENS,
        save_every: float = 0.0,
    ) -> None:
        self.max_tokens = max_tokens
        super().__init__(path, lock_timeout=lock_timeout, save_every=save_every)

    def _open(self) -> None:
        self.cache = RequestMemory.load(self.path, self.max_tokens, missing_ok=True)
        self.pending: list[np.ndarray] = []

    def _take(self, item: np.ndarray, pending: bool) -> None:
        self.cache.add(item)
        if pending:
            self.pending.append(item)

    def _has_pending(self) -> bool:
        return bool(self.pending)

    def _rebase(self) -> None:
        self.cache.hold(read_requests(self.path), self.pending)

    def _write(self) -> None:
        self.cache.save(self.path)
        self.pending.clear()


def dynamic_role(
    dynamic: "Cache | SharedDynamicFile | str | os.PathLike[str] | None",
    *,
    lock_timeout: float = LOCK_TIMEOUT,
    max_ngrams: int | None = None,
    save_every: float = 0.0,
) -> tuple[SharedDynamicFile | None, NgramCache]:
    """(SharedDynamicFile or None, NgramCache) for what a drafter was given as ``dynamic``.

    A path becomes a shared file (a static cache's path is refused: saving
    would overwrite it); a SharedDynamicFile is used as it is; anything else
    is the in-memory cache ``as_mutable`` makes of it.
    """
    if isinstance(dynamic, SharedDynamicFile):
        return dynamic, dynamic.cache
    if isinstance(dynamic, str | os.PathLike):
        if Path(dynamic).exists() and file_kind(dynamic) == "static":
            raise WrongFileKindError(
                f"{dynamic}: a static cache; finish() would overwrite it with a dynamic one. "
                "Pass it as static=, and give dynamic= a file of its own"
            )
        shared = SharedDynamicFile(
            dynamic, lock_timeout=lock_timeout, max_ngrams=max_ngrams, save_every=save_every
        )
        return shared, shared.cache
    return None, as_mutable(dynamic, "dynamic", max_ngrams)
