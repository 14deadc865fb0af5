"""Opt-in drafting policies beyond llama.cpp's rules: how much of each draft to submit.

Without a policy a Drafter drafts exactly as llama.cpp does. On a CPU, a
forward pass over k+1 tokens costs up to three times one over a single
token (``benchmarks/e2e.py`` measures it), so drafts the model rejects are
not free: where little is accepted (open-ended text), llama.cpp's rules can
cost more than they save. A policy sees each draft llama.cpp's rules make
and says how many of its tokens to submit; the drafts themselves stay
llama.cpp's, cut shorter.

The protocol, :class:`Policy` (a Drafter keeps its own copy of the policy):

* ``start(n_draft)``: a new sequence;
* ``length_of(full)``: how many of the ``full`` tokens of this step's draft to
  submit (0: none);
* ``observe(submitted, accepted)``: at the next accept, how many of the
  submitted tokens the model accepted;
* ``learn(full, start, right, wrong, condition)`` (optional,
  :class:`Learns`): as the sequence shows it, what became of a whole
  draft's tokens, submitted or not: tokens ``start`` .. ``right - 1``
  (0-based) of a draft of ``full`` tokens proved right and, if ``wrong``,
  token ``right`` wrong (the draft is then settled); ``condition`` is what
  the policy's ``condition`` was when the draft was made (what it had seen
  then that bears on the draft). Each call follows on from the last one
  for that draft (its first has ``start == 0``), so a policy hears at once
  that a draft's first token failed, not only after its last one proved
  right.

Optional protocols tell a policy more before each draft is cut:
``HearsOrigin`` where the rules drew it from, ``HearsRefusals`` where it
offers a token the model has refused there before, ``HearsAgreement`` how
long a copy's source has agreed with the sequence.

``AdaptiveLength``: the length grows by 2 after a draft accepted whole and
shrinks by 1 after any rejection (transformers' heuristic for assistant
models), between ``n_min`` and the drafter's ``n_draft``; and drafting
pauses for ``retry_after`` steps whenever, over the last ``window`` drafts,
fewer than ``off_below`` of the drafted tokens were accepted (auto-off with
periodic retry).

``CostAwareLength``: given what a forward pass over k tokens costs on your
engine, submit the number of tokens that promises the most tokens per unit
of time. It learns how often a draft's token j is right when the ones
before it were, apart after a draft the model accepted whole and after one
it did not, and by where the rules drew the draft from, from every draft,
including the tokens it did not submit (the sequence shows what followed
them a few steps later): so it never needs to pay for a draft to learn
about it, and never pauses blindly. Given no costs, it learns them too
(:class:`TimesPasses`): the engine adapters time the passes they see, the
time from one draft to the next, and llama-cpp-python's times a few pass
sizes at load, before any request.
"""

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import InvalidParameterError
from ..validation import check_int, check_number


class Policy(Protocol):
    """How much of each draft to submit (see the module's doc)."""

    def start(self, n_draft: int) -> None: ...

    def length_of(self, full: int) -> int: ...

    def observe(self, submitted: int, accepted: int) -> None: ...


@runtime_checkable
class Learns(Protocol):
    """A policy that also learns from whole drafts, submitted or not."""

    @property
    def condition(self) -> int: ...

    def learn(self, full: int, start: int, right: int, wrong: bool, condition: int) -> None: ...


@runtime_checkable
class HearsOrigin(Protocol):
    """A policy told where each draft comes from before it is cut."""

    def drafting_from(self, origin: int) -> None: ...


@runtime_checkable
class HearsRefusals(Protocol):
    """A policy told, before a draft is cut, where it first offers a token the model has
    refused at that place before (``REFUSED_TIMES``, ``drafting/submitting.py``):
    ``index``, 0-based (not told where the draft offers none)."""

    def refused_at(self, index: int) -> None: ...


@runtime_checkable
class HearsAgreement(Protocol):
    """A policy told, before a draft is cut, that it copies a source which has agreed with
    the sequence on ``tokens`` tokens so far (0: a match just found); not told of drafts
    that copy nothing (llama.cpp's rules, a corpus's continuation)."""

    def copy_agreed(self, tokens: int) -> None: ...


@runtime_checkable
class TimesPasses(Protocol):
    """A policy that learns what the engine's forward passes cost, as they happen."""

    @property
    def learns_costs(self) -> bool: ...

    def observe_pass(self, n_tokens: int, seconds: float) -> None: ...


