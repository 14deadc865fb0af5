"""Opt-in policies: adaptive draft length and auto-off (the default stays llama.cpp's rules)."""

import itertools
from dataclasses import dataclass, field

import numpy as np
import pytest

from ngramdraft import AdaptiveLength, CostAwareLength, Drafter, InvalidParameterError
from ngramdraft.build.suffixes import build_suffix_corpus
from ngramdraft.drafting.policy import (
    IN_STEP,
    JUMPED,
    LONG_RUN,
    MISSED,
    REJECTED,
    WHOLE,
    HearsAgreement,
    Learns,
)
from ngramdraft.rulesets.suffix.drafter import PROVEN_RUN

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


def test_cost_aware_submits_whole_drafts_when_passes_cost_the_same():
    plain = Drafter(n_draft=6)
    flat = Drafter(n_draft=6, policy=CostAwareLength([1.0] * 7))
    rng = np.random.default_rng(3)
    seq = [int(t) for t in rng.integers(0, 5, 60)]
    for d in (plain, flat):
        d.start(seq[:10])
    for t in seq[10:]:
        assert flat.draft().tolist() == plain.draft().tolist()
        flat.accept([t])
        plain.accept([t])


def _trusting_copies(costs, n_draft):
    """A policy that has seen copies of ``n_draft`` tokens hold, the last one submitted
    too: it sends the next out whole."""
    policy = CostAwareLength(costs)
    policy.start(n_draft)
    for _ in range(40):
        _settle(policy, n_draft, n_draft, WHOLE)
    policy.observe(n_draft, n_draft)
    assert policy.length_of(n_draft) == n_draft
    return policy


def _settle(policy, full, matched, condition=REJECTED):
    """A whole draft of ``full`` tokens made in ``condition``, told at once: its first
    ``matched`` right."""
    policy.learn(full, 0, matched, matched < full, condition)


def test_cost_aware_cuts_drafts_that_fail_and_restores_them_when_they_hold():
    policy = CostAwareLength([1, 1.5, 2, 2.5, 3, 3.5, 4])
    policy.start(6)
    for _ in range(40):
        _settle(policy, 6, 0)  # six-token drafts, wrong from their first token
    assert policy.length_of(6) == 0
    for _ in range(40):
        _settle(policy, 6, 6)  # right whole, submitted or not
    assert policy.length_of(6) == 6
    for _ in range(40):
        _settle(policy, 6, 2)  # right for two tokens: a pass of 3 is the cheapest per token
    assert policy.length_of(6) == 2


def test_a_draft_after_one_accepted_whole_is_trusted_apart_from_one_after_a_rejection():
    """A copy the model makes goes on and one it left stays left: on a trained model's own
    answers, drafts made after one accepted whole hold far more often than drafts made
    after a rejection. Counted by draft length, both went out at one length (0 here);
    counted by condition, each gets its own."""
    policy = CostAwareLength([1, 1.5, 2, 2.5, 3, 3.5, 4])
    policy.start(6)
    assert policy.condition == REJECTED  # a sequence starts with nothing accepted
    for _ in range(40):
        _settle(policy, 6, 6, WHOLE)
        _settle(policy, 6, 0, REJECTED)
    policy.observe(6, 6)
    assert policy.condition == WHOLE and policy.length_of(6) == 6
    policy.observe(6, 2)
    assert policy.condition == REJECTED and policy.length_of(6) == 0
    policy.observe(0, 0)  # nothing submitted: nothing seen, the condition stays
    assert policy.condition == REJECTED


def test_after_drafts_accepted_whole_a_long_copy_goes_out_whole():
    """On a CPU a long pass costs less per token than a short one, so a copy that holds
    should go out whole. A prior of one half, never outweighed by the decayed counts
    (about 33 drafts), priced each token of such a copy 1.5% short of right, and cut
    32-token drafts that held in two passes (replayed over a trained model's edits: 128
    passes where the drafts whole made 60). After a whole draft the prior is now the
    rate over every place in the draft."""
    policy = CostAwareLength([1 + 0.42 * k for k in range(33)])
    policy.start(32)
    for _ in range(60):
        _settle(policy, 32, 32, WHOLE)
        _settle(policy, 32, 0, REJECTED)
    policy.observe(32, 32)
    assert policy.condition == WHOLE and policy.length_of(32) == 32  # before: 11
    policy.observe(32, 0)
    assert policy.length_of(32) == 0


