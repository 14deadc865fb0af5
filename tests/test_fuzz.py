"""Fuzz: seeded mutations of every file kind, each used in a child process.

The kinds: static, dynamic and llama.cpp files (llama.cpp's rules), suffix
files and requests files (the suffix rules).

Each mutated file goes through every entry point that takes a cache file
(open, load, verify, draft, replay, a cache in the dynamic role,
``from_cache`` both ways, saving as a lookup file, ``inspect``,
``merge-static``, ``merge-dynamic``, ``convert`` both ways: see
``fuzzcases.exercise``). Every case ends in a named error or in drafting that
hands out only token ids the file allows: never a signal, a hang, a generic
exception or an out-of-range token. The suite tries 7,500 cases (about a
minute); ``NGRAMDRAFT_FUZZ_LONG=1 pytest -m fuzz`` tries 40,000 more (8,000 of
each kind).
"""

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from fuzzcases import KINDS, exercise, make_bases

HERE = Path(__file__).resolve().parent
# Seconds without progress: a hang. Generous: under the parallel suite, a case that runs
# the command line starts a process that loads every kernel while other tests take the cores.
CASE_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    directory = tmp_path_factory.mktemp("fuzz")
    make_bases(directory)
    # Every path once on the valid files, here: the kernels the children load are
    # then compiled, and a child's first case is not taken for a hang while they compile.
    stream = np.load(directory / "stream.npy")
    for kind, name in KINDS.items():
        out = tmp_path_factory.mktemp(f"warm-{kind}")
        np.save(out / "t.npy", stream[:300])
        exercise(directory / name, kind, stream, out)
    return directory


class Worker:
    """A child running cases [first, end) of one kind, restarted after a crash or a hang."""

    def __init__(self, bases, kind, first, end):
        self.bases, self.kind, self.next, self.end = bases, kind, first, end
        self.outcomes = {}
        self.last = time.monotonic()
        self.hung = False

    def run(self):
        while self.next < self.end:
            proc = subprocess.Popen(
                [sys.executable, str(HERE / "fuzzcases.py"), str(self.bases), self.kind,
                 str(self.next), str(self.end - self.next)],
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )  # fmt: skip
            self.last, self.hung = time.monotonic(), False
            watchdog = threading.Thread(target=self._watch, args=(proc,), daemon=True)
            watchdog.start()
            for line in proc.stdout:
                self.last = time.monotonic()
                word, case, *rest = line.split(maxsplit=2)
                if word == "done":
                    self.outcomes[int(case)] = rest[0].strip()
                    self.next = int(case) + 1
            proc.wait()
            if self.next < self.end:  # the child died, or hung and was killed, in this case
                why = "hang" if self.hung else f"exit status {proc.returncode}"
                self.outcomes[self.next] = f"FAIL:{why}"
                self.next += 1

    def _watch(self, proc):
        while proc.poll() is None:
            if time.monotonic() - self.last > CASE_TIMEOUT:
                self.hung = True
                proc.kill()
            time.sleep(0.5)


def run_cases(bases, n_per_kind):
    """Outcomes by kind and case; the kinds run side by side, one child each."""
    workers = [Worker(bases, kind, 0, n_per_kind) for kind in KINDS]
    threads = [threading.Thread(target=w.run) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {kind: w.outcomes for kind, w in zip(KINDS, workers, strict=True)}


def _check(outcomes, n_per_kind):
    failures = []
    for kind, cases in outcomes.items():
        assert len(cases) == n_per_kind, kind
        failures += [f"{kind} case {c}: {o}" for c, o in cases.items() if o.startswith("FAIL")]
        kinds = {o.split(":")[0] for o in cases.values()}
        assert "named" in kinds, f"{kind}: no mutation was caught; the fuzzer mutates nothing"
    assert not failures, "\n".join(failures[:20])


@pytest.mark.fuzz
def test_fuzz(bases):
    n = 1500
    _check(run_cases(bases, n), n)


@pytest.mark.fuzz
@pytest.mark.skipif(not os.environ.get("NGRAMDRAFT_FUZZ_LONG"), reason="NGRAMDRAFT_FUZZ_LONG=1")
def test_fuzz_long(bases):
    n = 8000
    _check(run_cases(bases, n), n)
