"""Checks between input and the kernels: malformed cache arrays, progress output."""

import io

import numpy as np
import pytest

from ngramdraft import CorruptFileError, InvalidTokensError
from ngramdraft.progress import Progress
from ngramdraft.validation import as_tokens, check_cache_arrays


def _arrays():
    keys = np.array([[1, 2, -1, -1], [3, -1, -1, -1]], dtype=np.int32)
    offsets = np.array([0, 2, 3], dtype=np.int64)
    tokens = np.array([4, 7, 5], dtype=np.int32)
    counts = np.array([1, 2, 3], dtype=np.int32)
    return keys, offsets, tokens, counts


def test_well_made_arrays_pass():
    check_cache_arrays(*_arrays(), where="x")


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda k, o, t, c: (k, o[:-1], t, c), "sizes disagree"),
        (lambda k, o, t, c: (k, np.array([0, 3, 3]), t, c), "do not tile"),
        (
            lambda k, o, t, c: (np.array([[-5, 2, -1, -1], [3, -1, -1, -1]], np.int32), o, t, c),
            "negative id",
        ),
        (
            lambda k, o, t, c: (np.array([[1, -1, 2, -1], [3, -1, -1, -1]], np.int32), o, t, c),
            "padding",
        ),
        (lambda k, o, t, c: (k, o, np.array([4, -7, 5], np.int32), c), "negative id or a count"),
        (lambda k, o, t, c: (k, o, t, np.array([1, 0, 3], np.int32)), "count below 1"),
        (lambda k, o, t, c: (k, o, np.array([7, 4, 5], np.int32), c), "strictly ascending"),
    ],
)
def test_malformed_arrays_are_named(damage, words):
    with pytest.raises(CorruptFileError, match=words):
        check_cache_arrays(*damage(*_arrays()), where="cache.bin")


@pytest.mark.parametrize("values", [[7], [0, 2**31 - 1], list(range(32)), list(range(33))])
def test_int_lists_become_int32_arrays(values):
    """Short lists take a fast path; it must agree with the general one."""
    out = as_tokens(values)
    assert out.dtype == np.int32 and out.tolist() == values


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ([1, -2], "tokens\\[1\\] = -2"),
        ([1, 2**31], "tokens\\[1\\] = 2147483648"),
        ([1.0, 2.0], "dtype float64"),
        ([True, False], "dtype bool"),
    ],
)
def test_bad_short_lists_are_named(values, words):
    with pytest.raises(InvalidTokensError, match=words):
        as_tokens(values)


@pytest.mark.parametrize("n", [2, 32, 33, 500])
def test_negative_int32_ids_are_named_at_any_length(n):
    """Short int32 arrays are checked as lists, long ones by numpy: both must catch it."""
    values = np.arange(n, dtype=np.int32)
    values[n // 2] = -9
    with pytest.raises(InvalidTokensError, match=f"tokens\\[{n // 2}\\] = -9"):
        as_tokens(values)
    assert as_tokens(np.abs(values)).tolist() == np.abs(values).tolist()


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_shows_rate_and_eta_on_a_terminal():
    out = _Terminal()
    with Progress("counting", 1000, " triples", stream=out) as p:
        p._last = -1.0  # draw now, not 0.2 s from now
        p.update(250)
    text = out.getvalue()
    assert "counting: 250 triples/1.0k triples (25%)" in text and "ETA" in text
    assert text.endswith("\n")


def test_progress_is_silent_elsewhere():
    out = io.StringIO()
    with Progress("counting", 10, stream=out) as p:
        p.update(5)
    assert out.getvalue() == ""
    quiet = _Terminal()
    with Progress("counting", 10, stream=quiet, quiet=True) as p:
        p.update(5)
    assert quiet.getvalue() == ""