class _Conditions(CostAwareLength):
    """Submits whole drafts (flat costs) and records the news of each, with its condition."""

    def learn(self, full, start, right, wrong, condition):
        super().learn(full, start, right, wrong, condition)
        self.heard = [*getattr(self, "heard", []), (start, right, wrong, condition)]


def test_each_drafts_news_comes_with_the_condition_it_was_made_in():
    drafter = Drafter(n_draft=6, policy=_Conditions([1.0] * 7))
    drafter.start(LOOP)
    assert drafter.draft().tolist() == [1, 2, 3, 4, 5, 6]  # made with nothing accepted yet
    drafter.accept([1, 2, 3, 4, 5, 6, 7])  # accepted whole
    assert drafter.draft().tolist() == [8, 9, 10, 1, 2, 3]  # made after a whole acceptance
    drafter.accept([99])
    assert drafter._policy.heard == [(0, 6, False, REJECTED), (0, 0, True, WHOLE)]


def test_drafts_from_a_jump_or_after_a_miss_are_trusted_apart_from_those_in_step():
    """Drafts from a copy in step, from a fresh jump and from a copy that has just missed
    hold at different rates (after a rejection on a trained model's edits, a jump's draft
    held whole 71% of the time, a missed copy's 7%): counted apart, each gets its own
    length (replayed: the suffix rules' edits +4-6%, docs/policies.md)."""
    policy = CostAwareLength([1, 1.5, 2, 2.5, 3, 3.5, 4])
    policy.start(6)
    for _ in range(40):
        _settle(policy, 6, 3, REJECTED + 2 * IN_STEP)
        _settle(policy, 6, 2, REJECTED + 2 * JUMPED)
        _settle(policy, 6, 0, REJECTED + 2 * MISSED)
        _settle(policy, 6, 6, REJECTED + 2 * LONG_RUN)
    lengths = []
    for origin in (IN_STEP, JUMPED, MISSED, LONG_RUN):
        policy.drafting_from(origin)
        assert policy.condition == REJECTED + 2 * origin
        lengths.append(policy.length_of(6))
    assert lengths[MISSED] == 0 < lengths[JUMPED] < lengths[IN_STEP] < lengths[LONG_RUN]
    with pytest.raises(InvalidParameterError, match="origin"):
        policy.drafting_from(LONG_RUN + 1)


class _Origins(CostAwareLength):
    """Records where each draft was said to come from."""

    def drafting_from(self, origin):
        super().drafting_from(origin)
        self.origins = [*getattr(self, "origins", []), origin]


def test_the_suffix_rules_tell_a_policy_where_each_draft_comes_from():
    drafter = Drafter(rules="suffix", n_draft=4, policy=_Origins([1.0] * 5))
    drafter.start([5, 6, 7, 8, 9, 10, 11, 12, 13, 5, 6])
    assert drafter.draft().tolist() == [7, 8, 9, 10]  # a jump to the prompt's 5, 6
    drafter.accept([7, 8, 9, 10, 11])  # it held: the copy is in step
    assert drafter.draft().tolist() == [12, 13, 5, 6]
    drafter.accept([12, 99])  # the copy missed the model's 99
    drafter.draft()
    assert drafter._policy.origins == [JUMPED, IN_STEP, MISSED]


def test_a_copy_whose_source_agreed_on_a_long_run_drafts_as_long_run():
    """Once a copy's source has agreed on PROVEN_RUN tokens its drafts are counted apart
    (a model that has followed a source this far goes on following it)."""
    run = list(range(100, 100 + 2 * PROVEN_RUN))
    drafter = Drafter(rules="suffix", n_draft=4, policy=_Origins([1.0] * 5))
    drafter.start([*run, 7, *run[:4]])  # the run again: a jump to its start
    for i in range(4, PROVEN_RUN + 8):
        drafter.draft()
        drafter.accept([run[i]])
    origins = drafter._policy.origins
    assert origins[0] == JUMPED and set(origins[1:PROVEN_RUN]) == {IN_STEP}
    assert set(origins[PROVEN_RUN:]) == {LONG_RUN}


class _Agreed(CostAwareLength):
    """Records how long each copy's source was said to have agreed."""

    def copy_agreed(self, tokens):
        super().copy_agreed(tokens)
        self.agreed = [*getattr(self, "agreed", []), tokens]


