"""Opening a static cache, against the llama.cpp lookup-file path; memory of a replay."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import corpora
from conftest import baseline
from ngramdraft import NgramCache, StaticCache

PROBE = Path(__file__).resolve().parent / "probe.py"


@pytest.mark.benchmark(group="open the 25 MB static cache")
def test_open_native(benchmark, static25):
    benchmark(StaticCache.open, static25.path)


@pytest.mark.benchmark(group="open the 25 MB static cache")
def test_load_llamacpp_lookup_file(benchmark):
    baseline(benchmark)
    path = corpora.lookup_file(25)
    benchmark.pedantic(NgramCache.load, (path,), rounds=3)


@pytest.mark.benchmark(group="open the 25 MB static cache")
def test_convert_llamacpp_lookup_file(benchmark):
    path = corpora.lookup_file(25)
    benchmark.pedantic(StaticCache.from_llamacpp, (path,), rounds=3)


def _probe(*args):
    out = subprocess.run(
        [sys.executable, str(PROBE), *map(str, args)], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


@pytest.mark.benchmark(group="replay process memory (fresh process each)")
def test_memory_without_static(benchmark, tmp_path, stream):
    baseline(benchmark)
    path = tmp_path / "t.i32"
    stream.astype("<i4").tofile(path)
    r = benchmark.pedantic(_probe, ("replay", path), rounds=1)
    benchmark.extra_info["peak_rss_mb"] = round(r["peak_rss_kb"] / 1024, 1)


@pytest.mark.benchmark(group="replay process memory (fresh process each)")
def test_memory_with_static25(benchmark, tmp_path, stream, static25):
    path = tmp_path / "t.i32"
    stream.astype("<i4").tofile(path)
    r = benchmark.pedantic(_probe, ("replay", path, static25.path), rounds=1)
    benchmark.extra_info["peak_rss_mb"] = round(r["peak_rss_kb"] / 1024, 1)
    benchmark.extra_info["mmap_resident_mb"] = round(r["static_resident_kb"] / 1024, 1)
    benchmark.extra_info["file_mb"] = round(static25.path.stat().st_size / 1e6, 1)
