"""The benchmarks' workloads build from what the repository holds.

The edit workload read a source file by path; the layout change moved it and
``benchmarks/e2e.py`` failed with FileNotFoundError before its first run.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
e2e = pytest.importorskip("e2e")


@pytest.mark.parametrize("workload", e2e.WORKLOADS)
def test_every_workload_builds(workload):
    requests = e2e.MAKERS[workload](200)
    assert requests and all(len(prompt) and len(output) for prompt, output in requests)
    assert sum(len(output) for _, output in requests) >= 150


def test_the_ceiling_bounds_what_copying_drafters_reach():
    drafting = pytest.importorskip("drafting")
    context = np.array([1, 2, 3, 4, 5, 1, 2], dtype=np.int32)
    assert drafting.ceiling_length(context, np.array([3, 4, 9], dtype=np.int32), 8) == 2
    assert drafting.ceiling_length(context, np.array([4, 5, 1, 2, 3], dtype=np.int32), 3) == 3
    assert drafting.ceiling_length(context, np.array([7], dtype=np.int32), 8) == 0
    after = np.array([4, 5], dtype=np.int32)  # found, but not after an earlier "2" or "1 2"
    assert drafting.ceiling_length(context, after, 8) == 2
    assert drafting.ceiling_length(context, after, 8, after=1) == 0
    assert drafting.ceiling_length(context, np.array([3, 4, 9], dtype=np.int32), 8, 2) == 2
    # where a copy stands is tried too, with or without a match before it
    assert drafting.ceiling_run(context, after, 8, after=1, copy=3, window=0) == (2, 3)
    assert drafting.ceiling_run(context, after, 8, after=1, copy=1, window=1) == (0, -1)
    assert drafting.ceiling_run(context, after, 8, after=1, copy=1, window=2) == (2, 3)
    rng = np.random.default_rng(0)
    text = rng.integers(0, 30, 300).tolist()
    requests = [(text[:200], text[100:250])]  # the output repeats part of the prompt
    ceiling = drafting.run("toy", "ceiling", 8, requests)
    rules = drafting.run("toy", "llama.cpp", 8, requests)
    assert ceiling["accepted_share"] == 1.0
    assert ceiling["tokens_per_pass"] >= rules["tokens_per_pass"] > 1.0
    edits = [(text[:200], [*text[:60], 99, *text[61:120]])]  # one token replaced
    per_pass = [
        drafting.run("toy", name, 8, edits)["tokens_per_pass"]
        for name in ("ceiling-1", "ceiling-1+copy", "ceiling-1+near", "ceiling")
    ]
    assert per_pass == sorted(per_pass)  # each a choice among more places


def test_context_cost_workloads_hold_the_context_asked_for():
    context_cost = pytest.importorskip("context_cost")
    ((prompt, prose),) = context_cost.requests(1024, 200, "prose")
    ((same, copy),) = context_cost.requests(1024, 200, "copy")
    assert len(prompt) == 1024 and len(prose) == len(copy) == 200
    assert np.array_equal(prompt, same) and np.count_nonzero(copy != prompt[-200:]) == 5
    rows = [
        [{"context": 1, "workload": "w", "drafter": d, "us_per_token": us} for d in "ab"]
        for us in (1.0, 3.0, 2.0)
    ]
    summary = context_cost.drafting.summarize(rows, ("context", "workload", "drafter"))
    assert [(r["drafter"], r["us_per_token"], r["us_per_token_range"]) for r in summary] == [
        ("a", 2.0, [1.0, 3.0]),
        ("b", 2.0, [1.0, 3.0]),
    ]


def test_ab_times_the_suffix_rules(tmp_path):
    ab = pytest.importorskip("ab")
    from ngramdraft import SuffixCorpus

    rng = np.random.default_rng(0)
    SuffixCorpus.build(rng.integers(0, 50, 5000), tmp_path / "c.ngd")
    stream = tmp_path / "stream.npy"
    np.save(stream, rng.integers(0, 50, 3 * 4096).astype(np.int32))
    assert ab.probe("suffix-corpus", tmp_path / "c.ngd", stream, quick=True) > 0
    assert ab.probe("suffix-long", tmp_path / "c.ngd", stream, quick=True) > 0
    assert ab.probe("suffix-batch", "-", stream, quick=True) > 0
    assert ab.probe("suffix-sync", "-", stream, quick=True) > 0
    assert ab.probe("suffix-replay", "-", stream, quick=True) > 0
    assert ab.probe("suffix-start", "-", stream, quick=True) > 0
    assert ab.probe("suffix-rebase", "-", stream, quick=True) > 0
    assert ab.probe("suffix-evict", "-", stream, quick=True) > 0
    assert ab.probe("suffix-edit", "-", stream, quick=True) > 0