def test_a_policy_of_ones_own_that_learns_needs_no_more_than_learns_asks():
    """Each optional protocol is its own: a policy that learns is told what became of its
    drafts whether or not it hears how long a copy has held (copy_agreed once slipped
    into Learns, and such a policy would have learned nothing)."""

    class Mine:
        condition = 0

        def start(self, n_draft):
            self.heard = []

        def length_of(self, full):
            return full

        def observe(self, submitted, accepted):
            pass

        def learn(self, full, start, right, wrong, condition):
            self.heard.append((start, right, wrong))

    assert isinstance(Mine(), Learns) and not isinstance(Mine(), HearsAgreement)
    drafter = Drafter(rules="suffix", n_draft=4, policy=Mine())
    drafter.start([5, 6, 7, 8, 9, 10, 5, 6])
    assert drafter.draft().tolist() == [7, 8, 9, 10]
    drafter.accept([7, 99])
    assert drafter._policy.heard == [(0, 1, True)]


def test_the_suffix_rules_tell_a_policy_how_long_a_copys_source_has_agreed():
    run = list(range(100, 140))
    drafter = Drafter(rules="suffix", n_draft=4, policy=_Agreed([1.0] * 5))
    drafter.start([*run, 7, *run[:4]])  # the run again: a jump to its start
    for i in range(4, 12):
        drafter.draft()
        drafter.accept([run[i]])
    drafter.draft()
    drafter.accept([99])  # the copy misses: agreement is counted since the source was set
    drafter.draft()
    assert drafter._policy.agreed == [0, 1, 2, 3, 4, 5, 6, 7, 8, 8]


def test_a_corpus_continuation_is_not_told_as_a_copy(tmp_path):
    corpus = build_suffix_corpus([5, 6, 7, 8, 9] * 20, tmp_path / "c.ngd")
    drafter = Drafter(rules="suffix", static=corpus, n_draft=4, policy=_Agreed([1.0] * 5))
    drafter.start([1, 2, 5, 6])  # nothing to copy in the sequence: the corpus drafts
    assert drafter.draft().tolist() == [7, 8, 9, 5]
    assert getattr(drafter._policy, "agreed", []) == []


def test_a_copy_is_trusted_for_about_as_long_again_as_it_has_held():
    """A session's first answer on the 0.5B copied runs of 5 to 30 tokens from its file:
    after three tokens of a fresh copy held, a policy that had learned on an edit's long
    copies submitted 63 more, which failed at their 5th to 8th (docs/policies.md). Past
    twice what the source has agreed on, a copy's tokens are priced as unlikely: cut
    there where a longer pass costs more, whole where passes cost alike."""
    cpu = [1 + 0.4 * k for k in range(65)]
    for costs, short, long in ((cpu, 8, 64), ([1.0] * 65, 64, 64)):
        policy = _trusting_copies(costs, 64)
        policy.copy_agreed(4)
        assert policy.length_of(64) == short
        policy.copy_agreed(0)  # a match just found: TRUSTED_LEAST
        assert policy.length_of(64) == min(short, 4 if costs is cpu else 64)
        policy.copy_agreed(40)
        assert policy.length_of(64) == long
        assert policy.length_of(64) == 64  # told for one draft alone
    with pytest.raises(InvalidParameterError, match="tokens"):
        policy.copy_agreed(-1)


def test_a_short_copy_after_long_ones_goes_out_short_on_a_cpu():
    """Through the drafter: a copy that ran whole teaches the policy to trust copies; the
    next one, a few tokens into a fresh source, goes out twice that long, not 54."""
    cpu = CostAwareLength([1 + 0.4 * k for k in range(65)])
    drafter = Drafter(rules="suffix", n_draft=64, policy=cpu)
    passage = list(range(1000, 1300))
    drafter.start([*passage, 7, *passage[:2]])
    _write(drafter, passage[2:])  # a long copy, drafted and accepted whole
    drafter.finish()
    fresh = list(range(2000, 2100))
    drafter.start([*fresh, 7, *fresh[:2]])
    jump = drafter.draft().tolist()  # a fresh match: TRUSTED_LEAST at most
    assert 0 < len(jump) <= 4
    drafter.accept([*jump, fresh[2 + len(jump)]])  # accepted whole, and the model's token
    assert 0 < len(drafter.draft()) <= 2 * (len(jump) + 1)  # before: 54


