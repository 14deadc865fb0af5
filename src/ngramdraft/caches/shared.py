"""A dynamic cache file that many drafters, threads and processes add to, losing nothing.

Each writer keeps what it added since its last save (``pending``). Saving
takes the file's lock, and if another writer has replaced the file since this
one last read or wrote it (its inode, size or time changed), reads the file
again and adds the pending counts to it; then writes atomically and releases
the lock. So every contribution reaches the file exactly once, whatever the
interleaving, and each writer's cache also learns what the others saved.
Without another writer, a save writes the in-memory cache as it is.

Threads that share one SharedDynamicFile (a BatchDrafter's sequences do)
save one at a time, under a lock of its own; the cache's own lock is held
only while its table changes, so drafts go on while a save writes the file.
"""

import os
import threading
import time
from pathlib import Path

from ..errors import WrongFileKindError
from ..files.atomic import locked
from ..files.kinds import file_format, file_kind
from .base import Cache
from .ngram import NgramCache, as_mutable

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


class SharedDynamicFile:
    """``cache`` (an NgramCache) backed by ``path``, which other writers may share.

    ``add(cache)`` merges a finished sequence's n-grams and saves; a save that
    cannot take the lock within ``lock_timeout`` seconds raises
    LockTimeoutError and keeps its counts pending for the next save.
    ``max_ngrams`` budgets the cache, and so the file (NgramCache's rule).
    ``save_every`` spaces the saves: an ``add`` saves only if that many
    seconds have passed since the last save (0: every add, the default), and
    ``save()`` writes what is pending now. A server with a large file sets
    it, so as not to rewrite the file for every request, and saves on the
    way out: what is pending at a crash is lost to the file.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lock_timeout: float = LOCK_TIMEOUT,
        max_ngrams: int | None = None,
        save_every: float = 0.0,
    ) -> None:
        self.path = Path(path)
        self.lock_timeout = lock_timeout
        self.save_every = save_every
        with locked(self.path, lock_timeout):
            self._seen = _state(self.path)
            exists = self._seen is not None
            self.format = file_format(self.path) if exists else format_for(self.path)
            self.cache = as_mutable(self.path, max_ngrams=max_ngrams)
        self.pending = NgramCache()
        self._writing = threading.Lock()
        self._saved_at = time.monotonic()

    def add(self, cache: Cache) -> None:
        """Merge ``cache`` (a finished sequence's context) in, and save (see ``save_every``)."""
        with self._writing:
            self.cache.merge(cache)
            self.pending.merge(cache)
            if time.monotonic() - self._saved_at >= self.save_every:
                self._save()

    def save(self) -> None:
        """Write what is pending now (nothing to write: no save)."""
        with self._writing:
            if len(self.pending):
                self._save()

    def _save(self) -> None:
        with locked(self.path, self.lock_timeout):
            now = _state(self.path)
            if now != self._seen:  # another writer saved: build on its file
                current = as_mutable(self.path, max_ngrams=self.cache.max_ngrams)
                current.merge(self.pending)
                self.cache.table = current.table  # the same object: drafters hold it
            self.cache.save(self.path, self.format)
            self._seen = _state(self.path)
            self.pending.clear()
            self._saved_at = time.monotonic()


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
