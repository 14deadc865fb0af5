"""What a drafter with a policy keeps to run it: :class:`Submitting`.

A policy (``policy.py``) decides how much of each whole draft to submit and
learns from what became of it. To do so it must be told, at each append,
how much of the last submitted draft the model accepted (``observe``) and,
for a learning policy, token by token, what became of every whole draft,
the tokens it did not submit included (``learn``): the sequence shows that
a few steps later. A policy that hears refusals is also told where a draft
offers a token the model has refused at that place before, and one that
hears agreement how long a copy's source has held. This module
keeps what those need (the last draft, the drafts awaiting their outcome,
the refusals seen) apart from the drafter, which hands it the sequence.
"""

import copy
from typing import cast

import numpy as np

from .policy import HearsAgreement, HearsOrigin, HearsRefusals, Learns, Policy

MAX_SHADOWS = 64  # whole drafts a learning policy may wait on (each settles within n_draft tokens)
# A drafted token the model has refused at this many places after the same token (since
# it last took it there) is told to a policy that hears refusals (HearsRefusals), which
# prices it as unlikely: CostAwareLength cuts the draft before it where passes cost
# more for more tokens. Where a model rewrites a construct the same way each time it
# meets it (a small model's own habit on real edits: `from .types import X` restated
# as `from .types.X`, line after line), each copy of the source would otherwise go out
# past the place the model leaves it. Once: the quotes lost 1-3% where a single
# refusal was a chance one (replays of trained models' answers, docs/policies.md).
REFUSED_TIMES = 2
MAX_REFUSED = 1024  # refusals a sequence remembers (the oldest go first)

_NONE = np.zeros(0, dtype=np.int32)


class Submitting:
    """One drafter's copy of its policy and what running it takes (see the module's doc).

    ``held`` and ``n`` in the calls below are the drafter's sequence: the
    array whose first ``n`` tokens it is (not a copy).
    """

    def __init__(self, policy: Policy) -> None:
        self.policy = copy.deepcopy(policy)
        self._last = _NONE  # the last draft submitted, while it waits to be verified
        # Whole drafts (position, tokens, the policy's condition then) whose outcome a
        # learning policy awaits.
        self._shadows: list[tuple[int, np.ndarray, int]] | None = (
            [] if isinstance(self.policy, Learns) else None
        )
        # (token, the drafted token the model refused after it), as one int64 (:func:`_pairs`)
        # -> (places it was refused since it last held there, the last such place); kept
        # for a policy that hears refusals. Several drafts offering it at one place: once.
        self._refused: dict[int, tuple[int, int]] = {}
        # Asked once: a protocol's isinstance costs microseconds, as much as a draft.
        self._hears_origin = isinstance(self.policy, HearsOrigin)
        self._hears_refusals = isinstance(self.policy, HearsRefusals)
        self._hears_agreement = isinstance(self.policy, HearsAgreement)

    def start(self, n_draft: int) -> None:
        """A new sequence: the policy told, the drafts awaited dropped."""
        self.policy.start(n_draft)
        self.forget()

    def cut(
        self, full: np.ndarray, origin: int, held: np.ndarray, n: int, agreed: int = -1
    ) -> np.ndarray:
        """The part of a whole draft the policy submits, a copy (drafting whole costs
        microseconds); ``origin``: where the rules drew it from (HearsOrigin); ``agreed``:
        the tokens a copy's source has agreed on so far (HearsAgreement; -1: not a copy)."""
        policy = self.policy
        if self._hears_origin:
            cast(HearsOrigin, policy).drafting_from(origin)
        if self._hears_agreement and agreed >= 0 and len(full):
            cast(HearsAgreement, policy).copy_agreed(agreed)
        if self._shadows is not None and len(full):
            if len(self._shadows) >= MAX_SHADOWS:  # drafts again and again, accepting nothing
                del self._shadows[0]
            self._shadows.append((n, full, cast(Learns, policy).condition))
        if self._hears_refusals and self._refused and len(full):
            self._tell_refusal(full, held, n)
        self._last = full[: policy.length_of(len(full))]
        return self._last.copy()

    def observe(self, new: np.ndarray) -> None:
        """Tell the policy how much of the last draft the model accepted (``new``, the
        tokens about to be appended, starts with what it accepted)."""
        last, self._last = self._last, _NONE
        if len(last):
            m = min(len(last), len(new))
            wrong = np.flatnonzero(last[:m] != new[:m])
            self.policy.observe(len(last), int(wrong[0]) if len(wrong) else m)

    def learn(self, held: np.ndarray, n: int, before: int) -> None:
        """Tell a learning policy what the tokens since position ``before`` (just appended,
        the sequence now ``n`` tokens) show of each whole draft awaited.

        A draft made at position n0 is told token by token as the sequence
        grows past n0, the tokens it did not submit too, and settled at its
        first wrong token or its end (every append of a drafter with a policy
        comes here, so a waiting draft was told up to ``before``).
        """
        if not self._shadows:
            return
        policy = cast(Learns, self.policy)
        waiting, refusals = [], self._hears_refusals
        for n0, full, condition in self._shadows:
            told, known = before - n0, min(n - n0, len(full))
            wrong = np.flatnonzero(full[told:known] != held[n0 + told : n0 + known])
            right = told + int(wrong[0]) if len(wrong) else known
            if self._refused and right > told:  # refusals that held here are forgotten
                for pair in _pairs(held[n0 + told - 1 : n0 + right - 1], full[told:right]).tolist():
                    self._refused.pop(pair, None)
            if len(wrong):
                if refusals:
                    self._refuse(int(_pairs(held[n0 + right - 1], full[right])), n0 + right)
                policy.learn(len(full), told, right, True, condition)
                continue
            if known > told:
                policy.learn(len(full), told, known, False, condition)
            if known < len(full):
                waiting.append((n0, full, condition))
        self._shadows = waiting

    def forget(self) -> None:
        """Drop the drafts the policy waits to hear about, and the refusals they showed."""
        self._last = _NONE
        if self._shadows is not None:
            self._shadows = []
            self._refused = {}

    def _tell_refusal(self, full: np.ndarray, held: np.ndarray, n: int) -> None:
        """Tell the policy the first of the draft's tokens the model refused there
        REFUSED_TIMES times, if any."""
        pairs = _pairs(np.concatenate((held[n - 1 : n], full[:-1])), full)
        refused = self._refused
        for i, pair in enumerate(pairs.tolist()):
            if refused.get(pair, (0, -1))[0] >= REFUSED_TIMES:
                cast(HearsRefusals, self.policy).refused_at(i)
                return

    def _refuse(self, pair: int, place: int) -> None:
        """The model refused a drafted token after a token (:func:`_pairs`) at ``place``."""
        refused = self._refused
        times, last = refused.pop(pair, (0, -1))  # put back newest: the oldest go first
        refused[pair] = (times + (place != last), place)
        if len(refused) > MAX_REFUSED:
            del refused[next(iter(refused))]


def _pairs(before: "np.ndarray | int", tokens: "np.ndarray | int") -> np.ndarray:
    """Each token with the one before it, as one int64 (token ids are int32 >= 0)."""
    return (np.asarray(before, dtype=np.int64) << 32) | np.asarray(tokens, dtype=np.int64)