def test_llama_cpps_rules_draft_in_step_for_a_policy():
    """llama.cpp's rules have no copy to be in or out of step: their policy's conditions
    are the two they always were."""
    drafter = Drafter(n_draft=6, policy=_Origins([1.0] * 7))
    drafter.start(LOOP)
    drafter.draft()
    drafter.accept([1, 99])
    drafter.draft()
    assert drafter._policy.origins == [IN_STEP, IN_STEP]


def test_drafts_stop_going_out_whole_once_a_repeated_passage_ends():
    """Heard only once settled, the drafts made along a passage the model repeats went on
    arriving, right, for a draft's length after the passage ended: on a trained model's
    open answers the suffix rules' 32-token drafts then went out whole again and again,
    each failing at its first token. A draft's first token is now heard a step later."""
    rng = np.random.default_rng(0)
    passage = rng.integers(0, 50, 200).tolist()
    shuffled = [passage[int(i)] for i in rng.integers(0, 200, 200)]  # its tokens, no order
    text = passage + passage + shuffled
    drafter = Drafter(
        rules="suffix", n_draft=32, policy=CostAwareLength([1 + 0.4 * k for k in range(33)])
    )
    drafter.start(text[:201])
    p, failed = 201, []
    while p < len(text):
        draft = drafter.draft().tolist()
        right = 0
        while right < len(draft) and p + right < len(text) and draft[right] == text[p + right]:
            right += 1
        if p >= 400 and draft and right == 0:
            failed.append(len(draft))
        drafter.accept(text[p : p + right + 1])
        p += right + 1
    assert failed.count(32) == 0  # before: six whole drafts in a row, each wrong at once
    assert sum(failed) < 100  # before: 195 tokens submitted in drafts wrong at once


class _Recording(CostAwareLength):
    """Submits nothing and records what it learns."""

    def length_of(self, full):
        self.drafts = [*getattr(self, "drafts", []), full]
        return 0

    def learn(self, full, start, right, wrong, condition):
        self.learned = [*getattr(self, "learned", []), (full, start, right, wrong)]

    def settled(self):
        return [t for t in getattr(self, "learned", []) if t[3] or t[2] == t[0]]


def test_drafts_not_submitted_still_teach_a_learning_policy():
    drafter = Drafter(n_draft=6, policy=_Recording([1.0] * 7))
    drafter.start(LOOP)  # ... 9, 10: the loop drafts 1, 2, 3, 4, 5, 6
    assert drafter.draft().tolist() == []
    for token in [1, 2, 3]:
        drafter.accept([token])
        drafter.draft()
    drafter.accept([99])  # the draft made after 1, 2, 3 (4, 5, 6, 7, 8, 9) is wrong at once
    learned = drafter._policy.learned
    # The first draft, told token by token: 1, then 2, then 3 right, then 4 against 99.
    assert learned[0] == (6, 0, 1, False) and (6, 2, 3, False) in learned
    # Settled: the first draft (1 2 3 right, then 4 against 99) and the draft
    # after "3" (wrong at its first token), among the four.
    assert (6, 3, 3, True) in learned and (6, 0, 0, True) in learned
    for token in [4, 5, 6, 7, 8, 9]:
        drafter.accept([token])
    assert len(drafter._policy.settled()) == len(drafter._policy.drafts) == 4


def test_cost_aware_settings_are_named():
    for bad in ([], [1.0], [1.0, -2.0], [1.0, float("nan")]):
        with pytest.raises(InvalidParameterError, match="pass_cost"):
            CostAwareLength(bad)
    with pytest.raises(InvalidParameterError, match="decay"):
        CostAwareLength([1, 2], decay=0)
    with pytest.raises(InvalidParameterError, match="n_draft=8"):
        Drafter(n_draft=8, policy=CostAwareLength([1, 2, 3])).start([1, 2])
    Drafter(n_draft=8, policy=CostAwareLength()).start([1, 2])  # costs to learn: any n_draft


