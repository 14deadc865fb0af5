"""The benchmarks' workloads build from what the repository holds.

The edit workload read a source file by path; the layout change moved it and
``benchmarks/e2e.py`` failed with FileNotFoundError before its first run.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
e2e = pytest.importorskip("e2e")


@pytest.mark.parametrize("workload", e2e.WORKLOADS)
def test_every_workload_builds(workload):
    requests = e2e.MAKERS[workload](200)
    assert requests and all(len(prompt) and len(output) for prompt, output in requests)
    assert sum(len(output) for _, output in requests) >= 150
