"""The numba path against the plain-Python reference, on random streams (hypothesis).

Small vocabularies make repeats and ties the rule rather than the exception.
"""

import numba
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import reference as R
from ngramdraft import Drafter, NgramCache, build_static, replay

# Hypothesis draws streams shorter than a chunk too; replay says so, rightly.
pytestmark = pytest.mark.filterwarnings("ignore::ngramdraft.errors.ShortStreamWarning")

# Without the JIT (coverage runs) the kernels are plain Python: fewer examples
# cover the same paths in reasonable time.
SETTINGS = settings(
    max_examples=10 if numba.config.DISABLE_JIT else 150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def streams(max_len=160):
    return st.integers(2, 12).flatmap(
        lambda vocab: st.lists(st.integers(0, vocab - 1), min_size=0, max_size=max_len)
    )


def _ref_cache(cache):
    return {
        (*ngram, *(-1,) * (4 - len(ngram))): dict(zip(t.tolist(), c.tolist(), strict=True))
        for ngram, t, c in cache
    }


@SETTINGS
@given(
    tokens=streams(300),
    corpus=st.one_of(st.none(), streams(200)),
    earlier=st.one_of(st.none(), streams(200)),
    n_ctx=st.integers(2, 64),
    n_draft=st.integers(1, 16),
)
def test_replay_matches_reference(tokens, corpus, earlier, n_ctx, n_draft):
    static = build_static(corpus, _tmp("s.ngd")) if corpus is not None else None
    dynamic = None
    if earlier is not None:
        dynamic = NgramCache()
        dynamic.update(earlier)
    result = replay(tokens, n_ctx, n_draft, static, dynamic, dump=True)
    ref_static = R.static_cache(corpus) if corpus is not None else None
    ref_dynamic = None
    if earlier is not None:
        ref_dynamic = {}
        R.update(ref_dynamic, 1, 4, earlier, len(earlier))
    n_calls, n_drafted, n_accept, dump = R.replay(tokens, n_ctx, n_draft, ref_static, ref_dynamic)
    assert result.dump.tolist() == dump
    assert (result.n_calls, result.n_drafted, result.n_accept) == (n_calls, n_drafted, n_accept)


@SETTINGS
@given(
    prompt=streams(120),
    steps=st.lists(st.lists(st.integers(0, 11), max_size=6), max_size=12),
    corpus=st.one_of(st.none(), streams(200)),
    earlier=st.one_of(st.none(), streams(200)),
    sizes=st.tuples(st.integers(1, 4), st.integers(1, 4)).map(sorted),
    n_draft=st.integers(1, 16),
)
def test_drafter_matches_reference(prompt, steps, corpus, earlier, sizes, n_draft):
    """Every ngram_min/ngram_max pair, through the per-call API."""
    nmin, nmax = sizes
    static = build_static(corpus, _tmp("s.ngd")) if corpus is not None else None
    dynamic = NgramCache()
    if earlier is not None:
        dynamic.update(earlier)
    ref_dynamic = _ref_cache(dynamic)
    ref_static = R.static_cache(corpus) if corpus is not None else {}
    drafter = Drafter(static, dynamic, n_draft=n_draft, ngram_min=nmin, ngram_max=nmax)
    drafter.start(prompt)
    seq = list(prompt)
    ref_context = {}
    R.update(ref_context, 1, 4, seq, len(seq))
    for accepted in [*steps, []]:
        expected = R.draft(seq, n_draft, nmin, nmax, ref_context, ref_dynamic, ref_static)
        assert drafter.draft().tolist() == expected
        drafter.accept(accepted)
        seq += accepted
        R.update(ref_context, 1, 4, seq, len(accepted))
    drafter.context.verify()
    drafter.finish()
    R.merge(ref_dynamic, ref_context)
    assert _ref_cache(drafter.dynamic) == ref_dynamic
    drafter.dynamic.verify()


@SETTINGS
@given(streams(400), st.integers(1, 4), st.integers(1, 4), st.data())
def test_update_matches_reference(tokens, a, b, data):
    nmin, nmax = sorted((a, b))
    nnew = data.draw(st.integers(0, len(tokens)))
    cache = NgramCache()
    cache.update(tokens, nnew, nmin, nmax)
    cache.verify()
    ref = {}
    R.update(ref, nmin, nmax, tokens, nnew)
    assert _ref_cache(cache) == ref
    assert len(cache) == len(ref)
    assert cache.n_entries == sum(len(p) for p in ref.values())


@SETTINGS
@given(streams(300))
def test_static_cache_matches_reference(corpus):
    cache = build_static(corpus, _tmp("s.ngd"))
    cache.verify(deep=True)
    assert _ref_cache(cache) == R.static_cache(corpus)
    rng = np.random.default_rng(len(corpus))
    for a, b in rng.integers(0, 14, size=(20, 2)).tolist():
        toks, counts = cache.followers((a, b))
        expected = R.static_cache(corpus).get((a, b, -1, -1), {})
        assert dict(zip(toks.tolist(), counts.tolist(), strict=True)) == expected


_TMP = None


def _tmp(name):
    """A scratch path (hypothesis cannot use function-scoped tmp_path)."""
    global _TMP
    import tempfile
    from pathlib import Path

    if _TMP is None:
        _TMP = tempfile.mkdtemp(prefix="ngramdraft-hyp-")
    return Path(_TMP) / name
