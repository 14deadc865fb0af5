"""A read-only mapped file's pages mapped, then its checksums checked, in one background thread."""

import abc
import mmap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Self

from ..errors import ChecksumError, InvalidParameterError
from ..files.ngd import Header, populate, verify_sections


class Warmup:
    """Maps a file's pages, then checks its checksums, in one daemon thread.

    ``mapped`` is set once every page is mapped (what replay waits for before
    its clock starts), ``done`` once the checksums are checked; ``damage`` is
    then None or the ChecksumError to raise.
    """

    def __init__(self, mm: mmap.mmap, header: Header, path: object) -> None:
        self.mapped = threading.Event()
        self.done = threading.Event()
        self.damage: ChecksumError | None = None

        def run() -> None:
            try:
                populate(mm)
                self.mapped.set()
                verify_sections(mm, header, path)
            except ChecksumError as e:
                self.damage = e
            finally:
                self.mapped.set()
                self.done.set()

        threading.Thread(target=run, daemon=True, name="ngramdraft-warmup").start()

    def wait(self) -> None:
        """Block until the check is done; raise ChecksumError if it found damage."""
        self.done.wait()
        if self.damage is not None:
            raise self.damage


class NoWarmup:
    """The warm-up of no static cache: nothing to wait for, no damage."""

    damage = None
    mapped = done = threading.Event()
    done.set()

    def wait(self) -> None:
        pass


NO_WARMUP = NoWarmup()


class MappedFile(abc.ABC):
    """What a cache served from one read-only mapping shares: the checks an open may ask
    for, warming it up, and closing it.

    The class sets ``_mm``, ``header``, ``path`` and ``_warmup = None`` on opening.
    """

    _mm: mmap.mmap | None
    _warmup: Warmup | None
    header: Header
    path: Path
    check_tokenizer: Callable[[object], None]

    @abc.abstractmethod
    def verify(self, deep: bool = False) -> None: ...

    def _opened(self, verify: bool, tokenizer: object) -> Self:
        """After mapping: ``verify``'s checksums and ``tokenizer``'s check, if asked for."""
        if verify:
            self.verify()
        if tokenizer is not None:
            self.check_tokenizer(tokenizer)
        return self

    def prefault(self) -> Warmup:
        """Map the file's pages, then check its checksums, in a background thread, once.

        Drafting reads at random, so otherwise its first lookups take page
        faults; and a damaged file is found within the time it takes to read
        it (about 30 ms per 500 MB once mapped), after which drafting raises
        ChecksumError. Drafters and replay call this; open does not, so that
        opening stays one page read whatever the size. Returns the
        :class:`Warmup`.
        """
        if self._warmup is None:
            self._warmup = Warmup(self._mapping(), self.header, self.path)
        return self._warmup

    def _mapping(self) -> mmap.mmap:
        if self._mm is None:
            raise InvalidParameterError(f"{self.path}: this {type(self).__name__} was closed")
        return self._mm

    def close(self) -> None:
        """Drop this object's mapping: its pages go once no array handed out holds them."""
        self._mm = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
