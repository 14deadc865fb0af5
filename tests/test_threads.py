"""Threads: one NgramCache shared by several (merges never give a draft a torn table), one
BatchDrafter called from several (its calls run one at a time)."""

import pickle
import subprocess
import sys
import threading

import numpy as np
import pytest

from ngramdraft import BatchDrafter, Drafter, NgramCache

VOCAB = 400
N_DRAFT = 6
ROWS = 256  # a batch this large drafts over threads, for long stretches without the GIL


def _sources(rng, prompt, k):
    """k caches to merge, each adding followers to the prompt's last n-grams.

    The prompt repeats nothing, so only the dynamic cache drafts for it; three
    continuations compete there, in growing numbers, so the draft changes.
    """
    continuations = rng.integers(VOCAB, 2 * VOCAB, (3, N_DRAFT))
    sources = []
    for j in range(k):
        parts = [rng.integers(0, VOCAB, int(rng.integers(200, 3000)))]
        parts += [prompt[-4:], continuations[j % 3]] * 4 ** (j % 6)
        cache = NgramCache()
        cache.update(np.concatenate(parts))
        sources.append(cache)
    return sources


def _possible_drafts(prompt, sources):
    """The draft after each number of merges: every draft a reader may see."""
    dynamic = NgramCache()
    seen = set()
    for j in range(len(sources) + 1):
        if j:
            dynamic.merge(sources[j - 1])
        drafter = Drafter(dynamic=dynamic, n_draft=N_DRAFT)
        drafter.start(prompt)
        seen.add(tuple(drafter.draft().tolist()))
    return seen


def test_drafts_during_merges_are_drafts_of_some_merged_state():
    rng = np.random.default_rng(7)
    prompt = rng.permutation(VOCAB)[:40] + 2 * VOCAB
    sources = _sources(rng, prompt, 150)
    possible = _possible_drafts(prompt, sources)
    assert len(possible) > 3, possible  # the merges do change the draft

    shared = NgramCache()
    drafters = [Drafter(dynamic=shared, n_draft=N_DRAFT) for _ in range(2)]
    for d in drafters:
        d.start(prompt)
    batch = BatchDrafter(dynamic=shared, n_draft=N_DRAFT, max_seqs=256)
    for i in range(ROWS):
        batch.add(i, prompt)
    done = threading.Event()
    seen = []

    def draft(drafter):
        while not done.is_set():
            seen.append(tuple(drafter.draft().tolist()))

    def draft_batch():
        while not done.is_set():
            out, lengths = batch.draft(list(range(ROWS)))
            seen.extend(tuple(out[i, : lengths[i]].tolist()) for i in range(ROWS))

    readers = [threading.Thread(target=draft, args=(d,)) for d in drafters]
    readers.append(threading.Thread(target=draft_batch))
    for t in readers:
        t.start()
    try:
        for source in sources:
            shared.merge(source)
    finally:
        done.set()
        for t in readers:
            t.join()
    assert set(seen) <= possible
    shared.verify()
    final = Drafter(dynamic=shared, n_draft=N_DRAFT)
    final.start(prompt)
    assert drafters[0].draft().tolist() == final.draft().tolist()


def _blocks_while_locked(cache, call):
    """Whether ``call()`` in another thread waits while this thread holds ``cache.lock``."""
    finished = threading.Event()
    worker = threading.Thread(target=lambda: (call(), finished.set()))
    with cache.lock:
        worker.start()
        waited = not finished.wait(0.3)
    worker.join(300)  # a cold numba cache compiles the kernel first
    return waited and finished.is_set()


def test_drafts_and_merges_take_the_shared_cache_lock():
    shared = NgramCache()
    drafter = Drafter(dynamic=shared)
    drafter.start([1, 2, 3])
    batch = BatchDrafter(dynamic=shared)
    batch.add("a", [1, 2, 3])
    other = NgramCache()
    other.update(np.array([1, 2, 3, 4]))
    assert _blocks_while_locked(shared, drafter.draft)
    assert _blocks_while_locked(shared, lambda: batch.draft(["a"]))
    assert _blocks_while_locked(shared, lambda: shared.merge(other))
    assert _blocks_while_locked(shared, drafter.finish)


def test_merges_from_many_threads_all_count():
    shared = NgramCache(max_ngrams=None)
    caches = []
    for i in range(16):
        c = NgramCache()
        c.update(np.array([100 + i, 200 + i, 7, 8, 9]))
        caches.append(c)

    def merge(part):
        for c in part:
            shared.merge(c)

    threads = [threading.Thread(target=merge, args=(caches[k::4],)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shared.verify()
    assert shared.followers((7, 8))[1].tolist() == [16]
    assert all(shared.followers((100 + i, 200 + i))[0].tolist() == [7] for i in range(16))


def test_a_shared_cache_pickles_without_its_lock():
    cache = NgramCache()
    cache.update(np.array([1, 2, 3, 1, 2, 4]))
    copy = pickle.loads(pickle.dumps(cache))
    assert copy.arrays()[2].tolist() == cache.arrays()[2].tolist()
    copy.merge(cache)  # the copy has a lock of its own
    assert copy.followers((1, 2))[1].tolist() == [2, 2]


_HAMMER = """
import sys, threading
import numpy as np
from ngramdraft import BatchDrafter
batch = BatchDrafter(rules=sys.argv[1], max_seqs=80)
ids = list(range(64))
for i in ids:
    batch.add(i, np.random.default_rng(i).integers(0, 50, 100))
errors = []
def step():
    rng = np.random.default_rng()
    try:
        for _ in range(400):
            batch.accept(ids, [rng.integers(0, 50, int(rng.integers(1, 40))) for _ in ids])
            batch.draft(ids)
    except Exception as e:
        errors.append(repr(e))
def come_and_go():  # a request handler's thread: requests added and finished meanwhile
    for j in range(400):
        batch.add(1000 + j, [1, 2, 3])
        batch.finish(1000 + j)
threads = [threading.Thread(target=f) for f in (step, step, come_and_go)]
[t.start() for t in threads]
[t.join() for t in threads]
assert not errors, errors
assert all(len(batch.tokens(i)) > 100 for i in ids) and len(batch) == 64
print("ok")
"""


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_a_batch_called_from_several_threads_runs_one_call_at_a_time(rules):
    """Two threads stepping one batch, a third adding and finishing sequences: once, the
    kernels of two calls wrote the same sequences' buffers (one freed by a growth) and the
    process died ("corrupted size vs. prev_size") or raised a broadcast error. A child
    process, so that a crash fails this test and not the suite."""
    run = subprocess.run(
        [sys.executable, "-c", _HAMMER, rules], capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", (run.returncode, run.stderr[-500:])
