"""Pass timings kept per model and machine (``files/passtimes.py``): read back exactly,
and a file that is anything else is not used."""

import json
import os
import stat

import pytest

from ngramdraft.files import passtimes

SIZES, REPS = [1, 2, 4, 8, 16, 32], 3
TIMINGS = {k: [0.02 * k, 0.021 * k, 0.019 * k] for k in SIZES}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NGRAMDRAFT_CACHE", str(tmp_path))
    return tmp_path


def test_timings_kept_are_read_back_under_their_key_only():
    name = passtimes.key({"model": ["/m.gguf", 1, 2], "threads": [2, 2]})
    assert passtimes.read(name, SIZES, REPS) is None  # none kept yet
    passtimes.write(name, TIMINGS)
    assert passtimes.read(name, SIZES, REPS) == TIMINGS
    other = passtimes.key({"model": ["/m.gguf", 1, 2], "threads": [1, 1]})
    assert other != name and passtimes.read(other, SIZES, REPS) is None


def test_a_kept_file_has_the_users_permissions(cache):
    old = os.umask(0o027)
    try:
        passtimes.write("k", TIMINGS)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(passtimes.path_of("k")).st_mode) == 0o640


def test_a_cache_folder_that_cannot_be_written_keeps_nothing_and_raises_nothing(cache):
    (cache / "passes").write_text("a file where the folder should be")
    passtimes.write("k", TIMINGS)
    assert passtimes.read("k", SIZES, REPS) is None


def _kept(**changed):
    """TIMINGS as a kept file, sizes changed (None: left out)."""
    sizes = {str(k): v for k, v in TIMINGS.items()}
    for name, seconds in changed.items():  # s32=...: size 32
        if seconds is None:
            del sizes[name[1:]]
        else:
            sizes[name[1:]] = seconds
    return json.dumps({"sizes": sizes}).encode()


HOSTILE = {
    "not json": b"\x00\xff{",
    "not an object": b"[1, 2, 3]",
    "no sizes": b'{"times": {}}',
    "sizes not an object": b'{"sizes": [0.1, 0.2]}',
    "a size missing": _kept(s32=None),
    "a size not asked for": _kept(s64=[1.0, 1.0, 1.0]),
    "too few timings": _kept(s1=[0.02]),
    "NaN": _kept(s2=[0.04, float("nan"), 0.04]),
    "infinite": _kept(s4=[0.1, 0.1, float("inf")]),
    "zero": _kept(s8=[0, 1, 1]),
    "negative": _kept(s8=[-1, 1, 1]),
    "absurd": _kept(s16=[1e300, 1, 1]),
    "booleans": _kept(s16=[True, True, True]),
    "strings": _kept(s32=["0.1", "0.1", "0.1"]),
    "huge": b'{"sizes": {"1": [' + b"0.1, " * (passtimes.MAX_BYTES // 5) + b"0.1]}}",
    "deeply nested": b"[" * 30_000 + b"]" * 30_000,  # within MAX_BYTES; json recurses
}


@pytest.mark.parametrize("content", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_kept_file_that_is_anything_else_is_not_used(content):
    path = passtimes.path_of("k")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    assert passtimes.read("k", SIZES, REPS) is None
    passtimes.write("k", TIMINGS)  # what the adapter does then: times again, keeps those
    assert passtimes.read("k", SIZES, REPS) == TIMINGS
