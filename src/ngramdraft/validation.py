"""Checks that stand between user input and the kernels (numba checks no bounds)."""

import os
import stat
from typing import Any

import numpy as np

from .errors import CorruptFileError, InvalidParameterError, InvalidTokensError, WrongFileKindError

TOKEN_MAX = 2**31 - 1


def _short_valid_list(values: object) -> bool:
    """Whether values is what a decoding loop hands over, a few Python ints in range.

    Checked in Python: for a short list that costs a third of numpy's
    conversion and min().
    """
    return (
        type(values) is list
        and 0 < len(values) <= 32
        and all(type(v) is int for v in values)
        and min(values) >= 0
        and max(values) <= TOKEN_MAX
    )


def as_tokens(values: Any, name: str = "tokens") -> np.ndarray:
    """A C-contiguous int32 copy-or-view of ``values``, every id in 0 .. 2**31-1.

    Accepts sequences of ints and integer arrays of any width; rejects floats,
    booleans, objects and anything that is not one-dimensional.
    """
    if _short_valid_list(values):
        return np.array(values, dtype=np.int32)
    arr = np.asarray(values)
    if arr.dtype == np.int32 and arr.ndim == 1:  # the common case in a decoding loop
        check_token_range(arr, name)
        return np.ascontiguousarray(arr)
    if arr.size == 0 and arr.ndim == 1:
        return np.zeros(0, dtype=np.int32)
    if arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
        raise InvalidTokensError(f"{name} must be integer token ids, got dtype {arr.dtype}")
    if arr.ndim != 1:
        raise InvalidTokensError(f"{name} must be one-dimensional, got shape {arr.shape}")
    check_token_range(arr, name)
    return np.ascontiguousarray(arr, dtype=np.int32)


def check_token_range(arr: np.ndarray, name: str = "tokens", base: int = 0) -> None:
    """Raise naming the first id outside 0 .. 2**31-1 (its index offset by ``base``)."""
    # int32 ids cannot pass TOKEN_MAX: only negative ones can be out of range.
    if within(arr, 0, None if arr.dtype == np.int32 else TOKEN_MAX):
        return
    bad = int(np.flatnonzero((arr < 0) | (arr > TOKEN_MAX))[0])
    raise not_a_token(f"{name}[{base + bad}]", int(arr[bad]))


def not_a_token(where: str, value: int, why: str = "") -> InvalidTokensError:
    """The error naming the id ``value`` found at ``where`` (``why``: what else to say)."""
    return InvalidTokensError(
        f"{where} = {value} is not a token id (ids are 0 .. {TOKEN_MAX}{'; ' + why if why else ''})"
    )


def within(values: np.ndarray, lo: int, hi: int | None = None) -> bool:
    """Whether every one of ``values`` is in lo .. hi (hi None: no upper bound).

    A few values (a decoding loop's tokens, an engine step's few requests) are
    checked as a list: numpy's min() and max() cost more than that on tiny arrays.
    """
    if values.size <= 32 and values.ndim == 1:
        listed = values.tolist()
        return not listed or (min(listed) >= lo and (hi is None or max(listed) <= hi))
    return values.size == 0 or bool(values.min() >= lo and (hi is None or values.max() <= hi))


def check_int(value: object, name: str, lo: int, hi: int | None = None) -> int:
    """An int in [lo, hi] (hi None: unbounded), else InvalidParameterError."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidParameterError(f"{name} must be an integer, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        bound = f"{lo} .. {hi}" if hi is not None else f">= {lo}"
        raise InvalidParameterError(f"{name} must be {bound}, got {value}")
    return int(value)


def check_number(value: object, name: str) -> float:
    """``value`` as a float if it is a real number (not a bool), else InvalidParameterError."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InvalidParameterError(f"{name} must be a number, got {value!r}")
    return float(value)


def check_flag(value: object, name: str) -> bool:
    """``value`` if it is a bool, else InvalidParameterError (an array's truth is ambiguous)."""
    if not isinstance(value, bool | np.bool_):
        raise InvalidParameterError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_path(value: Any, name: str = "path") -> Any:
    """``value`` if it is a file path (str or os.PathLike), else InvalidParameterError.

    An int would reach ``open()`` as a file descriptor, which it closes after
    reading: a cache "opened" from 1 would close the process's standard output.
    """
    if not isinstance(value, str | os.PathLike) or not isinstance(os.fspath(value), str):
        raise InvalidParameterError(
            f"{name} must be a file path (a str or pathlib.Path), got {type(value).__name__}"
        )
    return value


def check_file(value: Any) -> Any:
    """``value`` if it is the path of a regular file, as a cache file must be (check_path,
    then FileNotFoundError, or WrongFileKindError for a directory, a device or a pipe).

    A device's size reads as 0 (``/dev/urandom`` would pass for an empty cache) and
    opening a pipe no process writes to waits for one forever.
    """
    mode = os.stat(check_path(value)).st_mode
    if not stat.S_ISREG(mode):
        what = "a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise WrongFileKindError(f"{value}: {what}: give the path of a cache file")
    return value


def check_ngram_range(ngram_min: int, ngram_max: int) -> tuple[int, int]:
    ngram_min = check_int(ngram_min, "ngram_min", 1, 4)
    ngram_max = check_int(ngram_max, "ngram_max", 1, 4)
    if ngram_min > ngram_max:
        raise InvalidParameterError(f"ngram_min ({ngram_min}) > ngram_max ({ngram_max})")
    return ngram_min, ngram_max


def check_ngram(ngram: Any, sizes: tuple[int, ...] = (1, 2, 3, 4)) -> tuple[int, int, int, int]:
    """An n-gram given by the user as a tuple of token ids, size in ``sizes``."""
    arr = as_tokens(ngram, "ngram")
    if len(arr) not in sizes:
        raise InvalidParameterError(f"n-gram size must be one of {sizes}, got {len(arr)}")
    ids = [int(t) for t in arr] + [-1] * (4 - len(arr))
    return ids[0], ids[1], ids[2], ids[3]


def check_cache_arrays(
    keys: np.ndarray, offsets: np.ndarray, tokens: np.ndarray, counts: np.ndarray, where: str
) -> None:
    """Raise CorruptFileError unless the flat arrays form a well-made cache.

    Checked before a kernel reads them: spans that tile the follower arrays,
    keys made of token ids then -1 padding, followers strictly ascending
    within each span, ids >= 0 and counts >= 1.
    """

    def fail(problem: str) -> None:
        raise CorruptFileError(f"{where}: {problem}")

    k, n = keys.shape[0], tokens.shape[0]
    if offsets.shape != (k + 1,) or counts.shape != (n,):
        fail("array sizes disagree")
    if offsets[0] != 0 or offsets[k] != n or (k and np.diff(offsets).min() < 1):
        fail("follower spans do not tile the follower arrays")
    if k and keys[:, 0].min() < 0:
        fail("an n-gram starts with a negative id")
    for j in range(1, keys.shape[1]):
        if np.any((keys[:, j] < -1) | ((keys[:, j - 1] < 0) & (keys[:, j] != -1))):
            fail("an n-gram key is neither token ids nor trailing -1 padding")
    if n and (tokens.min() < 0 or counts.min() < 1):
        fail("a follower has a negative id or a count below 1")
    if n > 1:
        rising = np.diff(tokens) > 0
        rising[offsets[1:-1] - 1] = True  # a new span may start lower
        if not rising.all():
            fail("followers are not strictly ascending within an n-gram")
