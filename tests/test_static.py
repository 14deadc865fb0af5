"""StaticCache: building, opening, the constmap, round trips, memory-limited builds, merges."""

import itertools

import numpy as np
import pytest

from conftest import needs_shared
from ngramdraft import (
    NgramCache,
    StaticCache,
    build_static,
    merge_static,
    replay,
    static_from_cache,
    static_from_llamacpp,
)
from ngramdraft.build.counting import TokenTriples, plan_ranges
from ngramdraft.build.local import write_static
from ngramdraft.files.ngd.header import SECTIONS
from ngramdraft.kernels.constmap import value_of
from ngramdraft.kernels.frozen import DRAFTS, find_key_hashed, key_hash_of, may_draft
from ngramdraft.rulesets.llamacpp.step import try_static


def _rng_tokens(seed, n, vocab):
    return np.random.default_rng(seed).integers(0, vocab, size=n).astype(np.int32)


def test_absent_2grams_never_return_followers(tmp_path):
    """The constmap answers garbage for absent keys; the full-key check must catch all."""
    tokens = _rng_tokens(1, 20000, 300)
    cache = build_static(tokens, tmp_path / "s.ngd")
    present = set(map(tuple, np.stack([tokens[:-2], tokens[1:-1]], axis=1).tolist()))
    probes = _rng_tokens(2, (50000, 2), 400).reshape(-1, 2)
    for a, b in probes.tolist():
        toks, _ = cache.followers((a, b))
        assert (len(toks) > 0) == ((a, b) in present)
    assert len(cache.followers((5,))[0]) == 0  # not a 2-gram: absent, not an error


def test_constmap_flags_say_which_keys_draft(tmp_path):
    """The DRAFTS bit of every key's value is set exactly when its stats draft alone,
    and a clear bit is an exact "no static-only draft" for any probe."""
    tokens = _rng_tokens(5, 30000, 60)  # a small vocabulary: many keys pass, many fail
    cache = build_static(tokens, tmp_path / "s.ngd")
    f = cache.frozen
    flags = []
    for k, (a, b) in enumerate(f.keys.tolist()):
        h = np.uint64(key_hash_of(f, (a, b, -1, -1)))
        assert value_of(f.fuse, f.params, len(f.keys), h) & (DRAFTS - 1) == k
        flags.append(bool(may_draft(f, h)))
        assert flags[-1] == (try_static(*(int(x) for x in f.stats[k])) >= 0)
    assert 0 < sum(flags) < len(flags)
    for a, b in _rng_tokens(6, (5000, 2), 90).reshape(-1, 2).tolist():
        h = np.uint64(key_hash_of(f, (a, b, -1, -1)))
        k = find_key_hashed(f, (a, b, -1, -1), h)
        drafts = k >= 0 and try_static(*(int(x) for x in f.stats[k])) >= 0
        assert drafts <= bool(may_draft(f, h))
    assert cache.header.max_count == f.counts.max()


def test_open_reads_no_data(tmp_path):
    """Opening maps the file and parses one header: nothing else is read or copied."""
    path = tmp_path / "s.ngd"
    build_static(_rng_tokens(3, 5000, 50), path)
    cache = StaticCache.open(path)
    for arr in cache.arrays():
        assert not arr.flags.owndata and not arr.flags.writeable


