"""One dynamic cache file for many requests and processes: nothing is ever lost."""

import subprocess
import sys
import threading

import numpy as np
import pytest

from ngramdraft import Drafter, NgramCache
from ngramdraft.atomic import locked
from ngramdraft.errors import LockTimeoutError

WRITER = """
import sys
from ngramdraft import Drafter
path, who = sys.argv[1], int(sys.argv[2])
drafter = Drafter(dynamic=path)
for i in range(20):
    drafter.start([1000 + who, 2000 + i, 7])  # one 3-gram per (writer, round)
    drafter.finish()
"""


def _contributions(path):
    cache = NgramCache.load(path)
    return {
        (who, i): cache.followers((1000 + who, 2000 + i)) for who in range(2) for i in range(20)
    }


def test_two_processes_finishing_on_one_path_lose_nothing(tmp_path):
    path = tmp_path / "shared.ngd"
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(who)]) for who in range(2)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    found = _contributions(path)
    assert all(t.tolist() == [7] and c.tolist() == [1] for t, c in found.values()), found
    assert len(NgramCache.load(path).followers((7,))[0]) == 0  # 7 is last: no follower


def test_threads_sharing_a_path_and_a_second_drafter_see_each_other(tmp_path):
    path = tmp_path / "shared.bin"  # a llama.cpp lookup file, merged the same way
    drafters = [Drafter(dynamic=path) for _ in range(2)]

    def work(who):
        for i in range(20):
            drafters[who].start([1000 + who, 2000 + i, 7])
            drafters[who].finish()

    threads = [threading.Thread(target=work, args=(who,)) for who in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    found = _contributions(path)
    assert all(t.tolist() == [7] and c.tolist() == [1] for t, c in found.values())
    # The writer that saved last holds everything, the other's included.
    last = max(drafters, key=lambda d: d._shared._seen[2])
    assert len(last.dynamic) == len(NgramCache.load(path))


def test_a_lock_not_taken_in_time_is_named_and_loses_nothing(tmp_path):
    path = tmp_path / "shared.ngd"
    drafter = Drafter(dynamic=path, lock_timeout=0.2)
    drafter.start([1, 2, 3])
    with locked(path, 1.0), pytest.raises(LockTimeoutError, match="lock"):
        drafter.finish()
    assert not path.exists()
    drafter.start([4, 5, 6])
    drafter.finish()  # the pending counts of the first sequence go with this save
    cache = NgramCache.load(path)
    assert cache.followers((1, 2))[0].tolist() == [3] and cache.followers((4, 5))[0].tolist() == [6]


def test_merge_dynamic_adds_up_native_and_llama_cpp_files(tmp_path, cli):
    a, b = NgramCache(), NgramCache()
    a.update(np.array([1, 2, 3, 1, 2, 3]))
    b.update(np.array([1, 2, 4]))
    a.save(tmp_path / "a.ngd")
    b.save(tmp_path / "b.bin", "llamacpp")
    status, out, _ = cli(
        "merge-dynamic", tmp_path / "a.ngd", tmp_path / "b.bin", "-o", tmp_path / "m.bin"
    )
    assert status == 0 and "n-grams" in out
    merged = NgramCache.load(tmp_path / "m.bin")
    tokens, counts = merged.followers((1, 2))
    assert tokens.tolist() == [3, 4] and counts.tolist() == [2, 1]