@dataclass
class AdaptiveLength:
    """Adaptive draft length with auto-off; one instance per sequence (Drafter copies it)."""

    n_min: int = 1
    window: int = 16
    off_below: float = 0.25
    retry_after: int = 64
    length: int = field(default=0, init=False)
    _limit: int = field(default=0, init=False, repr=False)
    _paused: int = field(default=0, init=False, repr=False)
    _recent: deque[tuple[int, int]] = field(default_factory=deque, init=False, repr=False)

    def __post_init__(self) -> None:
        ints = {"n_min": self.n_min, "window": self.window, "retry_after": self.retry_after}
        for name, value in ints.items():
            check_int(value, name, 1)
        if not 0.0 <= check_number(self.off_below, "off_below") <= 1.0:
            raise InvalidParameterError(f"off_below must be 0 .. 1, got {self.off_below!r}")

    def start(self, n_draft: int) -> None:
        """A new sequence: full length, no pause, no history."""
        self._limit = n_draft
        self.length = n_draft
        self._paused = 0
        self._recent = deque(maxlen=self.window)

    def length_of(self, full: int) -> int:
        """How many of this step's ``full`` drafted tokens to submit (0 while paused)."""
        if self._paused:
            self._paused -= 1
            return 0
        return min(full, self.length)

    def observe(self, submitted: int, accepted: int) -> None:
        """The model accepted ``accepted`` of the ``submitted`` tokens of the last draft."""
        if submitted == 0:
            return
        if accepted >= submitted:
            self.length = min(self._limit, self.length + 2)
        else:
            self.length = max(min(self.n_min, self._limit), self.length - 1)
        self._recent.append((submitted, accepted))
        if len(self._recent) == self.window:
            total = sum(d for d, _ in self._recent)
            if sum(a for _, a in self._recent) < self.off_below * total:
                self._paused = self.retry_after
                self._recent.clear()


# A draft's origin (HearsOrigin): a copy whose last token held (or rules without
# copies), one from a place not yet tested, one that missed the sequence's last token,
# and a copy in step whose source has proved itself over a long run (the rules say how
# long: the suffix rules' PROVEN_RUN).
IN_STEP, JUMPED, MISSED, LONG_RUN = range(4)
# CostAwareLength's history: the last draft submitted was not accepted whole (or there
# was none yet), or it was. Its condition is history + 2 * origin, one of CONDITIONS.
REJECTED, WHOLE = 0, 1
CONDITIONS = 8


