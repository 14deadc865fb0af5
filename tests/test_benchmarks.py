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
    rng = np.random.default_rng(0)
    text = rng.integers(0, 30, 300).tolist()
    requests = [(text[:200], text[100:250])]  # the output repeats part of the prompt
    ceiling = drafting.run("toy", "ceiling", 8, requests)
    rules = drafting.run("toy", "llama.cpp", 8, requests)
    assert ceiling["accepted_share"] == 1.0
    assert ceiling["tokens_per_pass"] >= rules["tokens_per_pass"] > 1.0