def test_a_rewind_drops_the_drafts_a_policy_waits_on():
    drafter = Drafter(n_draft=6, policy=_Recording([1.0] * 7))
    drafter.start(LOOP)
    drafter.draft()  # made at the end of LOOP: 1 2 3 4 5 6
    drafter.accept([1, 2])
    drafter.rewind(2)  # the engine rolls back: the draft's position is gone
    drafter.accept([7, 7, 7, 7, 7, 7, 7])
    # Told that 1 and 2 came, as they did; never measured against the 7s after the rewind.
    assert drafter._policy.learned == [(6, 0, 2, False)]


def test_drafting_without_accepting_keeps_a_bounded_queue():
    drafter = Drafter(n_draft=6, policy=_Recording([1.0] * 7))
    drafter.start(LOOP)
    for _ in range(500):
        drafter.draft()
    assert len(drafter._submitting._shadows) == 64


def _learned(costs, passes=3):
    """A CostAwareLength that learned ``costs`` ({pass size: seconds}) from timed passes."""
    policy = CostAwareLength()
    policy.start(6)
    for _ in range(passes):
        for k, seconds in costs.items():
            policy.observe_pass(k, seconds)
    return policy


def test_costs_learned_from_the_engines_passes_cut_drafts_as_given_costs_do():
    linear = {k: 0.01 * (1 + 0.5 * (k - 1)) for k in range(1, 8)}
    given = CostAwareLength([linear[k] for k in range(1, 8)])
    given.start(6)
    learned = _learned({1: linear[1], 4: linear[4], 7: linear[7]})  # the rest interpolated
    for matched in (0, 2, 6, 1):
        for policy in (given, learned):
            for _ in range(10):
                _settle(policy, 6, matched)
        assert learned.length_of(6) == given.length_of(6)


def test_until_a_size_is_timed_passes_cost_alike_and_never_less_than_shorter_ones():
    fresh = CostAwareLength()
    fresh.start(6)
    for _ in range(10):
        _settle(fresh, 6, 1)  # right for one token of six
    assert fresh.length_of(6) == 6  # nothing timed: every size costs the same
    # A "pass" timed with a pause of the caller's in it costs more than a longer one:
    # it counts as the longer one's cost, so that drafting is not thought dear.
    paused = _learned({1: 3.0, 7: 0.4})
    for _ in range(10):
        _settle(paused, 6, 6)
    assert paused.length_of(6) == 6
    paused.observe_pass(3, 0.0)  # a pass of no time is not learned from
    assert paused.length_of(6) == 6


def test_passes_timed_before_the_first_sequence_are_learned_and_only_the_drafters_own():
    """An engine times its passes at load, before any sequence: the policy once dropped
    those timings (it knew no sizes before start), and went on drafting as if every
    pass cost the same."""
    drafter = Drafter(n_draft=6, policy=CostAwareLength())
    assert drafter.learns_pass_costs
    for _ in range(3):
        drafter.observe_pass(1, 0.01)
        drafter.observe_pass(7, 0.07)
        drafter.observe_pass(99, 0.01)  # not a pass of this drafter's: ignored
    drafter.start([1, 2, 3])
    assert sorted(drafter.policy._timed) == [1, 7]
    assert drafter.policy._costs()[-1] == pytest.approx(7.0)
    assert not Drafter(policy=CostAwareLength([1.0] * 9)).learns_pass_costs  # costs given
    assert not Drafter(policy=AdaptiveLength()).learns_pass_costs


def test_one_slow_pass_does_not_lock_its_size_out():
    """A pass slowed by another process (or the engine's first allocation for its size)
    once made the policy think the size dear, stop submitting it, and never time it again:
    under load the suffix rules' adapter accepted nothing in 640 tokens."""
    policy = _learned({1: 0.01}, passes=9)
    for _ in range(10):
        _settle(policy, 6, 6)  # whole drafts hold
    policy.observe_pass(7, 5.0)  # one pass over 7 tokens, preempted
    assert policy.length_of(6) == 6  # not believed: tried again
    for _ in range(2):
        policy.observe_pass(7, 0.012)
    assert policy.length_of(6) == 6  # now timed enough, at its fastest
    # A size truly dear, timed so enough times, is cut where its drafts fail.
    learned = _learned({1: 0.01, 7: 0.06}, passes=3)
    for _ in range(10):
        _settle(learned, 6, 1)
    assert learned.length_of(6) < 6