@dataclass
class CostAwareLength:
    """Submit the part of each draft that promises the most tokens per unit of time.

    ``pass_cost[k - 1]`` is the time (any unit) of one forward pass over k
    tokens, for k = 1 .. n_draft + 1: measure it on the engine you serve
    (``integrations.llama_cpp_measure.measure_pass_cost`` does for llama-cpp-python).
    Without it (``CostAwareLength()``) the policy learns the costs from the
    passes the engine makes (``observe_pass``, which ngramdraft's engine
    adapters call with the time from one draft to the next, and
    llama-cpp-python's for passes it times at load): the fastest pass
    ever timed of each size timed at least :data:`TIMED_TO_TRUST` times,
    sizes timed fewer times interpolated between those that were, and,
    past the largest, as dear as it (a hope that makes the policy submit a
    longer draft and so learn its cost).

    The policy keeps decayed counts, for each j, of the drafts whose token j
    is known (the tokens before it right) and of those where it was right
    too, apart by the *condition* a draft is made in: after a draft the
    model accepted whole or not (a sequence starts in the second), and where
    the rules drew it from (``drafting_from``: in step, a jump, after a
    miss, a copy in step over a long run). Their ratio, after a prior worth one draft that is never
    forgotten, is the chance that token j is right given the ones before
    (the prior: one half after a rejection, the condition's rate over every
    j after a whole draft; :data:`PRIOR`),
    and the product of those ratios the chance that the first j are (a
    Kaplan-Meier estimate). A draft of L tokens is then cut to the k <= L
    that maximizes (1 + expected accepted tokens) / pass_cost[k]: all of it
    where passes cost about the same whatever their size (a GPU), less or
    nothing where they do not and the drafts fail. ``decay`` (0 < decay <=
    1) forgets old drafts, so the policy follows the text as it changes:
    every new draft ages the counts of every condition, not only its own, so
    that a condition the text no longer reaches (a long copy, on an edit) is
    not trusted on the next request (records) by what it learned there.

    Told that a draft copies a source that has agreed with the sequence on r
    tokens so far (``copy_agreed``), it trusts the copy for about as long
    again: tokens past max(:data:`TRUSTED_LEAST`, :data:`TRUSTED_TIMES` * r)
    are priced at :data:`UNPROVEN_CHANCE` at most, for that draft alone.
    Where a longer pass costs more the draft is cut there; where passes
    cost alike it still goes out whole.

    Told that a draft offers a token the model has refused at that place
    before (``refused_at``: twice since it last took it there,
    ``REFUSED_TIMES`` in ``drafting/submitting.py``), it prices that token at
    REFUSED_CHANCE at most, for that draft alone: where a longer pass costs
    more the draft is cut before it.

    Why the condition, and not the draft's length: a copy the model makes
    goes on (a draft accepted whole is followed by one that mostly is), and
    one it left stays left; a draft's length, which the counts were once
    kept by, says less, and split the drafts into 33 tables each learned from
    few. And after a rejection a draft from a fresh jump (a match found
    anew) holds far more often than one from a copy that has just missed
    its token. Replayed over trained models' own answers at their engines'
    pass costs, each split gained on most workloads (``docs/policies.md``).

    The counts grow as each token becomes known, not once a draft is
    settled: a draft right for 30 tokens is known right for its first
    token one step after it is made, and wrong ones are known at once. Had
    the policy waited for whole drafts, the drafts made along a passage the
    model repeats would go on arriving, right, for a draft's length after
    the passage ended, while every draft made since failed at its first
    token: on open questions the suffix rules' 32-token drafts then went
    out whole a score of times in a row, each failing, each costing a
    pass over 33 tokens.
    """

    pass_cost: Sequence[float] | None = None
    decay: float = 0.97
    # [condition, j]: decayed counts of the drafts made in that condition whose token j
    # (1-based) is known, the ones before it right, and of those whose token j was right too.
    _known: np.ndarray = field(
        default_factory=lambda: np.zeros((CONDITIONS, 0)), init=False, repr=False
    )
    _right: np.ndarray = field(
        default_factory=lambda: np.zeros((CONDITIONS, 0)), init=False, repr=False
    )
    _history: int = field(default=REJECTED, init=False, repr=False)
    _origin: int = field(default=IN_STEP, init=False, repr=False)
    _refused_at: int = field(default=-1, init=False, repr=False)  # -1: none
    _agreed: int = field(default=-1, init=False, repr=False)  # -1: not a copy, or not told
    # pass size -> (passes of that size timed, the fastest of them in seconds)
    _timed: dict[int, tuple[int, float]] = field(default_factory=dict, init=False, repr=False)
    _cost: np.ndarray | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 < check_number(self.decay, "decay") <= 1.0:
            raise InvalidParameterError(f"decay must be in (0, 1], got {self.decay!r}")
        if self.pass_cost is None:
            return
        cost = np.asarray(self.pass_cost)
        if (
            cost.ndim != 1
            or len(cost) < 2
            or cost.dtype == np.bool_
            or cost.dtype.kind not in "iuf"
            or not np.all(np.isfinite(cost))
            or cost.min() <= 0
        ):
            raise InvalidParameterError(
                "pass_cost must list the positive cost of a pass over 1, 2, ... tokens "
                f"(at least two), got {self.pass_cost!r}"
            )
        self.pass_cost = tuple(float(c) for c in cost / float(cost[0]))

    def start(self, n_draft: int) -> None:
        """A new sequence; what was learned stays (the same engine, the same kind of text)."""
        if self.pass_cost is not None and len(self.pass_cost) < n_draft + 1:
            raise InvalidParameterError(
                f"pass_cost has {len(self.pass_cost)} costs: a drafter of n_draft={n_draft} "
                f"needs the cost of passes of 1 .. {n_draft + 1} tokens"
            )
        if self._known.shape[1] != n_draft + 1:
            self._known = np.zeros((CONDITIONS, n_draft + 1))
            self._right = np.zeros((CONDITIONS, n_draft + 1))
            self._cost = None
        self._history, self._origin = REJECTED, IN_STEP

    def length_of(self, full: int) -> int:
        """The k <= full that maximizes (1 + expected accepted) / pass_cost[k] (the
        longest such)."""
        if full == 0:
            return 0
        c, j = self.condition, slice(1, full + 1)
        prior = PRIOR
        if self._history == WHOLE:
            prior = (self._right[c].sum() + PRIOR) / (self._known[c].sum() + 1.0)
        given = (self._right[c, j] + prior) / (self._known[c, j] + 1.0)
        refused, self._refused_at = self._refused_at, -1
        if 0 <= refused < full:
            given[refused] = min(given[refused], REFUSED_CHANCE)
        agreed, self._agreed = self._agreed, -1
        if agreed >= 0:
            trusted = max(TRUSTED_LEAST, TRUSTED_TIMES * agreed)
            given[trusted:] = np.minimum(given[trusted:], UNPROVEN_CHANCE)
        tokens = 1.0 + np.concatenate(([0.0], np.cumsum(np.cumprod(given))))
        # Of the lengths that promise the most, the longest: where passes cost alike, a
        # token too unlikely to add to the sum in floating point still costs nothing.
        rate = (tokens / self._costs()[: full + 1])[::-1]
        return full - int(np.argmax(rate))

    def observe(self, submitted: int, accepted: int) -> None:
        """The last draft submitted, accepted whole or not: the next drafts' history."""
        if submitted:
            self._history = WHOLE if accepted >= submitted else REJECTED

    def drafting_from(self, origin: int) -> None:
        """Where the rules drew the next draft from: IN_STEP, JUMPED, MISSED or LONG_RUN."""
        self._origin = check_int(
            origin, "origin (IN_STEP, JUMPED, MISSED or LONG_RUN)", IN_STEP, LONG_RUN
        )

    def refused_at(self, index: int) -> None:
        """The next draft's token ``index`` (0-based) is one the model has refused there:
        it is priced at REFUSED_CHANCE of being right, at most, for that draft alone."""
        self._refused_at = check_int(index, "index", 0)

    def copy_agreed(self, tokens: int) -> None:
        """The next draft copies a source that has agreed with the sequence on ``tokens``
        tokens so far: its tokens past max(TRUSTED_LEAST, TRUSTED_TIMES * tokens) are
        priced at UNPROVEN_CHANCE of being right, at most, for that draft alone."""
        self._agreed = check_int(tokens, "tokens", 0)

    @property
    def condition(self) -> int:
        """The history (WHOLE if the last draft submitted was accepted whole, else
        REJECTED) plus twice the origin the next draft was told to come from."""
        return self._history + 2 * self._origin

    def learn(self, full: int, start: int, right: int, wrong: bool, condition: int) -> None:
        """Tokens ``start`` .. ``right - 1`` of a draft of ``full`` tokens made in
        ``condition`` proved right and, if ``wrong``, token ``right`` wrong (0-based)."""
        if start == 0:  # a new draft's first news: older drafts weigh less
            self._known *= self.decay
            self._right *= self.decay
        self._known[condition, start + 1 : right + 1 + wrong] += 1.0
        self._right[condition, start + 1 : right + 1] += 1.0

    @property
    def learns_costs(self) -> bool:
        """Whether the pass costs are learned (none were given): what ``observe_pass`` feeds."""
        return self.pass_cost is None

    def observe_pass(self, n_tokens: int, seconds: float) -> None:
        """A forward pass over ``n_tokens`` tokens took ``seconds`` (learned costs only).

        Timings may come before the first sequence (an engine timing its
        passes at load); sizes past the drafter's passes are never read. A
        pass timed at zero seconds is ignored (:func:`check_pass`).
        """
        n_tokens, seconds = check_pass(n_tokens, seconds)
        if self.pass_cost is not None or seconds == 0:
            return
        count, fastest = self._timed.get(n_tokens, (0, math.inf))
        self._timed[n_tokens] = (count + 1, min(fastest, seconds))
        self._cost = None

    def _costs(self) -> np.ndarray:
        """Each pass size's cost relative to a pass over one token (1 .. n_draft + 1)."""
        if self.pass_cost is not None:
            return np.asarray(self.pass_cost)
        if self._cost is None:
            self._cost = learned_costs(self._timed, self._known.shape[1])
        return self._cost


