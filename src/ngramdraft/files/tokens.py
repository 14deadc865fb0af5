"""Token array files: little-endian int32 (``.i32``/``.bin``) and ``.npy``.

Files are read in bounded chunks with explicit reads (not mmap), so a pass
over a corpus larger than memory keeps a small, constant resident size.
"""

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import CorpusError, InvalidTokensError
from ..validation import as_tokens, check_token_range

RAW_SUFFIXES = (".i32", ".bin")
CHUNK = 1 << 24  # tokens per read


class TokenFile:
    """A token array on disk: ``path``, byte ``offset`` of the data, ``dtype``, ``n``."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise CorpusError(f"{self.path}: no such token file")
        size = self.path.stat().st_size
        if self.path.suffix == ".npy":
            self.offset, self.dtype, self.n = _npy_layout(self.path)
        elif self.path.suffix in RAW_SUFFIXES:
            if size % 4:
                raise InvalidTokensError(
                    f"{self.path}: {size} bytes is not a whole number of int32 tokens"
                )
            self.offset, self.dtype, self.n = 0, np.dtype("<i4"), size // 4
        else:
            raise CorpusError(
                f"{self.path}: token files end in .i32, .bin (little-endian int32) or .npy"
            )

    def __len__(self) -> int:
        return self.n

    def read(self, start: int, count: int) -> np.ndarray:
        """Tokens [start, start+count) as int32, range-checked."""
        count = max(0, min(count, self.n - start))
        with open(self.path, "rb") as f:
            f.seek(self.offset + start * self.dtype.itemsize)
            arr = np.fromfile(f, dtype=self.dtype, count=count)
        if len(arr) != count:
            raise InvalidTokensError(f"{self.path}: file ended early at token {start + len(arr)}")
        check_token_range(arr, str(self.path), base=start)
        return arr.astype(np.int32, copy=False)

    def chunks(self, size: int = CHUNK, overlap: int = 0) -> Iterator[np.ndarray]:
        """Consecutive chunks; each starts ``overlap`` tokens before the previous one ended."""
        start = 0
        while start < self.n:
            begin = max(0, start - overlap)
            yield self.read(begin, start + size - begin)
            start += size


def _npy_layout(path: Path) -> tuple[int, np.dtype[Any], int]:
    with open(path, "rb") as f:
        try:
            major, _ = np.lib.format.read_magic(f)
            read_header = (
                np.lib.format.read_array_header_1_0
                if major == 1
                else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(f)
        except ValueError as e:
            raise InvalidTokensError(f"{path}: not a readable .npy file ({e})") from e
        offset = f.tell()
    if dtype.kind not in "iu" or dtype == np.bool_:
        raise InvalidTokensError(f"{path}: token arrays must have an integer dtype, got {dtype}")
    if len(shape) != 1:
        raise InvalidTokensError(f"{path}: token arrays must be one-dimensional, got {shape}")
    n = shape[0]
    if os.path.getsize(path) < offset + n * dtype.itemsize:
        raise InvalidTokensError(f"{path}: truncated, the header promises {n} tokens")
    return offset, dtype, n


def tokens_of(value: object, name: str = "tokens") -> np.ndarray:
    """int32 tokens from an array or sequence, or read whole from a token file's path."""
    if isinstance(value, str | os.PathLike):
        file = TokenFile(value)
        return file.read(0, len(file))
    return as_tokens(value, name)