def test_a_size_timed_dearer_than_as_many_one_token_passes_is_tried_again():
    """Three passes of a size slowed together (a busy spell of the machine) made it dear
    for good: the policy stopped submitting it and so never timed it again. A pass over k
    tokens costs about k passes over one at most, so far dearer timings are not believed."""
    policy = _learned({1: 0.01}, passes=9)
    for _ in range(10):
        _settle(policy, 6, 6)  # whole drafts hold
    for _ in range(3):
        policy.observe_pass(7, 5.0)  # every pass over 7 tokens preempted: 500 one-token passes
    assert policy.length_of(6) == 6  # not believed: tried again
    for _ in range(3):
        policy.observe_pass(7, 0.012)  # the machine quiet again
    assert policy.length_of(6) == 6 and policy._costs()[6] == pytest.approx(1.2)
    dear = _learned({1: 0.01, 7: 0.14}, passes=3)  # twice seven passes: believed
    for _ in range(10):
        _settle(dear, 6, 3)
    assert dear.length_of(6) < 6


def test_a_spell_of_slow_passes_does_not_make_a_size_look_dearer_than_its_fastest():
    """Each size's cost was the fastest of its last nine passes. On a busy machine the
    sizes in use were timed slow for a spell while the sizes timed at load kept their
    quiet timings, so the policy wandered to those: the 0.5B's edits through the engine
    went out as runs of 15- and 7-token drafts, each accepted whole, where 31 paid
    (100-161 passes against 95; docs/policies.md)."""
    policy = _learned({1: 0.01, 4: 0.02, 7: 0.028}, passes=3)  # timed at load, quiet
    for _ in range(10):
        _settle(policy, 6, 6)  # whole drafts hold
    assert policy.length_of(6) == 6
    for _ in range(9):
        policy.observe_pass(7, 0.07)  # a busy spell: nine passes over 7 tokens, slow
    assert policy._costs()[6] == pytest.approx(2.8)  # still its fastest
    assert policy.length_of(6) == 6


def test_the_pass_clock_times_one_pass_between_calls_and_nothing_else():
    from ngramdraft.integrations.core import PassClock

    passes, clock = [], PassClock()

    def observe_pass(n_tokens, seconds):
        passes.append(n_tokens)

    clock.called(observe_pass, None)  # a new sequence: the prompt's pass, not timed
    clock.returned(4)
    clock.called(observe_pass, 3)  # 2 drafted tokens accepted and the model's own: a pass of 5
    clock.returned(0)
    clock.called(observe_pass, 1)  # no draft: a pass over one token
    clock.returned(2)
    clock.called(observe_pass, 40)  # a new turn of a conversation, prompt and all: not a pass
    assert passes == [5, 1]


# A pass's cost relative to one token's, passes over 1 .. 33 tokens: Qwen2.5-Coder-0.5B
# (Q4_K_M) on llama-cpp-python, 2 threads (real_model/2026-12-04-083300). A staircase:
# a pass over 2m tokens costs about what one over 2m - 1 does.
STAIRCASE = [
    1.0, 1.9, 2.9, 2.8, 3.7, 3.6, 4.5, 4.7, 5.5, 5.7, 6.6, 6.3, 7.7, 7.1, 8.0, 7.9, 9.2,
    9.0, 10.1, 9.8, 10.6, 10.4, 11.5, 11.2, 12.2, 12.0, 12.9, 12.8, 13.5, 13.5, 14.6, 14.1, 15.4,
]  # fmt: skip


def test_the_passes_timed_at_load_leave_no_size_of_a_staircase_looking_dearer_than_it_is():
    """Timed at 1, 3, 5, 9, 17, 33 tokens (a step's upper side), the cheap sizes between
    were interpolated dearer than they are (a pass over 4 tokens 3.3x one, not 2.8x), and a
    size thought dear is never submitted, so never timed: replayed over the model's own
    answers, the suffix rules lost up to 10% to the costs given."""
    from ngramdraft.integrations.llama_cpp import sizes_timed_at_load

    policy = CostAwareLength()
    policy.start(32)
    for k in sizes_timed_at_load(32):
        for _ in range(3):
            policy.observe_pass(k, 0.02 * STAIRCASE[k - 1])
    learned = policy._costs()
    assert np.all(learned <= 1.05 * np.minimum.accumulate(np.array(STAIRCASE)[::-1])[::-1])