# A token's chance to be right before any draft of its length is known, after a
# rejection. Worth one draft and never forgotten, it keeps a chance drawn from few
# drafts from being believed: the far tokens of long drafts are known from few, and
# their product would promise a long draft more than it gives (on open questions,
# 0.86x of one-token passes against 0.97x, replayed on a trained model's own output).
# After a draft accepted whole the model is copying, and a token's chance hardly
# depends on its place in the draft: there the prior is the condition's rate over
# every place. One half there, never outweighed by the decayed counts (about 33
# drafts at most), priced each of a copy's tokens 1.5% short of right, 40% over 32
# tokens, and cut whole drafts that held in two passes. After a rejection the first
# token fails far more often than the rest, and that rate would make every place
# look as bad: one half stays there (pooled there too, a replay over a trained
# model's answers lost 4-6% on open questions; pooled after a whole draft alone, the
# suffix rules gained 4-15% on edits, quotes and a session and moved the rest by
# under 2%, docs/policies.md; weighed as 2, 4 or 8 drafts instead of one, the same
# or 2-4% less).
PRIOR = 0.5
# A token the model has refused where a draft offers it, twice since it last took it
# there (REFUSED_TIMES, drafting/submitting.py), is this likely right at most: on a CPU, where a
# longer pass costs more, the draft is cut before it; where passes cost alike (a
# GPU) it still goes out whole, as the tokens after it cost nothing.
REFUSED_CHANCE = 0.1
# A copy is trusted for about as long again as its source has agreed with the sequence
# (TRUSTED_TIMES), and for TRUSTED_LEAST tokens from a match just found; the tokens
# past that are this likely right at most. What a condition's counts learned of
# copies that ran hundreds of tokens (an edit, a quote) says nothing of the next
# copy's length: a session's first answer on the 0.5B copied runs of 5 to 30 tokens
# from the file it was given, and after three tokens held the policy submitted 63 and
# 31 more, which failed at their 5th to 8th (passes over 64 tokens, each the cost of
# 27 over one, for 51 tokens answered). Runs of copied text are long-tailed: one that
# has run r tokens is about as likely to run r more as not. Priced over `ngramdraft
# serve`'s own passes (docs/policies.md), twice the run and 4 at least gained most
# over both models' five workloads together, against 3x, and 2x with 2, 6 or 8.
TRUSTED_LEAST = 4
TRUSTED_TIMES = 2
UNPROVEN_CHANCE = 0.1
# A pass over k tokens costs at most about k passes over one (a batch shares the
# weights' reads); small batches on a CPU come close (llama.cpp: 2 tokens 2.0x,
# 3 tokens 3.2x one, in a trained model's measured curve), hence twice that. Three
# passes of a size slowed together by a busy machine (three other processes on the
# tiny test model's 2 cores: 33 tokens timed at 80-180 one-token passes) would
# otherwise lock the size out for good.
IMPLAUSIBLE = 2
# Timings a size needs before its cost is believed. Once one pass of a size
# is thought dear the policy stops submitting drafts of that size, and so
# would never time it again: a single pass slowed by something else (another
# process on the core, the engine's first allocation for that batch size)
# would lock the size out for good. Until then it costs what its neighbours do.
TIMED_TO_TRUST = 3


