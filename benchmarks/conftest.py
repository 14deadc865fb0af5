"""pytest-benchmark suites: ``pytest benchmarks/ --benchmark-only`` (from the repo root).

Every group has one baseline (extra_info["baseline"]) timed in the same run; the
summary at the end prints each benchmark's ratio to it. pytest-benchmark times
whole calls in one process: a replay here includes what lookup-stats leaves
out of its clock (allocating the tables, merging each chunk into the dynamic
cache), on a 20,000-token stream, so these ratios understate the per-drafted-
token ones that ``scaling.py`` reports from fresh processes. ``--smoke`` runs
each benchmark once on a 1 MB corpus and 5,000 tokens (with ``--benchmark-disable``:
the test suite's check that the suites still run).
"""

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, harness

N_CTX, N_DRAFT = 4096, 8


def pytest_addoption(parser):
    parser.addoption("--smoke", action="store_true", help="1 MB corpus, 5,000 tokens")


@pytest.fixture(scope="session")
def smoke(request):
    corpora.SMOKE = request.config.getoption("--smoke")
    return corpora.SMOKE


@pytest.fixture(scope="session")
def stream(smoke):
    """The first 20,000 tokens of the held-out test stream (5,000: smoke)."""
    return corpora.test_stream(5_000 if smoke else 20_000)


@pytest.fixture(scope="session")
def corpus_mb(smoke):
    return 1 if smoke else 25


@pytest.fixture(scope="session")
def static(corpus_mb):
    return corpora.static_cache(corpus_mb)


@pytest.fixture(scope="session")
def reference():
    """The plain-Python reference the tests hold (dicts, written from docs/rules.md)."""
    spec = importlib.util.spec_from_file_location(
        "reference", harness.REPO / "tests" / "reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def ref_static(reference, corpus_mb):
    """The same static cache as the reference's dict of dicts."""
    return reference.static_cache(corpora.prefix_tokens(corpus_mb).tolist())


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
