"""The reference behaviours that look like bugs but are llama.cpp's rules."""

import numpy as np

import reference as R
from ngramdraft import Drafter, NgramCache, build_static
from ngramdraft.files import llamacpp


def test_int32_overflow_of_weighted_counts(tmp_path):
    """count * 100 * static count wraps in int32, and the wrapped score decides.

    Dynamic part of (1, 2): {5: 3, 6: 9}; static part: {5: 10_000_000, 6: 1}.
    Follower 5 scores 3 * 1e9 = 3e9, which wraps to a negative int32, so 6
    (score 900, 9 of 12 samples = 75%) is drafted. With exact arithmetic 5
    would win the scan, fail the 75% threshold with 3 of 12, and the static
    cache alone would then draft 5.
    """
    dynamic = NgramCache()
    dynamic.update([1, 2, 5] * 3 + [1, 2, 6] * 9, ngram_min=2, ngram_max=2)
    keys = np.array([[1, 2]], dtype=np.int32)
    lookup = tmp_path / "static.bin"
    llamacpp.write(
        lookup,
        keys,
        np.array([0, 2]),
        np.array([5, 6], np.int32),
        np.array([10_000_000, 1], np.int32),
    )
    drafter = Drafter(static=lookup, dynamic=dynamic, n_draft=1, ngram_min=2, ngram_max=2)
    drafter.start([7, 1, 2])
    ref_static = {(1, 2, -1, -1): {5: 10_000_000, 6: 1}}
    ref_dyn = {(1, 2, -1, -1): {5: 3, 6: 9}}
    assert drafter.draft().tolist() == R.draft([7, 1, 2], 1, 2, 2, {}, ref_dyn, ref_static) == [6]
    assert R.wrap32(3 * 100 * 10_000_000) < 0


def test_ngram_min_shifts_the_threshold_index():
    """With ngram_min=2 the 2-gram uses thresholds entry 0 (66%), not entry 1 (50%)."""
    prompt = [10, 11, 20, 10, 11, 21, 10, 11]  # 2-gram (10, 11) -> {20: 1, 21: 1}
    by_size = Drafter(n_draft=1, ngram_min=1, ngram_max=4)
    by_size.start(prompt)
    assert by_size.draft().tolist() == [20]  # 50% passes; the tie goes to the smaller id
    quirk = Drafter(n_draft=1, ngram_min=2, ngram_max=4)
    quirk.start(prompt)
    assert quirk.draft().tolist() == []  # 50% < 66%


def test_ngrams_reaching_before_the_sequence_are_absent():
    """After 2 tokens, 3- and 4-grams would start before seq[0]: llama.cpp reads out of
    bounds there; they are absent, while the n-grams that fit still draft."""
    dynamic = NgramCache()
    dynamic.update([3, 4, 9] * 4)
    drafter = Drafter(dynamic=dynamic, n_draft=4)
    drafter.start([3, 4])
    ref_dyn = {}
    R.update(ref_dyn, 1, 4, [3, 4, 9] * 4, 12)
    expected = R.draft([3, 4], 4, 1, 4, {}, ref_dyn, {})
    assert drafter.draft().tolist() == expected == [9, 3, 4, 9]
    one = Drafter(dynamic=dynamic, n_draft=4)
    one.start([3])
    assert one.draft().tolist() == []  # fewer than NGRAM_STATIC tokens: nothing


def test_static_alone_needs_two_samples(tmp_path):
    """The static-only fallback drafts with >= 2 samples and >= 50%, else drafting stops."""
    static = build_static([1, 2, 3, 8, 1, 2, 3], tmp_path / "s.ngd")
    drafter = Drafter(static=static, n_draft=4)
    drafter.start([9, 1, 2])
    assert drafter.draft().tolist() == [3]  # (1, 2) -> {3: 2}; then (2, 3) -> {8: 1} stops


def test_lone_follower_can_lose_to_wrap_around(tmp_path):
    """A part's only follower is skipped when count * weight wraps negative.

    Context (1, 2) -> {5: 3}; static (1, 2) -> {5: 1e7, 6: 1e7, 7: 1}: 5 scores
    3 * 1e9, negative in int32, so the context drafts nothing; the static part
    alone has no majority (1e7 of 2e7 + 1), so no token is drafted at all.
    Without the wrap, 5 would be drafted from the context.
    """
    lookup = tmp_path / "static.bin"
    llamacpp.write(
        lookup,
        np.array([[1, 2]], np.int32),
        np.array([0, 3]),
        np.array([5, 6, 7], np.int32),
        np.array([10_000_000, 10_000_000, 1], np.int32),
    )
    prompt = [1, 2, 5] * 3 + [1, 2]
    drafter = Drafter(static=lookup, n_draft=1, ngram_min=2, ngram_max=2)
    drafter.start(prompt)
    context = {}
    R.update(context, 1, 4, prompt, len(prompt))
    ref_static = {(1, 2, -1, -1): {5: 10_000_000, 6: 10_000_000, 7: 1}}
    assert drafter.draft().tolist() == R.draft(prompt, 1, 2, 2, context, {}, ref_static) == []
    shorter = [1, 2, 5] * 2 + [1, 2]  # count 2: 2e9 still fits, 5 is drafted
    drafter.start(shorter)
    assert drafter.draft().tolist() == [5]
