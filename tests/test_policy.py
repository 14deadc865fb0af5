"""Opt-in policies: adaptive draft length and auto-off (the default stays llama.cpp's rules)."""

import numpy as np
import pytest

from ngramdraft import AdaptiveLength, Drafter, InvalidParameterError

LOOP = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] * 8


def test_without_a_policy_drafts_are_llama_cpps():
    plain, adaptive = Drafter(n_draft=6), Drafter(n_draft=6, policy=AdaptiveLength())
    for d in (plain, adaptive):
        d.start(LOOP)
    assert adaptive.draft().tolist() == plain.draft().tolist() == [1, 2, 3, 4, 5, 6]


def test_rejections_shorten_drafts_and_acceptance_lengthens_them():
    drafter = Drafter(n_draft=6, policy=AdaptiveLength(window=100))
    drafter.start(LOOP)
    lengths = []
    for _ in range(4):  # the model disagrees at once: 6, 5, 4, 3
        lengths.append(len(drafter.draft()))
        drafter.accept([99])
        drafter.accept(LOOP[:10])  # back on the loop (no draft pending: not observed)
    assert lengths == [6, 5, 4, 3]
    draft = drafter.draft()
    drafter.accept([*draft.tolist(), int(draft[-1]) % 10 + 1])  # accepted whole: +2
    assert len(drafter.draft()) == 4


def test_little_acceptance_pauses_drafting_then_retries():
    policy = AdaptiveLength(window=4, off_below=0.5, retry_after=5)
    drafter = Drafter(n_draft=4, policy=policy)
    drafter.start(LOOP)
    for _ in range(4):
        assert len(drafter.draft()) > 0
        drafter.accept([77])  # rejected
        drafter.accept(LOOP[:10])
    paused = [len(drafter.draft()) for _ in range(5)]
    assert paused == [0] * 5
    assert len(drafter.draft()) > 0  # the retry


def test_each_drafter_keeps_its_own_copy_and_bad_settings_are_named():
    policy = AdaptiveLength()
    a, b = Drafter(policy=policy), Drafter(policy=policy)
    assert a._policy is not b._policy and a._policy is not policy
    for bad in ({"n_min": 0}, {"window": 1.5}, {"off_below": 2.0}, {"retry_after": -1}):
        with pytest.raises(InvalidParameterError):
            AdaptiveLength(**bad)


def test_a_policy_is_followed_through_sync():
    drafter = Drafter(n_draft=6, policy=AdaptiveLength(window=100))
    seq = np.array(LOOP)
    drafter.sync(seq)
    assert len(drafter.draft()) == 6
    drafter.sync(np.append(seq, 42))  # the engine's next sequence: a rejection
    assert drafter._policy.length == 5
