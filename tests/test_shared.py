"""One dynamic cache file for many requests and processes: nothing is ever lost."""

import subprocess
import sys
import threading

import numpy as np
import pytest

from ngramdraft import Drafter, InvalidParameterError, NgramCache
from ngramdraft.errors import LockTimeoutError, UnsavedCountsWarning
from ngramdraft.files.atomic import locked

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
    last = max(drafters, key=lambda d: d.shared._seen[2])
    assert len(last.dynamic) == len(NgramCache.load(path))


def test_a_lock_not_taken_in_time_is_named_and_loses_nothing(tmp_path):
    path = tmp_path / "shared.ngd"
    drafter = Drafter(dynamic=path, lock_timeout=0.2)
    drafter.start([1, 2, 3])
    with locked(path, 1.0), pytest.warns(UnsavedCountsWarning, match="lock"):
        drafter.finish()  # a server's finish goes on; the counts wait
    assert not path.exists()
    drafter.start([7, 8, 9])
    with locked(path, 1.0), pytest.raises(LockTimeoutError, match="lock"):
        drafter.flush()  # asked for, a save that cannot happen is an error
    drafter.finish()
    drafter.start([4, 5, 6])
    drafter.finish()  # the pending counts of the first sequences go with this save
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


def test_a_budget_bounds_the_dynamic_cache_by_its_stated_rule(tmp_path):
    rng = np.random.default_rng(0)
    budget = 500
    drafter = Drafter(dynamic=tmp_path / "d.ngd", max_dynamic_ngrams=budget)
    frequent = [1, 2, 3, 4] * 30  # its n-grams have the most samples: they must stay
    for _ in range(60):
        drafter.start(frequent + rng.integers(10, 60, 100).tolist())
        drafter.finish()
        assert len(drafter.dynamic) <= budget
        drafter.dynamic.verify()
    kept = NgramCache.load(tmp_path / "d.ngd")
    assert len(kept) <= budget
    assert kept.followers((1, 2, 3))[0].tolist() == [4]


def test_eviction_keeps_the_most_sampled_ngrams_shorter_first():
    """The rule, against a naive ranking: most samples, then shorter, then smaller ids."""
    rng = np.random.default_rng(1)
    full = NgramCache()
    full.update(rng.integers(0, 15, 3000))
    budget = len(full) // 3
    every = {ngram: (tokens.tolist(), counts.tolist()) for ngram, tokens, counts in full}
    ranked = sorted(every, key=lambda g: (-sum(every[g][1]), len(g), g))
    cut = NgramCache(max_ngrams=budget)
    cut.merge(full)
    cut.verify()
    assert {ngram for ngram, _, _ in cut} == set(ranked[: budget * 9 // 10])
    for ngram, tokens, counts in cut:
        assert (tokens.tolist(), counts.tolist()) == every[ngram]


def test_budgets_that_hold_nothing_are_named():
    for bad in (0, -5, 2.5, True):
        with pytest.raises(InvalidParameterError, match="max_ngrams"):
            NgramCache(max_ngrams=bad)
    with pytest.raises(InvalidParameterError, match="its own budget"):
        Drafter(dynamic=NgramCache(), max_dynamic_ngrams=10)


def test_save_every_spaces_the_saves_and_flush_writes_the_rest(tmp_path):
    path = tmp_path / "spaced.ngd"
    drafter = Drafter(dynamic=path, save_every=3600)
    for i in range(3):
        drafter.start([50 + i, 60, 70])
        drafter.finish()
    assert not path.exists()  # no save yet: the sequences are pending
    drafter.flush()
    cache = NgramCache.load(path)
    assert [cache.followers((50 + i, 60))[0].tolist() for i in range(3)] == [[70]] * 3
    mtime = path.stat().st_mtime_ns
    drafter.flush()  # nothing pending: no rewrite
    assert path.stat().st_mtime_ns == mtime


def test_spaced_saves_from_two_processes_lose_nothing(tmp_path):
    path = tmp_path / "shared.ngd"
    writer = WRITER.replace("Drafter(dynamic=path)", "Drafter(dynamic=path, save_every=3600)")
    writer += "drafter.flush()\n"
    procs = [subprocess.Popen([sys.executable, "-c", writer, str(path), str(w)]) for w in range(2)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    found = _contributions(path)
    assert all(t.tolist() == [7] and c.tolist() == [1] for t, c in found.values()), found
