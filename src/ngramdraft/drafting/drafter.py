"""Drafter: the per-sequence object a decoding loop talks to, whatever its rule set.

A drafter keeps one sequence and says how many tokens it holds (``_n``),
where they are (``_held``) and how to append (``_append``); this class does
the rest of the protocol (sync, the tokens) and what a policy needs, so that
every rule set cuts and learns from its drafts the same way. The rule sets'
drafters (``rulesets/<name>/drafter.py``) subclass it; ``Drafter(rules=...)``
makes the one ``drafting/rulesets.py`` names.
"""

import copy
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..errors import InvalidParameterError, NgramdraftError
from ..validation import as_tokens
from .policy import (
    IN_STEP,
    HearsOrigin,
    HearsRefusals,
    Learns,
    Policy,
    TimesPasses,
    check_pass,
)
from .rulesets import rule_set

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

MAX_DRAFT = 4096  # the longest draft any rule set makes
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
REPLY_ROOM = 256  # tokens a new sequence has room for past its prompt before its buffers grow

_NONE = np.zeros(0, dtype=np.int32)


class Drafter:
    """Draft tokens for one sequence at a time: by default exactly as llama.cpp's lookup
    decoding.

    ``Drafter(...)`` makes the drafter of the rule set ``rules`` names, a
    subclass of this class (``isinstance(d, Drafter)`` holds for every rule
    set); the protocol, sync, policies and pickling are this class's, the
    drafting its rule set's.

    The arguments are the rule set's drafter's: by default
    :class:`~ngramdraft.rulesets.llamacpp.drafter.LlamaCppDrafter`'s (a
    static and a dynamic cache, ``n_draft``, the n-gram sizes, a policy,
    the dynamic file's saving), with ``rules="suffix"``
    :class:`~ngramdraft.rulesets.suffix.drafter.SuffixDrafter`'s (a
    corpus's suffix file and a RequestMemory, ``docs/suffix.md``). Either
    rule set refuses the other's caches with WrongFileKindError.
    """

    static: Any  # the static role: a StaticCache, a SuffixCorpus (rules="suffix") or None
    dynamic: Any  # the earlier sequences: an NgramCache, a RequestMemory (rules="suffix")
    n_draft: int
    _started: bool

    def __new__(cls, *args: Any, rules: str = "llamacpp", **options: Any) -> "Drafter":
        if cls is Drafter:  # the rule set's own class, whose __init__ Python then calls
            cls = rule_set(rules).DRAFTER
        return super().__new__(cls)

    # What each rule set's drafter implements (tests/test_rulesets.py checks it does).

    def draft(self) -> np.ndarray:
        """Up to n_draft tokens (int32) the model is likely to produce next."""
        raise NotImplementedError

    def accept(self, tokens: "ArrayLike") -> None:
        """Append verified tokens (accepted drafts and the model's own token)."""
        raise NotImplementedError

    def start(self, prompt_tokens: "ArrayLike") -> None:
        """Begin a sequence with its prompt."""
        raise NotImplementedError

    def finish(self) -> None:
        """End the sequence: file it with the earlier ones (the dynamic cache or memory)."""
        raise NotImplementedError

    def rewind(self, n: int) -> None:
        """Remove the last ``n`` tokens, as if never accepted."""
        raise NotImplementedError

    def flush(self) -> None:
        """Save what finished sequences added to a file and no save has written yet."""
        raise NotImplementedError

    def check_vocabulary(self, n_vocab: int) -> None:
        """Raise VocabularyError if a cache holds token ids that a model of n_vocab lacks."""
        raise NotImplementedError

    @property
    def _n(self) -> int:
        """Tokens in the sequence."""
        raise NotImplementedError

    @property
    def _held(self) -> np.ndarray:
        """The array whose first ``_n`` tokens are the sequence (not a copy)."""
        raise NotImplementedError

    def _append(self, new: np.ndarray) -> None:
        raise NotImplementedError

    def _init_policy(self, policy: Policy | None) -> None:
        self._policy = None if policy is None else copy.deepcopy(policy)
        self._last = _NONE  # the last draft, while a policy waits to see it verified
        # Whole drafts (position, tokens, the policy's condition then) whose outcome a
        # learning policy awaits.
        self._shadows: list[tuple[int, np.ndarray, int]] | None = (
            [] if isinstance(self._policy, Learns) else None
        )
        # (token, the drafted token the model refused after it), as one int64 (:func:`_pairs`)
        # -> (places it was refused since it last held there, the last such place); kept
        # for a policy that hears refusals. Several drafts offering it at one place: once.
        self._refused: dict[int, tuple[int, int]] = {}
        # Asked once: a protocol's isinstance costs microseconds, as much as a draft.
        self._hears_origin = isinstance(self._policy, HearsOrigin)
        self._hears_refusals = isinstance(self._policy, HearsRefusals)

    def __getstate__(self) -> None:
        raise uncopyable(self)

    def _begin(self, prompt: np.ndarray) -> None:
        """start()'s end, the sequence emptied: the prompt appended, the policy told."""
        self._append(prompt)
        self._started = True
        if self._policy is not None:
            self._policy.start(self.n_draft)
            self._forget_drafts()

    def _check_rewind(self, n: object) -> int:
        self._require_started()
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or not 0 <= n <= self._n:
            raise InvalidParameterError(
                f"cannot rewind {n!r} tokens: the sequence holds {self._n} (rewind 0 .. {self._n})"
            )
        return int(n)

    @property
    def tokens(self) -> np.ndarray:
        """The sequence so far (prompt and accepted tokens), a copy."""
        return self._held[: self._n].copy()

    @property
    def n_tokens(self) -> int:
        """Tokens in the sequence (prompt and accepted)."""
        return self._n

    @property
    def policy(self) -> Policy | None:
        """The drafter's own copy of its policy (what it has learned), or None."""
        return self._policy

    @property
    def started(self) -> bool:
        """Whether a sequence is under way (start() called, finish() not yet)."""
        return self._started

    def sync(self, sequence: "ArrayLike") -> bool:
        """Follow an engine that hands over the whole sequence at every step.

        If ``sequence`` extends the one this drafter holds, only the new tokens
        are accepted. Anything else (a new prompt, an edited history) finishes
        the current sequence, merging it into the dynamic cache, and starts
        ``sequence``. The known prefix is compared as one memcmp; everything
        else costs in proportion to the new tokens. Returns whether ``sequence``
        extended the one held (False: it was started anew).
        """
        n = self._n
        if self._started:
            arr = np.asarray(sequence)
            if (
                arr.ndim == 1
                and len(arr) >= n
                and arr.dtype.kind in "iu"
                and np.array_equal(arr[:n], self._held[:n])
            ):
                if len(arr) > n:
                    new = as_tokens(arr[n:], "sequence")
                    if self._policy is not None:
                        self._append_observed(self._policy, new)
                    else:
                        self._append(new)
                return True
            self.finish()
        self.start(sequence)
        return False

    def observe_pass(self, n_tokens: int, seconds: float) -> None:
        """The engine's forward pass over ``n_tokens`` tokens took ``seconds``.

        For a policy that learns the engine's pass costs (``CostAwareLength()``
        without costs); the engine adapters call it, and may before the first
        sequence (timing passes at load). A pass over more tokens than a draft
        of this drafter's and one more is not one of its passes, and is ignored.
        ``n_tokens`` below 1, or ``seconds`` negative or not finite, is an
        InvalidParameterError.
        """
        n_tokens, seconds = check_pass(n_tokens, seconds)
        if isinstance(self._policy, TimesPasses) and n_tokens <= self.n_draft + 1:
            self._policy.observe_pass(n_tokens, seconds)

    @property
    def learns_pass_costs(self) -> bool:
        """Whether the policy learns the engine's pass costs (what ``observe_pass`` is for)."""
        return isinstance(self._policy, TimesPasses) and self._policy.learns_costs

    def _submitted(self, policy: Policy, full: np.ndarray, origin: int = IN_STEP) -> np.ndarray:
        """The part of a whole draft the policy submits (drafting whole costs microseconds);
        ``origin``: where the rules drew it from (HearsOrigin)."""
        if self._hears_origin:
            cast(HearsOrigin, policy).drafting_from(origin)
        if self._shadows is not None and len(full):
            if len(self._shadows) >= MAX_SHADOWS:  # drafts again and again, accepting nothing
                del self._shadows[0]
            self._shadows.append((self._n, full, cast(Learns, policy).condition))
        if self._hears_refusals and self._refused and len(full):
            self._tell_refusal(cast(HearsRefusals, policy), full)
        self._last = full[: policy.length_of(len(full))]
        return self._last.copy()

    def _tell_refusal(self, policy: HearsRefusals, full: np.ndarray) -> None:
        """Tell the policy the first of the draft's tokens the model refused there
        REFUSED_TIMES times, if any."""
        pairs = _pairs(np.concatenate((self._held[self._n - 1 : self._n], full[:-1])), full)
        refused = self._refused
        for i, pair in enumerate(pairs.tolist()):
            if refused.get(pair, (0, -1))[0] >= REFUSED_TIMES:
                policy.refused_at(i)
                return

    def _forget_drafts(self) -> None:
        """Drop the drafts the policy waits to hear about, and the refusals they showed."""
        self._last = _NONE
        if self._shadows is not None:
            self._shadows = []
            self._refused = {}

    def _append_observed(self, policy: Policy, new: np.ndarray) -> None:
        """_append, telling the policy what became of its drafts."""
        self._observe(policy, new)
        self._append(new)
        if self._shadows and isinstance(policy, Learns):
            self._shadows = self._learn(policy, self._shadows, self._n - len(new))

    def _observe(self, policy: Policy, new: np.ndarray) -> None:
        """Tell the policy how much of the last draft the model accepted (new starts with it)."""
        last, self._last = self._last, _NONE
        if len(last):
            m = min(len(last), len(new))
            wrong = np.flatnonzero(last[:m] != new[:m])
            policy.observe(len(last), int(wrong[0]) if len(wrong) else m)

    def _learn(
        self, policy: Learns, shadows: list[tuple[int, np.ndarray, int]], before: int
    ) -> list[tuple[int, np.ndarray, int]]:
        """Tell a learning policy what the tokens since position ``before`` show of each
        whole draft.

        A draft made at position n0 is told token by token as the sequence
        grows past n0, the tokens it did not submit too, and settled at its
        first wrong token or its end (every append of a drafter with a policy
        comes here, so a waiting draft was told up to ``before``). Returns the
        drafts still waiting.
        """
        n, waiting, held, refusals = self._n, [], self._held, self._hears_refusals
        for n0, full, condition in shadows:
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
        return waiting

    def _refuse(self, pair: int, place: int) -> None:
        """The model refused a drafted token after a token (:func:`_pairs`) at ``place``."""
        refused = self._refused
        times, last = refused.pop(pair, (0, -1))  # put back newest: the oldest go first
        refused[pair] = (times + (place != last), place)
        if len(refused) > MAX_REFUSED:
            del refused[next(iter(refused))]

    def _require_started(self) -> None:
        if not self._started:
            raise NgramdraftError("call start(prompt_tokens) before drafting or accepting")