def test_memory_limited_build_is_byte_identical(tmp_path):
    tokens = _rng_tokens(4, 60000, 500)
    whole = tmp_path / "whole.ngd"
    limited = tmp_path / "limited.ngd"
    write_static([TokenTriples(tokens)], whole)
    header = write_static([TokenTriples(tokens, chunk=777)], limited, memory_limit=4096)
    passes = plan_ranges(np.bincount(tokens[:-2]), 4096 // 64)
    assert len(passes) > 20  # the limit forced many passes
    assert whole.read_bytes() == limited.read_bytes()
    assert header.n_keys == len(StaticCache.open(whole))


def test_merged_shards_equal_one_build(tmp_path):
    tokens = _rng_tokens(5, 30000, 200)
    # Shards overlap by two tokens so that every 2-gram of the whole is in one shard.
    cuts = [0, 9000, 21000, len(tokens)]
    shards = []
    for i, (a, b) in enumerate(itertools.pairwise(cuts)):
        shards.append(build_static(tokens[max(0, a - 2) : b], tmp_path / f"shard{i}.ngd"))
    merged = merge_static([s.path for s in shards], tmp_path / "merged.ngd", memory_limit=2048)
    whole = build_static(tokens, tmp_path / "whole.ngd")
    for name in SECTIONS[1:]:
        assert merged.header.sections[name][2] == whole.header.sections[name][2], name
    merged.verify(deep=True)


def test_documents_kept_apart(tmp_path):
    tokens = np.array([1, 2, 3, 4, 5, 6, 7], dtype=np.int32)
    path = tmp_path / "s.ngd"
    write_static([TokenTriples(tokens, starts=[0, 3, 5])], path)
    got = {ngram: t.tolist() for ngram, t, _ in StaticCache.open(path)}
    assert got == {(1, 2): [3]}  # (4, 5) -> 6 crosses the start at 5; nothing else fits


def test_from_cache_and_back(tmp_path):
    dyn = NgramCache()
    dyn.update(_rng_tokens(6, 3000, 40))
    static = static_from_cache(dyn)
    static.verify(deep=True)
    bigrams = {ngram: (t.tolist(), c.tolist()) for ngram, t, c in dyn if len(ngram) == 2}
    assert {ngram: (t.tolist(), c.tolist()) for ngram, t, c in static} == bigrams


def test_llamacpp_round_trip(tmp_path):
    static = build_static(_rng_tokens(7, 8000, 60), tmp_path / "s.ngd")
    static.save(tmp_path / "lookup.bin", "llamacpp")
    back = static_from_llamacpp(tmp_path / "lookup.bin", tmp_path / "back.ngd")
    for name in SECTIONS[1:]:
        assert back.header.sections[name][2] == static.header.sections[name][2], name
    static.save(tmp_path / "copy.ngd")
    assert (tmp_path / "copy.ngd").read_bytes() == static.path.read_bytes()


@needs_shared
@pytest.mark.slow
def test_converted_llamacpp_static_equals_built(parity_dir, static25, tmp_path):
    converted = static_from_llamacpp(parity_dir / "llamacpp-static-25M.bin", tmp_path / "c.ngd")
    for name in SECTIONS[1:]:
        assert converted.header.sections[name][2] == static25.header.sections[name][2], name
    tokens = np.fromfile(parity_dir / "test-20k.llama3.i32", "<i4")
    a = replay(tokens, 1024, 8, static=converted, dump=True)
    b = replay(tokens, 1024, 8, static=static25, dump=True)
    assert np.array_equal(a.dump, b.dump)


@needs_shared
@pytest.mark.slow
def test_llamacpp_dynamic_file_loads(parity_dir, tmp_path):
    """The dynamic cache llama.cpp held after P3 equals ours after the same replay."""
    import reference as R

    dyn = NgramCache.load(parity_dir / "llamacpp-dynamic-P3.bin")
    dyn.verify()
    tokens = np.fromfile(parity_dir / "test-20k.llama3.i32", "<i4").tolist()
    ref = {}
    for start in range(0, len(tokens) - 512, 512):
        R.update(ref, 1, 4, tokens[start : start + 512], 512)
    as_ref = {
        (*k, *(-1,) * (4 - len(k))): dict(zip(t.tolist(), c.tolist(), strict=True))
        for k, t, c in dyn
    }
    assert as_ref == ref
    dyn.save(tmp_path / "again.bin", "llamacpp")
    assert NgramCache.load(tmp_path / "again.bin").arrays()[0].tolist() == dyn.arrays()[0].tolist()


def test_tokens_beyond_packing_range_are_refused(tmp_path):
    from ngramdraft import InvalidTokensError

    with pytest.raises(InvalidTokensError, match="ids up to 2097151"):
        build_static([1, 2, 2**21], tmp_path / "s.ngd")
    assert not (tmp_path / "s.ngd").exists()


def test_merge_keeps_the_tokenizer_of_any_input(tmp_path):
    """An input without a recorded tokenizer may come first; the merge still records it."""
    meta = {"tokenizer": {"name": "llama3", "fingerprint": "abc"}}
    plain = tmp_path / "plain.ngd"
    named = tmp_path / "named.ngd"
    write_static([TokenTriples(_rng_tokens(8, 500, 20))], plain)
    write_static([TokenTriples(_rng_tokens(9, 500, 20))], named, meta=meta)
    merged = merge_static([plain, named], tmp_path / "m.ngd")
    assert merged.meta["tokenizer"] == meta["tokenizer"]
