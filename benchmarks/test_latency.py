"""Draft latency: all-numba replay, the per-call API, and the plain-Python reference."""

import pytest

import reference as R
from conftest import N_CTX, N_DRAFT, baseline
from ngramdraft import Drafter, replay


def _per_drafted(benchmark, n_drafted):
    benchmark.extra_info["n_drafted"] = n_drafted


@pytest.mark.benchmark(group="replay, no static cache")
def test_replay_numba_no_static(benchmark, stream):
    result = benchmark(replay, stream, N_CTX, N_DRAFT)
    _per_drafted(benchmark, result.n_drafted)


@pytest.mark.benchmark(group="replay, no static cache")
def test_replay_reference_no_static(benchmark, stream):
    baseline(benchmark)
    out = benchmark.pedantic(R.replay, (stream.tolist(), N_CTX, N_DRAFT), rounds=2)
    _per_drafted(benchmark, out[1])


@pytest.mark.benchmark(group="replay, 25 MB static cache")
def test_replay_numba_static25(benchmark, stream, static25):
    result = benchmark(replay, stream, N_CTX, N_DRAFT, static25)
    _per_drafted(benchmark, result.n_drafted)


@pytest.mark.benchmark(group="replay, 25 MB static cache")
def test_replay_reference_static25(benchmark, stream, ref_static25):
    baseline(benchmark)
    out = benchmark.pedantic(R.replay, (stream.tolist(), N_CTX, N_DRAFT, ref_static25), rounds=2)
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


@pytest.mark.benchmark(group="per-call API vs replay, 25 MB static cache")
def test_api_path_static25(benchmark, stream, static25):
    _per_drafted(benchmark, benchmark(_api_replay, stream, static25))


@pytest.mark.benchmark(group="per-call API vs replay, 25 MB static cache")
def test_api_baseline_replay_static25(benchmark, stream, static25):
    baseline(benchmark)
    _per_drafted(benchmark, benchmark(replay, stream, N_CTX, N_DRAFT, static25).n_drafted)
