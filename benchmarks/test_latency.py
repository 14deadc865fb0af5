"""Draft latency and open time: all-numba replay, the per-call API, the plain-Python
reference, and opening a static cache against loading a llama.cpp lookup file."""

import pytest

from common import corpora
from conftest import N_CTX, N_DRAFT, baseline
from ngramdraft import Drafter, NgramCache, StaticCache, replay, static_from_llamacpp


def _per_drafted(benchmark, n_drafted):
    benchmark.extra_info["n_drafted"] = n_drafted


@pytest.mark.benchmark(group="replay, no static cache")
def test_replay_numba_no_static(benchmark, stream):
    result = benchmark(replay, stream, N_CTX, N_DRAFT)
    _per_drafted(benchmark, result.n_drafted)


@pytest.mark.benchmark(group="replay, no static cache")
def test_replay_reference_no_static(benchmark, stream, reference):
    baseline(benchmark)
    out = benchmark.pedantic(reference.replay, (stream.tolist(), N_CTX, N_DRAFT), rounds=2)
    _per_drafted(benchmark, out[1])


@pytest.mark.benchmark(group="replay, static cache")
def test_replay_numba_static(benchmark, stream, static):
    result = benchmark(replay, stream, N_CTX, N_DRAFT, static)
    _per_drafted(benchmark, result.n_drafted)


@pytest.mark.benchmark(group="replay, static cache")
def test_replay_reference_static(benchmark, stream, reference, ref_static):
    baseline(benchmark)
    args = (stream.tolist(), N_CTX, N_DRAFT, ref_static)
    out = benchmark.pedantic(reference.replay, args, rounds=2)
    _per_drafted(benchmark, out[1])


def _api_replay(stream, static):
    """lookup-stats' protocol through Drafter.draft()/accept() from Python."""
    drafter = Drafter(static, n_draft=N_DRAFT)
    drafted = 0
    for start in range(0, len(stream) - N_CTX, N_CTX):
        chunk = stream[start : start + N_CTX]
        drafter.start(chunk[:1])
        n_out = 1
        while n_out < N_CTX:
            draft = drafter.draft()
            drafted += len(draft)
            n = 0
            while n < len(draft) and n_out + n < N_CTX and draft[n] == chunk[n_out + n]:
                n += 1
            accepted = chunk[n_out : min(n_out + n + 1, N_CTX)]
            drafter.accept(accepted)
            n_out += len(accepted)
        drafter.finish()
    return drafted


@pytest.mark.benchmark(group="per-call API vs replay, static cache")
def test_api_path_static(benchmark, stream, static):
    _per_drafted(benchmark, benchmark(_api_replay, stream, static))


@pytest.mark.benchmark(group="per-call API vs replay, static cache")
def test_api_baseline_replay_static(benchmark, stream, static):
    baseline(benchmark)
    _per_drafted(benchmark, benchmark(replay, stream, N_CTX, N_DRAFT, static).n_drafted)


@pytest.mark.benchmark(group="open the static cache")
def test_open_native(benchmark, static):
    benchmark(StaticCache.open, static.path)


@pytest.mark.benchmark(group="open the static cache")
def test_load_llamacpp_lookup_file(benchmark, corpus_mb):
    baseline(benchmark)
    benchmark.pedantic(NgramCache.load, (corpora.lookup_file(corpus_mb),), rounds=3)


@pytest.mark.benchmark(group="open the static cache")
def test_convert_llamacpp_lookup_file(benchmark, corpus_mb):
    benchmark.pedantic(static_from_llamacpp, (corpora.lookup_file(corpus_mb),), rounds=3)
