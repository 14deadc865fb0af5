"""Loading the compiled kernels before a first request: practice runs of a drafter and a
batch on made-up tokens.

numba loads each kernel at its first call, about half a second for a rule
set's: a server's or a one-shot ``generate``'s first request would
otherwise wait for it, after its prompt. The engine adapters call
:func:`load_kernels` (one sequence) or :func:`load_batch_kernels` (vLLM's
batches) as they are made; each rule set's ``exercise`` (what an
installation compiles once, ``cli/compiled.py``) drives the same calls.
"""

import numpy as np

from .batch import PARALLEL_FROM, BatchDrafter
from .drafter import Drafter


def practice_tokens() -> np.ndarray:
    """2,800 tokens that take the kernels down their paths: noise, a run repeated 30
    times (drafts that hold), noise again."""
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 200, 1200)
    return np.concatenate([noise, np.tile(np.arange(200, 240), 30), noise[:400]]).astype(np.int32)


def drive_drafter(drafter: Drafter, stream: np.ndarray) -> None:
    """A drafter's every call over ``stream`` (:func:`practice_tokens`): start, draft,
    accept (one token, many, so many that the context table grows), rewind, sync, finish."""
    drafter.start(stream[:50])
    for i in range(50, 120):
        drafter.draft()
        drafter.accept([int(stream[i])])
    drafter.accept(stream[120:140])
    drafter.rewind(5)
    drafter.sync(stream[:200])
    drafter.accept(stream[200:])
    drafter.finish()
    drafter.sync(stream[300:400])
    drafter.finish()


_LOADED: set[str] = set()  # the rule sets whose Drafter kernels this process has loaded


def load_kernels(rules: str = "llamacpp") -> None:
    """Load the compiled kernels a Drafter of ``rules`` runs, once per process, on a
    throwaway drafter.

    numba loads each kernel at its first call, about half a second for a
    rule set's: a server or a one-shot ``generate`` would otherwise pay it
    inside its first request, after the prompt. The engine adapters call this
    as they are made, with the model's load. The throwaway drafter has no
    caches of the caller's, so nothing of its sequences is kept; the kernels
    only a static cache reaches load at its first use.
    """
    if rules not in _LOADED:
        drive_drafter(Drafter(rules=rules), practice_tokens())
        _LOADED.add(rules)


def drive_batch(batch: BatchDrafter, stream: np.ndarray, n: int) -> None:
    """A batch's every call over n sequences of ``stream`` (:func:`practice_tokens`, n
    fewer than a thousand); from PARALLEL_FROM sequences on, the threaded kernels."""
    ids = list(range(n))
    for i in ids:
        batch.add(i, stream[i : i + 60])
    tokens, lengths = batch.draft(ids)
    batch.accept(ids, tokens, lengths)
    batch.accept(ids, [stream[i + 60 : i + 62] for i in ids])
    batch.accept(ids, np.zeros((n, 2), dtype=np.int64), np.zeros(n, dtype=np.int64))  # numpy's ints
    table = np.stack([stream[i : i + 90] for i in ids]).astype(np.int32)
    batch.sync(ids, table, np.full(n, 90))
    batch.rewind(0, 3)
    batch.accept([0], [stream[n:]])  # more than its buffer and context table hold: both grow
    for i in ids:
        batch.finish(i)


_BATCH_LOADED: set[str] = set()  # the rule sets whose batch kernels this process has loaded


def load_batch_kernels(rules: str = "llamacpp") -> None:
    """Load the compiled kernels a BatchDrafter of ``rules`` runs, once per process, on
    throwaway batches of one sequence and of PARALLEL_FROM, as
    :func:`load_kernels` does for one Drafter (a server's
    first step would otherwise wait for them, about a quarter of a second)."""
    if rules not in _BATCH_LOADED:
        for n in (1, PARALLEL_FROM):
            drive_batch(BatchDrafter(rules=rules, max_seqs=n), practice_tokens(), n)
        _BATCH_LOADED.add(rules)