def _pairs(before: "ArrayLike", tokens: "ArrayLike") -> np.ndarray:
    """Each token with the one before it, as one int64 (token ids are int32 >= 0)."""
    return (np.asarray(before, dtype=np.int64) << 32) | np.asarray(tokens, dtype=np.int64)


def practice_tokens() -> np.ndarray:
    """2,800 tokens that take the kernels down their paths: noise, a run repeated 30
    times (drafts that hold), noise again."""
    rng = np.random.default_rng(0)
    noise = rng.integers(0, 200, 1200)
    return np.concatenate([noise, np.tile(np.arange(200, 240), 30), noise[:400]]).astype(np.int32)


def drive_drafter(drafter: Drafter, stream: np.ndarray) -> None:
    """A drafter's every call over ``stream`` (:func:`practice_tokens`): start, draft,
    accept (one token, many, so many that the context table grows), rewind, sync, finish."""
    drafter.start(stream[:50])
    for i in range(50, 120):
        drafter.draft()
        drafter.accept([int(stream[i])])
    drafter.accept(stream[120:140])
    drafter.rewind(5)
    drafter.sync(stream[:200])
    drafter.accept(stream[200:])
    drafter.finish()
    drafter.sync(stream[300:400])
    drafter.finish()


def uncopyable(drafter: object) -> InvalidParameterError:
    """The error of copying or pickling a drafter or a batch of them (``__getstate__``).

    A copy would share the original's arrays through the addresses in its kernel
    state, and read them after they are freed; unpickled elsewhere, any memory.
    """
    return InvalidParameterError(
        f"a {type(drafter).__name__} holds its arrays' addresses for its kernels and cannot "
        "be copied or pickled: make a new one (caches are shared by passing them to it)"
    )


_LOADED: set[str] = set()  # the rule sets whose kernels this process has loaded


def load_kernels(rules: str = "llamacpp") -> None:
    """Load the compiled kernels a Drafter of ``rules`` runs, once per process, on a
    throwaway drafter.

    numba loads each kernel at its first call, about half a second for a
    rule set's: a server or a one-shot ``generate`` would otherwise pay it
    inside its first request, after the prompt. The engine adapters call this
    as they are made, with the model's load. The throwaway drafter has no
    caches of the caller's, so nothing of its sequences is kept; the kernels
    only a static cache reaches load at its first use.
    """
    if rules not in _LOADED:
        drive_drafter(Drafter(rules=rules), practice_tokens())
        _LOADED.add(rules)
