"""llama.cpp lookup cache files (``-lcs``/``-lcd``, lookup.bin): reading and writing.

Format (docs/format.md, "llama.cpp lookup files"): no header; records until the end of the
file, little-endian int32: ``ngram[4]`` (padded with -1), ``ntokens`` (> 0), then ntokens pairs
``token, count`` (count > 0). Record and follower order is arbitrary.
"""

import os

import numpy as np

from ..errors import CorruptFileError, TruncatedFileError, WrongFileKindError
from ..kernels import lookupfile as lookup_kernels
from ..validation import check_file
from .atomic import atomic_output, write_array
from .ngd.header import foreign_message

_PROBLEMS = {
    lookup_kernels.BAD_NGRAM: "an n-gram slot is neither a token id nor -1 padding",
    lookup_kernels.BAD_NTOKENS: "a record lists no followers",
    lookup_kernels.BAD_TOKEN: "a follower token id is negative",
    lookup_kernels.BAD_COUNT: "a follower count is not positive",
}


def read(path: str | os.PathLike[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(keys[K,4], offsets[K+1], tokens, counts) of a lookup file, followers sorted."""
    size = os.path.getsize(check_file(path))
    if size % 4:
        raise WrongFileKindError(f"{path}: {foreign_message(size)}")
    data = np.fromfile(path, dtype="<i4")
    starts, status, word = lookup_kernels.scan_records(data)
    if status != lookup_kernels.OK:
        if len(starts) == 0:  # not even one record: some other kind of file
            raise WrongFileKindError(f"{path}: {foreign_message(size)}")
        where = f"at byte {4 * word}"
        if status == lookup_kernels.TRUNCATED:
            raise TruncatedFileError(
                f"{path}: record {len(starts)} {where} runs past the end of the file"
            )
        raise CorruptFileError(f"{path}: record {len(starts)} {where}: {_PROBLEMS[status]}")
    k, keys, offsets, tokens, counts = lookup_kernels.gather_records(data, starts)
    if k < 0:
        raise CorruptFileError(f"{path}: record {-k - 1} lists the same follower twice")
    return keys, offsets, tokens, counts


def write(
    path: str | os.PathLike[str],
    keys: np.ndarray,
    offsets: np.ndarray,
    tokens: np.ndarray,
    counts: np.ndarray,
) -> None:
    """Write n-grams (keys of width 2 or 4) as a lookup file, atomically."""
    n = keys.shape[0]
    sizes = np.diff(offsets)
    words = np.empty(int(5 * n + 2 * len(tokens)), dtype="<i4")
    starts = np.zeros(n, dtype=np.int64)
    starts[1:] = np.cumsum(5 + 2 * sizes)[:-1]
    padded = np.full((n, 4), -1, dtype=np.int32)
    padded[:, : keys.shape[1]] = keys
    for j in range(4):
        words[starts + j] = padded[:, j]
    words[starts + 4] = sizes
    record = np.repeat(np.arange(n), sizes)
    within = np.arange(len(tokens)) - offsets[record]
    words[starts[record] + 5 + 2 * within] = tokens
    words[starts[record] + 6 + 2 * within] = counts
    with atomic_output(path, words.nbytes) as f:
        write_array(f, words)
