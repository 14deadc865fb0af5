"""The engine adapters' core: one sequence's drafter as an engine calls it, and its figures.

Every engine asks its draft source once before each forward pass, handing it
the sequence so far. :class:`DraftStep` is that call for every adapter that
follows one sequence (llama-cpp-python's draft model, transformers'
candidate generator): bring the drafter in step with the sequence, time the
pass since the last call, draft, and count, in one :class:`DraftStats`, the
figure every adapter and server reports. vLLM's proposer, which follows a
batch of sequences, counts into the same type and times its steps with the
same clock.

Timing: the time from one call's return to the next call is one
verification pass of the last draft (plus the host's own work around it:
sampling, streaming), which is what that draft cost the user.
:class:`PassClock` tells the drafter so (``Drafter.observe_pass``; a
batch's, ``BatchDrafter.observe_pass``, for the one sequence of an engine's
step), for a policy that learns the engine's costs; a call that brings more
new tokens than one pass can (a new turn of a conversation, a prompt) is not
a pass and is not timed.

By default (:func:`engine_drafter`) llama.cpp's rules draft as llama.cpp does
(8 tokens, no policy: bit for bit), and the suffix rules draft up to 64
tokens and submit what the engine's measured costs make worth it
(``CostAwareLength()``, learning them from the clock).
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..drafting.drafter import Drafter
from ..drafting.practice import load_kernels
from ..drafting.rulesets import DEFAULT, rule_set

AUTO: Any = object()  # the rule set's own policy (its engine_policy())


def engine_policy(rules: str, policy: Any = AUTO) -> Any:
    """``policy``, or for AUTO the engine policy of the rule set ``rules`` names."""
    return rule_set(rules).engine_policy() if policy is AUTO else policy


def engine_drafter(
    static: Any = None,
    dynamic: Any = None,
    n_draft: int | None = None,
    *args: Any,
    policy: Any = AUTO,
    **kwargs: Any,
) -> Drafter:
    """A Drafter with an engine adapter's defaults for its rule set (``ENGINE_N_DRAFT``,
    ``engine_policy()``, ``drafting/rulesets.py``), its kernels loaded (a request need
    not wait for them)."""
    name = kwargs.get("rules", DEFAULT)
    rules = rule_set(name)
    if n_draft is None:
        n_draft = rules.ENGINE_N_DRAFT
    policy = engine_policy(name, policy)
    drafter = Drafter(static, dynamic, n_draft, *args, policy=policy, **kwargs)
    load_kernels(name)
    return drafter


class PassClock:
    """Times the engine's passes between a draft model's calls (see the module's doc)."""

    def __init__(self) -> None:
        self._drafted = 0
        self._returned = 0.0

    def called(self, observe_pass: Callable[[int, float], None], new: int | None) -> None:
        """A call began, ``new`` tokens past the last one's (None: a new sequence); a pass
        since is told to ``observe_pass`` (a drafter's, or a batch's for one sequence)."""
        if new is not None and 1 <= new <= self._drafted + 1:  # one pass since, nothing else
            observe_pass(self._drafted + 1, time.perf_counter() - self._returned)

    def returned(self, drafted: int) -> None:
        """The call returns a draft of ``drafted`` tokens."""
        self._drafted = drafted
        self._returned = time.perf_counter()


@dataclass
class DraftStats:
    """What an adapter's drafting did: the figures vLLM's and llama.cpp's servers report.

    ``passes`` counts the forward passes after each prompt's (the host asks
    for a draft before each); ``drafts`` those given a draft of one token or
    more; ``accepted`` the drafted tokens the model confirmed, known at the
    next call (a sequence's last pass is not seen), and ``accepted_by_position``
    how often the i-th token of a draft was one of them (vLLM's and
    llama-server's ``spec_decode_num_accepted_tokens_per_pos``);
    ``sequences`` those started, ``finished`` those an adapter that sees
    their end finished, and ``seconds`` the time spent drafting.
    """

    sequences: int = 0
    finished: int = 0
    passes: int = 0
    drafts: int = 0
    drafted: int = 0
    accepted: int = 0
    accepted_by_position: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def drafted_now(self, n: int) -> None:
        """A pass is about to verify a draft of ``n`` tokens."""
        self.passes += 1
        self.drafts += n > 0
        self.drafted += n

    def accepted_draft(self, n: int) -> None:
        """The model confirmed the first ``n`` tokens of the last draft."""
        self.accepted += n
        grow = n - len(self.accepted_by_position)
        if grow > 0:
            self.accepted_by_position += [0] * grow
        for i in range(n):
            self.accepted_by_position[i] += 1

    @property
    def acceptance(self) -> float:
        """Share of drafted tokens accepted."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_pass(self) -> float:
        """Tokens each forward pass produced: its own one plus the accepted drafts."""
        return (self.passes + self.accepted) / self.passes if self.passes else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "sequences": self.sequences,
            "finished": self.finished,
            "passes": self.passes,
            "drafts": self.drafts,
            "drafted_tokens": self.drafted,
            "accepted_tokens": self.accepted,
            "accepted_tokens_by_position": list(self.accepted_by_position),
            "acceptance": round(self.acceptance, 4),
            "tokens_per_pass": round(self.tokens_per_pass, 4),
            "seconds": round(self.seconds, 6),
        }


class DraftStep:
    """One sequence's drafter, called as an engine calls its draft source before each pass.

    ``step(sequence)`` brings the drafter in step (accepting the new tokens,
    or starting anew where the sequence is not the one held), counts what
    the last draft had accepted, tells the drafter the pass since the last
    call, and returns the next draft, cut by ``cut`` if given (the part the
    host can take). ``stats`` is what every call did.
    """

    def __init__(self, drafter: Drafter) -> None:
        self.drafter = drafter
        self.stats = DraftStats()
        self._clock = PassClock()
        self._seen: int | None = None  # tokens of the sequence at the last call
        self._drafted = 0  # tokens that call returned

    def __call__(
        self, sequence: Any, cut: Callable[[np.ndarray], np.ndarray] | None = None
    ) -> np.ndarray:
        started = time.perf_counter()
        n = len(sequence)
        new = None if self._seen is None else n - self._seen
        if self.drafter.sync(sequence):
            if new is not None:
                # The host verified the last draft and added what it accepted plus one
                # token of its own: every token past that one is an accepted draft.
                self.stats.accepted_draft(max(0, min(new - 1, self._drafted)))
                self._clock.called(self.drafter.observe_pass, new)
        else:
            self.stats.sequences += 1
        draft = self.drafter.draft()
        if cut is not None:
            draft = cut(draft)
        self.stats.drafted_now(len(draft))
        self._seen, self._drafted = n, len(draft)
        self.stats.seconds += time.perf_counter() - started
        self._clock.returned(len(draft))
        return draft

    def finish(self) -> None:
        """End the sequence held: file it with the earlier ones (and save a dynamic path)."""
        if self.drafter.started:
            self.drafter.finish()
            self.stats.finished += 1
        self._seen = None
