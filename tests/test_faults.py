"""Faults around the files: empty caches, read-only folders, full disks, kills mid-save, and files
changed under a running writer. Each failed before its fix (issue 16).

Full disks and read-only folders are real: a 2 MiB tmpfs and a read-only bind mount, which need
root (the tests skip without it).
"""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from ngramdraft import (
    DiskFullError,
    Drafter,
    NgramCache,
    UnsavedCountsWarning,
    build_static,
)
from ngramdraft.cli import main as cli_main
from ngramdraft.errors import CacheFileError

RNG = np.random.default_rng(16)


def _mount(*args):
    result = subprocess.run(["mount", *args], capture_output=True, text=True)
    if result.returncode:
        pytest.skip(f"cannot mount here ({result.stderr.strip()})")


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs."""
    where = tmp_path / "disk"
    where.mkdir()
    _mount("-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where))
    yield where
    subprocess.run(["umount", "-l", str(where)], check=False)


@pytest.fixture
def read_only(tmp_path):
    """(a writable folder, the same folder mounted read-only)."""
    source, view = tmp_path / "rw", tmp_path / "ro"
    source.mkdir()
    view.mkdir()
    _mount("--bind", str(source), str(view))
    _mount("-o", "remount,bind,ro", str(view))
    yield source, view
    subprocess.run(["umount", "-l", str(view)], check=False)


def _big_cache(n=300_000):
    cache = NgramCache()
    cache.update(RNG.integers(0, 50_000, n).astype(np.int32))
    return cache


def _leftovers(folder):
    return [p.name for p in Path(folder).iterdir() if ".ngd-tmp-" in p.name]


# -- an empty dynamic cache ------------------------------------------------------------------


def test_an_empty_dynamic_cache_saves_and_merges(tmp_path, monkeypatch):
    path = tmp_path / "new.ngd"
    drafter = Drafter(dynamic=path)
    drafter.start([5])  # one token: no n-gram
    drafter.finish()
    assert len(NgramCache.load(path)) == 0
    monkeypatch.chdir(tmp_path)
    assert cli_main(["merge-dynamic", "new.ngd", "new.ngd", "-o", "merged.ngd"]) == 0
    assert len(NgramCache.load(tmp_path / "merged.ngd")) == 0


# -- reading without writing -----------------------------------------------------------------


def test_a_read_only_folder_drafts_and_says_once_that_nothing_is_saved(read_only):
    source, view = read_only
    cache = NgramCache()
    cache.update(np.tile(np.arange(1, 9, dtype=np.int32), 20))
    cache.save(source / "seen.ngd")
    expected = Drafter(dynamic=NgramCache.load(source / "seen.ngd"))
    expected.start([9, 1, 2])
    assert len(expected.draft())
    with pytest.warns(UnsavedCountsWarning, match="not writable") as caught:
        drafter = Drafter(dynamic=view / "seen.ngd")
        for _ in range(3):
            drafter.start([9, 1, 2])
            assert drafter.draft().tolist() == expected.draft().tolist()
            drafter.finish()
        drafter.flush()
    assert len([w for w in caught if issubclass(w.category, UnsavedCountsWarning)]) == 1
    assert sorted(os.listdir(source)) == ["seen.ngd"]  # no lock file, nothing written


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_a_dynamic_path_in_a_folder_that_does_not_exist_is_named(tmp_path, rules):
    """Before, it was taken for a read-only folder: a warning, and nothing ever saved."""
    with pytest.raises(FileNotFoundError, match="no such directory") as info:
        Drafter(dynamic=tmp_path / "no" / "seen.ngd", rules=rules)
    assert info.value.filename == str(tmp_path / "no")


def test_opening_a_refused_cache_leaves_no_lock_file(tmp_path):
    path = tmp_path / "bad.ngd"
    path.write_bytes(b"not a cache at all, but long enough to be looked at")
    with pytest.raises(CacheFileError):
        Drafter(dynamic=path)
    assert sorted(os.listdir(tmp_path)) == ["bad.ngd"]


# -- a full disk -----------------------------------------------------------------------------


def test_a_full_disk_is_named_and_leaves_the_old_file_whole(small_disk):
    path = small_disk / "seen.ngd"
    NgramCache().save(path)
    old = path.read_bytes()
    big = _big_cache()
    for save in (lambda: big.save(path), lambda: big.save(path, "llamacpp")):
        with pytest.raises(DiskFullError, match=r"seen\.ngd: no space left .* needs about"):
            save()
        assert path.read_bytes() == old and not _leftovers(small_disk)
    with pytest.raises(DiskFullError, match="free space"):
        build_static(RNG.integers(0, 50_000, 400_000), small_disk / "s.ngd")
    assert not _leftovers(small_disk) and not (small_disk / "s.ngd").exists()


def test_a_full_disk_is_one_line_on_the_command_line(small_disk, tmp_path, capsys):
    _big_cache().save(tmp_path / "big.ngd")
    status = cli_main(["merge-dynamic", str(tmp_path / "big.ngd"), "-o", str(small_disk / "m.ngd")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 1 and len(err) == 1
    assert err[0].startswith(f"ngramdraft: error: {small_disk / 'm.ngd'}: no space left")


def test_a_drafter_goes_on_when_the_disk_fills_and_saves_when_it_can(small_disk):
    path = small_disk / "seen.ngd"
    drafter = Drafter(dynamic=path)
    filler = small_disk / "filler"
    with open(filler, "wb", buffering=0) as f, pytest.raises(OSError):
        while True:  # until the disk is full
            f.write(bytes(64 << 10))
    stream = RNG.integers(0, 50_000, 2_000).astype(np.int32)
    with pytest.warns(UnsavedCountsWarning, match="no space left"):
        drafter.start(stream)
        drafter.finish()
    drafter.start([1, 2, 3])
    drafter.draft()  # drafting goes on
    drafter.finish()
    assert not path.exists() and not _leftovers(small_disk)
    filler.unlink()
    drafter.flush()  # the counts waited: the next save writes every one
    saved = NgramCache.load(path)
    assert saved.followers(tuple(stream[:2].tolist()))[0].size
    assert saved.followers((1, 2))[0].tolist() == [3]


# -- kills and changes under a writer ---------------------------------------------------------

_SAVER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from ngramdraft import NgramCache
    cache = NgramCache()
    cache.update(np.random.default_rng(1).integers(0, 1 << 20, 500_000).astype(np.int32))
    print("ready", flush=True)
    while True:
        cache.save(sys.argv[1])
    """
)


