"""Drafter: the per-sequence object a decoding loop talks to, whatever its rule set.

A drafter keeps one sequence and says how many tokens it holds (``_n``),
where they are (``_held``) and how to append (``_append``); this class does
the rest of the protocol (sync, the tokens, saving, a damaged file's error)
and hands a policy's bookkeeping the sequence (``submitting.py``), so that
every rule set cuts and learns from its drafts the same way. The rule sets'
drafters (``rulesets/<name>/drafter.py``) subclass it; ``Drafter(rules=...)``
makes the one ``drafting/rulesets.py`` names.
"""

from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..errors import CorruptFileError, InvalidParameterError, NgramdraftError
from ..validation import as_tokens
from .policy import IN_STEP, Policy, TimesPasses, check_pass
from .rulesets import rule_set
from .submitting import Submitting

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

MAX_DRAFT = 4096  # the longest draft any rule set makes
REPLY_ROOM = 256  # tokens a new sequence has room for past its prompt before its buffers grow


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
    shared: Any  # the dynamic role's file, saved under its lock (None: no file)
    n_draft: int
    _started: bool
    _warmup: Any  # the static role's background page-in and check (caches/warmup.py)

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
        self._submitting = None if policy is None else Submitting(policy)
        self._policy = None if self._submitting is None else self._submitting.policy

    def __getstate__(self) -> None:
        raise uncopyable(self)

    def flush(self) -> None:
        """Save what finished sequences added to a dynamic file and no save has written yet
        (no file: nothing)."""
        if self.shared is not None:
            self.shared.save()

    @property
    def damage(self) -> Exception | None:
        """What the static role's background check found wrong with its file, if anything."""
        return self._warmup.damage

    def _begin(self, prompt: np.ndarray) -> None:
        """start()'s end, the sequence emptied: the prompt appended, the policy told."""
        self._append(prompt)
        self._started = True
        if self._submitting is not None:
            self._submitting.start(self.n_draft)

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

    # What the rule sets' drafters call where they have a policy (drafting/submitting.py).

    def _submitted(
        self, policy: Policy, full: np.ndarray, origin: int = IN_STEP, agreed: int = -1
    ) -> np.ndarray:
        """The part of a whole draft the policy submits; ``origin``: where the rules drew it
        from (HearsOrigin); ``agreed``: the tokens its source has agreed on, if it is a
        copy (HearsAgreement; -1: not a copy)."""
        return cast(Submitting, self._submitting).cut(full, origin, self._held, self._n, agreed)

    def _append_observed(self, policy: Policy, new: np.ndarray) -> None:
        """_append, telling the policy what became of its drafts."""
        submitting = cast(Submitting, self._submitting)
        submitting.observe(new)
        self._append(new)
        submitting.learn(self._held, self._n, self._n - len(new))

    def _forget_drafts(self) -> None:
        """Drop the drafts the policy waits to hear about (the sequence went back)."""
        if self._submitting is not None:
            self._submitting.forget()

    def _require_started(self) -> None:
        if not self._started:
            raise NgramdraftError("call start(prompt_tokens) before drafting or accepting")


def damaged(static: Any) -> CorruptFileError:
    """The error of drafting from a damaged static cache, once its background check has
    run (a checksum names the damage better, and is raised, if it sees it)."""
    if static is not None:
        static.prefault().wait()
    return CorruptFileError(
        f"{getattr(static, 'path', None)}: the static cache is damaged "
        "(run `ngramdraft inspect --verify`)"
    )


def uncopyable(drafter: object) -> InvalidParameterError:
    """The error of copying or pickling a drafter or a batch of them (``__getstate__``).

    A copy would share the original's arrays through the addresses in its kernel
    state, and read them after they are freed; unpickled elsewhere, any memory.
    """
    return InvalidParameterError(
        f"a {type(drafter).__name__} holds its arrays' addresses for its kernels and cannot "
        "be copied or pickled: make a new one (caches are shared by passing them to it)"
    )
