"""MappedFile: what a cache served from one read-only mapping shares (StaticCache,
SuffixCorpus): the checks an open may ask for, warming it up, closing it."""

import abc
import mmap
from collections.abc import Callable
from pathlib import Path
from typing import Self

from ..errors import InvalidParameterError
from ..files.ngd.header import Header
from ..files.ngd.reading import verify_sections
from ..validation import check_flag
from .warmup import Warmup


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

    def verify(self, deep: bool = False) -> None:
        """Check every section's checksum (reads the whole file); raises ChecksumError.

        ``deep`` also checks every invariant of the file's contents (the class's
        ``_check``); raises CorruptFileError.
        """
        deep = check_flag(deep, "deep")
        verify_sections(self._mapping(), self.header, self.path)
        if deep:
            self._check()

    @abc.abstractmethod
    def _check(self) -> None: ...

    def _opened(self, verify: bool, tokenizer: object) -> Self:
        """After mapping: ``verify``'s checksums and ``tokenizer``'s check, if asked for."""
        if check_flag(verify, "verify"):
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