def _lines(names, verb):
    """Lines ``50 verb name 52`` (as `from .types import X`), one per name."""
    return [t for name in names for t in (50, verb, name, 52)]


def _write(drafter, text):
    """The model writes ``text`` greedily: each draft checked against it, as an engine does."""
    pos = 0
    while pos < len(text):
        draft = drafter.draft().tolist()
        n = 0
        while n < len(draft) and pos + n < len(text) and draft[n] == text[pos + n]:
            n += 1
        drafter.accept(text[pos : pos + n + 1])
        pos += n + 1


@dataclass
class _Told(CostAwareLength):
    """CostAwareLength, recording where it was told each draft offers a refused token."""

    told: list = field(default_factory=list)

    def refused_at(self, index):
        self.told.append(index)
        super().refused_at(index)


def test_a_policy_is_told_where_a_draft_offers_a_token_the_model_refused_twice_there():
    """A small model restated `from .types import X` as `from .types.X` line after line:
    each copy of the source went out past the place the model leaves it, a pass over the
    whole draft for the few tokens before it (real edits, docs/policies.md)."""
    drafter = Drafter(n_draft=8, policy=_Told([1.0] * 9))  # passes alike: drafts go whole
    names = list(range(100, 130))
    drafter.start([7, 8, 9, *_lines(names, 51), 7, 8, 9])
    refusals = told = 0
    for line in _lines(names, 60):  # the model writes 60 where the source has 51
        draft = [int(drafter.tokens[-1]), *drafter.draft().tolist()]
        new = drafter.policy.told[told:]
        told += len(new)
        at = [i for i, pair in enumerate(itertools.pairwise(draft)) if pair == (50, 51)]
        assert new == (at[:1] if refusals >= 2 else [])
        drafter.accept([line])
        refusals += line == 60  # where the drafts offered 51
    assert told > 20

    # The model takes the token there again: the refusal is forgotten.
    for line in _lines(names[:2], 51):
        drafter.draft()
        drafter.accept([line])
    drafter.draft()
    assert (50 << 32 | 51) not in drafter._submitting._refused


def test_a_refused_token_cuts_a_draft_where_passes_cost_more_and_not_where_they_do_not():
    for costs, cut in (([1.0 + 0.25 * k for k in range(9)], 3), ([1.0] * 9, 8)):
        policy = _trusting_copies(costs, 8)
        policy.refused_at(3)
        assert policy.length_of(8) == cut
        assert policy.length_of(8) == 8  # told for one draft alone


def test_refusals_are_the_sequences_own_and_bounded():
    drafter = Drafter(n_draft=8, policy=CostAwareLength([1.0] * 9))
    names = list(range(100, 130))
    drafter.start(_lines(names, 51))
    _write(drafter, _lines(names, 60))
    assert drafter._submitting._refused
    drafter.finish()
    drafter.start(_lines(names, 51))  # a new sequence: what the last one refused is not known
    assert not drafter._submitting._refused
    _write(drafter, _lines(names, 60))
    drafter.rewind(4)  # the engine rolls back: so do the refusals, as the drafts
    assert not drafter._submitting._refused
    for pair in range(2000):
        drafter._submitting._refuse(pair, 0)
    refused = drafter._submitting._refused
    assert len(refused) == 1024 and 1999 in refused and 0 not in refused
    plain = Drafter(n_draft=8)  # no policy: llama.cpp's drafts, nothing kept
    plain.start(_lines(names, 51))
    _write(plain, _lines(names, 60))
    assert plain._submitting is None


def test_every_draft_ages_every_conditions_counts():
    """A server's policy goes from one request to the next: a condition the new text no
    longer reaches (a copy holding whole, on an edit) must not keep its old rates (on
    records the suffix rules then submitted 1,653 tokens, 590 accepted: 0.88x of plain
    llama-server; aged by every draft, 1.00x replayed, docs/policies.md)."""
    policy = CostAwareLength([1, 1.5, 2, 2.5, 3, 3.5, 4])
    policy.start(6)
    copying = WHOLE + 2 * IN_STEP
    for _ in range(40):
        _settle(policy, 6, 6, copying)  # an edit: copies hold whole
    held = policy._known[copying].sum()
    for _ in range(200):
        _settle(policy, 6, 0, REJECTED + 2 * JUMPED)  # the next text: every draft fails
    assert policy._known[copying].sum() < 0.01 * held
