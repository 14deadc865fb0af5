"""NgramCache: operations, invariants after every mutation, seeded stress, round trips."""

import numpy as np
import pytest

import reference as R
from ngramdraft import (
    InternalError,
    InvalidParameterError,
    InvalidTokensError,
    NgramCache,
    build_static,
)
from ngramdraft.kernels import table as T


def as_dict(cache):
    return {ngram: dict(zip(t.tolist(), c.tolist(), strict=True)) for ngram, t, c in cache}


def test_update_counts_followers_per_spec():
    cache = NgramCache()
    cache.update([5, 6, 5, 6, 7])
    cache.verify()
    assert cache.followers((5,))[0].tolist() == [6]
    assert cache.followers((5,))[1].tolist() == [2]
    toks, counts = cache.followers((6,))
    assert (toks.tolist(), counts.tolist()) == ([5, 7], [1, 1])
    assert cache.followers((5, 6, 5, 6))[0].tolist() == [7]
    assert (5, 6) in cache and (9,) not in cache
    assert len(cache.followers((1, 2))[0]) == 0


def test_nnew_counts_only_the_tail():
    cache = NgramCache()
    cache.update([1, 2, 3, 4], nnew=1, ngram_min=1, ngram_max=2)
    assert as_dict(cache) == {(3,): {4: 1}, (2, 3): {4: 1}}


def test_seeded_stress_checks_every_mutation():
    """Random updates, merges and clears, compared with dicts, invariants checked each time."""
    rng = np.random.default_rng(20261129)
    caches = [NgramCache() for _ in range(3)]
    refs = [{} for _ in range(3)]
    for _ in range(300):
        i = int(rng.integers(3))
        op = rng.random()
        if op < 0.7:
            seq = rng.integers(0, rng.integers(2, 300), size=rng.integers(0, 200)).tolist()
            nnew = int(rng.integers(0, len(seq) + 1))
            caches[i].update(seq, nnew)
            R.update(refs[i], 1, 4, seq, nnew)
        elif op < 0.95:
            j = int(rng.integers(3))
            caches[i].merge(caches[j])
            R.merge(refs[i], dict(refs[j]) if i != j else {k: dict(v) for k, v in refs[j].items()})
        else:
            caches[i].clear()
            refs[i] = {}
        caches[i].verify()
        assert len(caches[i]) == len(refs[i])
    for cache, ref in zip(caches, refs, strict=True):
        assert as_dict(cache) == {k[: 4 - k.count(-1)]: v for k, v in ref.items()}


def test_check_catches_a_missing_mark():
    """A part that reaches the marks' shares must have its home's mark:
    drafting skips the n-grams of clear marks, so a lost mark is a lost draft."""
    cache = NgramCache()
    cache.update([5, 6] * 4)
    cache.verify()
    assert cache.table.marks.any()
    cache.table.marks[:] = 0
    with pytest.raises(InternalError, match="invariant broken"):
        cache.verify()


def test_merge_into_itself_doubles_every_count():
    """A merge grows the table first. Merged into itself, a cache whose pool
    must grow but whose slots need not would read parts the pool copy moved."""
    cache = NgramCache()
    cache.table = T.new_table(slots=1 << 12, pool=64)  # many slots, a tight pool
    cache.update(np.random.default_rng(11).integers(0, 3, size=11))
    t = cache.table
    assert 4 * t.meta[T.N_NGRAMS] <= len(t.tags)  # slots do not grow
    assert t.meta[T.POOL_USED] + t.meta[T.N_ENTRIES] > len(t.tok)  # the pool does
    before = as_dict(cache)
    cache.merge(cache)
    cache.verify()
    assert as_dict(cache) == {k: {t: 2 * c for t, c in v.items()} for k, v in before.items()}


def test_merge_adds_counts_and_grows():
    a, b = NgramCache(), NgramCache()
    a.update(list(range(1000)) * 2)
    b.update(list(range(500, 1500)))
    a.merge(b)
    a.verify()
    assert a.followers((600,))[1].tolist() == [3]
    assert a.followers((1200,))[1].tolist() == [1]


def test_merge_accepts_any_cache(tmp_path):
    static = build_static([1, 2, 3, 1, 2, 4], tmp_path / "s.ngd")
    cache = NgramCache()
    cache.merge(static)
    cache.verify()
    assert as_dict(cache) == {(1, 2): {3: 1, 4: 1}, (2, 3): {1: 1}, (3, 1): {2: 1}}
    with pytest.raises(InvalidParameterError):
        cache.merge({(1,): {2: 3}})


@pytest.mark.parametrize("fmt", ["native", "llamacpp"])
def test_save_load_round_trip(tmp_path, fmt):
    rng = np.random.default_rng(7)
    cache = NgramCache()
    cache.update(rng.integers(0, 50, size=5000))
    path = tmp_path / f"dyn.{fmt}"
    cache.save(path, fmt)
    loaded = NgramCache.load(path)
    loaded.verify()
    assert as_dict(loaded) == as_dict(cache)
    assert loaded.format == fmt


def test_bad_input_is_named():
    cache = NgramCache()
    with pytest.raises(InvalidTokensError, match="dtype float64"):
        cache.update(np.array([1.0, 2.0]))
    with pytest.raises(InvalidTokensError, match=r"tokens\[1\] = -3"):
        cache.update([1, -3])
    with pytest.raises(InvalidTokensError, match="2147483648"):
        cache.update(np.array([1, 2**31], dtype=np.int64))
    with pytest.raises(InvalidTokensError, match="one-dimensional"):
        cache.update(np.zeros((2, 2), dtype=np.int32))
    with pytest.raises(InvalidParameterError, match="ngram_min"):
        cache.update([1, 2, 3], ngram_min=3, ngram_max=2)
    with pytest.raises(InvalidParameterError, match=r"ngram_max must be 1 \.\. 4"):
        cache.update([1, 2, 3], ngram_max=5)
    with pytest.raises(InvalidParameterError, match="nnew"):
        cache.update([1, 2, 3], nnew=4)
    with pytest.raises(InvalidParameterError, match="size"):
        cache.followers((1, 2, 3, 4, 5))
    with pytest.raises(InvalidParameterError, match="format"):
        cache.save("x", "yaml")
    with pytest.raises(InvalidParameterError, match="role"):
        NgramCache("static")
    assert len(cache) == 0


def test_uint_and_list_inputs_are_accepted():
    cache = NgramCache()
    cache.update(np.array([1, 2, 1, 2], dtype=np.uint16))
    cache.update([])
    assert cache.followers((1,))[1].tolist() == [2]
