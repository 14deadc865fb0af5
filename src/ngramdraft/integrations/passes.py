"""What the engine adapters share: their drafter's defaults, and timing the engine's passes.

An engine calls its draft model once before every forward pass, so the
time from one call's return to the next call is one verification pass of
the last draft (plus the host's own work around it: sampling, streaming),
which is what that draft cost the user. :class:`PassClock` tells the
drafter so (``Drafter.observe_pass``; a batch's, ``BatchDrafter.observe_pass``,
for the one sequence of an engine's step), for a policy that learns the
engine's costs; a call that brings more new tokens than one pass can (a new
turn of a conversation, a prompt) is not a pass and is not timed.

By default (:func:`engine_drafter`) llama.cpp's rules draft as llama.cpp does
(8 tokens, no policy: bit for bit), and the suffix rules draft up to 64
tokens and submit what the engine's measured costs make worth it
(``CostAwareLength()``, learning them from the clock).
"""

import time
from collections.abc import Callable
from typing import Any

from ..drafting.drafter import Drafter, load_kernels
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
