"""The arena the n-gram tables live in (kernels/arena.py): blocks zeroed, aligned and apart,
each reused only once no view of it is left, regions given back, huge pages advised."""

import gc
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from ngramdraft import NgramCache
from ngramdraft.kernels import arena

DTYPES = (np.int64, np.int32, np.uint8, np.uint64)


def _fresh(shape, dtype):
    a = arena.zeros(shape, dtype)
    assert a.dtype == dtype and a.shape == ((shape,) if isinstance(shape, int) else shape)
    assert a.flags.c_contiguous and a.flags.writeable
    assert a.nbytes < arena.SMALL or a.ctypes.data % arena.LINE == 0
    assert not a.any(), "a block handed out must be zeroed"
    return a


def test_seeded_stress_keeps_every_live_block_apart():
    rng = np.random.default_rng(20261206)
    live = {}  # pattern -> array
    for step in range(3000):
        if live and rng.random() < 0.45:
            del live[rng.choice(list(live))]
        else:
            n = int(rng.integers(1, 1 << int(rng.integers(1, 17))))
            a = _fresh(n, DTYPES[step % len(DTYPES)])
            a.fill(step % 200 + 1)
            live[step % 200 + 1 + 1000 * step] = a
        if step % 50 == 0:
            gc.collect()
            arena._check()
    for pattern, a in live.items():
        assert (a == pattern % 1000).all(), "a live block was handed out twice"
    arena._check()


def test_a_block_waits_for_its_last_view():
    """numpy points a view at the block's keeper, not at the array it was sliced from: the
    block comes back only when every view is gone (a view of a reused block would
    otherwise see another table's counts)."""
    a = arena.zeros(2000, np.int32)
    view, at = a[10:20], a.ctypes.data
    view[:] = 7
    del a
    gc.collect()
    b = _fresh(2000, np.int32)
    assert b.ctypes.data != at
    b.fill(9)
    assert (view == 7).all()
    del view
    gc.collect()
    c = _fresh(2000, np.int32)
    assert c.ctypes.data == at, "the block is reused, zeroed, once its last view is gone"


def test_a_region_none_of_whose_blocks_is_in_use_is_given_back():
    # In a fresh process: which region a block comes from depends on what came before.
    code = """
import gc
import numpy as np
from ngramdraft.kernels import arena
big = arena.LARGE // 2  # the largest class the arena cuts
held = [arena.zeros(big, np.uint8) for _ in range(arena.REGION // big + 1)]
first = held[0].base.region
assert held[-1].base.region is not first, "a full region makes way for a new one"
del held[:-1]
gc.collect()
arena.zeros(arena.SMALL, np.uint8)  # files what came back
assert all(r is not first for blocks in arena._free.values() for r, _ in blocks)
arena._check()
"""
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_large_arrays_are_numpys_own():
    a = arena.zeros((arena.LARGE // 8,), np.int64)
    assert a.base is None and not a.any()


def test_threads_allocating_and_freeing_at_once():
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        mine = []
        for i in range(2000):
            a = arena.zeros(int(rng.integers(1, 5000)), np.int32)
            if a.any():
                errors.append("not zeroed")
            a.fill(seed)
            mine.append(a)
            if len(mine) > 20:
                mine.pop(int(rng.integers(len(mine))))
            if i % 100 == 0 and any((m != seed).any() for m in mine):
                errors.append("overwritten")

    threads = [threading.Thread(target=work, args=(s,)) for s in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    arena._check()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX's")
def test_a_child_forked_while_another_thread_holds_the_lock_can_allocate():
    with arena._lock:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                arena.zeros(arena.SMALL, np.uint8)
                code = 0
            finally:
                os._exit(code)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the forked child waited for a lock its parent held")


def test_a_grown_table_lives_in_the_arena():
    cache = NgramCache("context")
    cache.update(np.arange(5000, dtype=np.int32) % 97)
    for a in cache.table:
        if arena.SMALL <= a.nbytes < arena.LARGE:
            assert type(a.base).__name__ == "_Block", a.nbytes


def _thp_mode():
    path = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    text = path.read_text() if path.exists() else ""
    return text[text.find("[") + 1 : text.find("]")] if "[" in text else None


@pytest.mark.skipif(
    sys.platform != "linux" or _thp_mode() in (None, "never"),
    reason="transparent huge pages are Linux's, and off here",
)
def test_a_region_is_advised_for_huge_pages():
    try:
        from numpy._core import multiarray
    except ImportError:  # numpy 1
        from numpy.core import multiarray

    if not multiarray._get_madvise_hugepage():
        pytest.skip("numpy's huge-page advice is turned off (NUMPY_MADVISE_HUGEPAGE=0)")
    a = arena.zeros(arena.SMALL, np.int64)
    at, flags, inside = a.ctypes.data, None, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= at < hi
        elif inside and line.startswith("VmFlags:"):
            flags = line.split()[1:]
            break
    assert flags is not None and "hg" in flags, flags