def test_a_writer_killed_mid_save_leaves_the_old_file_and_the_next_start_cleans_up(tmp_path):
    path = tmp_path / "seen.ngd"
    old = NgramCache()
    old.update(np.array([1, 2, 3, 1, 2, 3], dtype=np.int32))
    old.save(path)
    proc = subprocess.Popen(
        [sys.executable, "-c", _SAVER, str(path)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 60
    while not _leftovers(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _leftovers(tmp_path), "the writer was not caught mid-save"
    NgramCache.load(path).verify()  # whole: the old file or a complete new one
    Drafter(dynamic=path)  # the next start removes what the killed writer left
    assert not _leftovers(tmp_path)


def test_a_dynamic_file_deleted_under_a_writer_is_written_again_whole(tmp_path):
    path = tmp_path / "seen.ngd"
    drafter = Drafter(dynamic=path)
    drafter.start([1, 2, 3])
    drafter.finish()
    path.unlink()
    drafter.start([4, 5, 6])
    drafter.finish()
    saved = NgramCache.load(path)
    assert saved.followers((1, 2))[0].tolist() == [3]  # what was read or added before
    assert saved.followers((4, 5))[0].tolist() == [6]


def test_a_dynamic_file_replaced_by_garbage_stops_saves_not_drafting(tmp_path):
    path = tmp_path / "seen.ngd"
    drafter = Drafter(dynamic=path)
    stream = np.tile(np.arange(1, 9, dtype=np.int32), 20)
    drafter.start(stream)
    drafter.finish()
    expected = Drafter(dynamic=NgramCache.load(path))
    expected.start([1, 2])
    path.write_bytes(os.urandom(4096))  # another program's file now
    drafter.start([1, 2])
    assert drafter.draft().tolist() == expected.draft().tolist() != []
    with pytest.warns(UnsavedCountsWarning, match="seen.ngd"):
        drafter.finish()
    with pytest.raises(CacheFileError):
        drafter.flush()
    path.unlink()  # moved away: saves resume, losing nothing this writer knew
    drafter.flush()
    assert NgramCache.load(path).followers((1, 2))[0].tolist() == [3]


_DRAFTING = textwrap.dedent(
    """
    import sys
    import numpy as np
    from ngramdraft import Drafter, StaticCache
    static = StaticCache.open(sys.argv[1])
    drafter = Drafter(static=static)
    stream = np.load(sys.argv[2])
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(0, len(stream) - 64, 16):
        drafter.start(stream[i : i + 64])
        drafter.draft()
    print("drafted", flush=True)
    """
)


def _drafting_child(static_path, stream_path):
    proc = subprocess.Popen(
        [sys.executable, "-X", "faulthandler", "-c", _DRAFTING, str(static_path), str(stream_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def static_file(tmp_path):
    stream = RNG.integers(0, 30_000, 600_000).astype(np.int32)
    np.save(tmp_path / "stream.npy", stream)
    build_static(stream, tmp_path / "static.ngd")
    return tmp_path / "static.ngd", tmp_path / "stream.npy"


def test_a_static_file_replaced_under_a_drafter_keeps_serving_the_old_one(static_file):
    static, stream = static_file
    proc = _drafting_child(static, stream)
    build_static(np.arange(100, dtype=np.int32), static)  # an atomic replace
    out, err = proc.communicate("go\n", timeout=120)
    assert proc.returncode == 0 and "drafted" in out, err


def test_a_static_file_truncated_in_place_ends_the_process_with_sigbus(static_file):
    """What no library can catch: pages of a mapping cut from under it. faulthandler names
    it; ngramdraft's own writers never truncate in place."""
    static, stream = static_file
    proc = _drafting_child(static, stream)
    with open(static, "r+b") as f:
        f.truncate(4096)
    _, err = proc.communicate("go\n", timeout=120)
    assert proc.returncode == -signal.SIGBUS, (proc.returncode, err)
    assert "Bus error" in err
