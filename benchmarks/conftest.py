"""pytest-benchmark suites: `pytest benchmarks/ --benchmark-only` (run from the repo root).

Every group has one baseline (extra_info["baseline"]) timed in the same run; the
summary at the end prints each benchmark's ratio to it. pytest-benchmark times
whole calls: a replay here includes what lookup-stats leaves out of its clock
(allocating the tables, merging each chunk into the dynamic cache), on a
20,000-token stream, so these ratios understate the per-drafted-token ones
that benchmarks/scaling.py reports.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import corpora

N_CTX, N_DRAFT = 4096, 8


@pytest.fixture(scope="session")
def stream():
    """The first 20,000 tokens of the held-out test stream."""
    return corpora.test_stream(20_000)


@pytest.fixture(scope="session")
def static25():
    return corpora.static_cache(25)[0]


@pytest.fixture(scope="session")
def ref_static25():
    """The 25 MB static cache as the reference's dict of dicts."""
    import reference as R

    return R.static_cache(corpora.prefix_tokens(25).tolist())


def baseline(benchmark):
    benchmark.extra_info["baseline"] = True


def pytest_terminal_summary(terminalreporter, config):
    session = getattr(config, "_benchmarksession", None)
    if session is None or not session.benchmarks:
        return
    groups = {}
    for bench in session.benchmarks:
        groups.setdefault(bench.group, []).append(bench)
    terminalreporter.section("ratios to each group's baseline (median times)")
    for group, benches in sorted(groups.items(), key=lambda g: str(g[0])):
        base = next((b for b in benches if b.extra_info.get("baseline")), None)
        if base is None:
            continue
        terminalreporter.write_line(f"{group}:")
        for b in sorted(benches, key=lambda b: b.stats.median):
            ratio = base.stats.median / b.stats.median
            extra = {k: v for k, v in b.extra_info.items() if k != "baseline"}
            if b is base:
                mark = " (baseline)"
            elif ratio >= 1:
                mark = f" {ratio:8.1f}x faster than baseline"
            else:
                mark = f" {1 / ratio:8.1f}x slower than baseline"
            terminalreporter.write_line(
                f"  {b.name:<44} {b.stats.median * 1e3:10.3f} ms{mark} {extra or ''}"
            )