def check_pass(n_tokens: object, seconds: object) -> tuple[int, float]:
    """A pass told to ``observe_pass``: (n_tokens >= 1, seconds >= 0 and finite), else
    InvalidParameterError. Zero seconds is a clock too coarse to time it (ignored)."""
    n_tokens = check_int(n_tokens, "n_tokens", 1)
    seconds = check_number(seconds, "seconds")
    if not 0.0 <= seconds < math.inf:
        raise InvalidParameterError(f"seconds must be a finite time >= 0, got {seconds!r}")
    return n_tokens, seconds


def learned_costs(timed: dict[int, tuple[int, float]], n: int) -> np.ndarray:
    """Costs of passes over 1 .. n tokens from the passes timed, relative to the first.

    ``timed[k]`` is (passes over k tokens timed, the fastest of them). A
    size's cost is its fastest pass ever: whatever else is timed with a pass
    (a pause of the caller's, another process on the core) only adds to it,
    and a spell of slow passes must not make the sizes in use look dearer
    than those timed in a quiet moment (``docs/policies.md``). Sizes timed
    fewer than TIMED_TO_TRUST times are interpolated
    between those that were; sizes past the largest cost what it did
    (optimistic, so that a longer draft is tried and its cost learned);
    with no size trusted, every size costs the same. A pass never costs less
    than a shorter one: a size timed dearer than a longer one costs what the
    longer one did. A size timed dearer than :data:`IMPLAUSIBLE` times as
    many one-token passes was timed while something else ran: it is not
    trusted, and so is tried again, where once it was locked out for good
    (never submitted, never timed again).
    """
    ones, fastest_one = timed.get(1, (0, np.inf))
    one = fastest_one if ones >= TIMED_TO_TRUST else np.inf
    sizes = np.array(
        sorted(
            k
            for k, (count, fastest) in timed.items()
            if count >= TIMED_TO_TRUST and fastest <= IMPLAUSIBLE * k * one
        ),
        dtype=np.float64,
    )
    if not len(sizes):
        return np.ones(n)
    at = np.array([timed[int(k)][1] for k in sizes])
    cost = np.minimum.accumulate(np.interp(np.arange(1, n + 1), sizes, at)[::-1])[::-1]
    return cost / cost[0]
