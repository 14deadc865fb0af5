"""What every drafter shares, whatever its rules: a policy's bookkeeping, sync, batch tokens.

A drafter (``drafter.Drafter``, llama.cpp's rules; ``suffix.SuffixDrafter``,
the suffix rules) keeps one sequence and says how many tokens it holds
(``_n``), where they are (``_held``) and how to append (``_append``); this
class does the rest of what a policy needs, so both rule sets cut and learn
from their drafts the same way.
"""

import abc
import copy
import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numba
import numpy as np

from ..errors import InvalidParameterError, InvalidTokensError, NgramdraftError
from ..validation import as_tokens, check_token_range
from .policy import Learns, Policy, TimesPasses

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

# Below this many sequences a batch's call runs on one thread: starting the
# others costs more than they save.
PARALLEL_FROM = 32
MAX_SHADOWS = 64  # whole drafts a learning policy may wait on (each settles within n_draft tokens)

_NONE = np.zeros(0, dtype=np.int32)


def on_threads(
    n: int, kernel: Callable[..., None], parallel: Callable[..., None], *args: Any
) -> None:
    """Run a batch's kernel over n sequences: on this thread below PARALLEL_FROM, else its
    ``_parallel`` twin over the machine's threads."""
    if n >= PARALLEL_FROM:
        parallel(*args, numba.get_num_threads())
    else:
        kernel(*args)


class SequenceDrafter(abc.ABC):
    """One sequence at a time: start, draft, accept, finish (see Drafter for the protocol)."""

    _started: bool
    n_draft: int

    def _init_policy(self, policy: Policy | None) -> None:
        self._policy = None if policy is None else copy.deepcopy(policy)
        self._last = _NONE  # the last draft, while a policy waits to see it verified
        # Whole drafts (position, tokens) whose outcome a learning policy awaits.
        self._shadows: list[tuple[int, np.ndarray]] | None = (
            [] if isinstance(self._policy, Learns) else None
        )

    def __getstate__(self) -> None:
        # A copy would share the original's arrays through the addresses in its
        # state, and read them after they are freed; unpickled elsewhere, any memory.
        raise InvalidParameterError(
            f"a {type(self).__name__} holds its arrays' addresses for its kernels and cannot be "
            "copied or pickled: make a new one (caches are shared by passing them to it)"
        )

    @property
    @abc.abstractmethod
    def _n(self) -> int:
        """Tokens in the sequence."""

    @property
    @abc.abstractmethod
    def _held(self) -> np.ndarray:
        """The array whose first ``_n`` tokens are the sequence (not a copy)."""

    @abc.abstractmethod
    def _append(self, new: np.ndarray) -> None: ...

    @abc.abstractmethod
    def start(self, prompt_tokens: "ArrayLike") -> None: ...

    @abc.abstractmethod
    def finish(self) -> None: ...

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
        without costs); the engine adapters call it. Nothing else uses it.
        """
        if isinstance(self._policy, TimesPasses):
            self._policy.observe_pass(n_tokens, seconds)

    def _submitted(self, policy: Policy, full: np.ndarray) -> np.ndarray:
        """The part of a whole draft the policy submits (drafting whole costs microseconds)."""
        self._last = full[: policy.length_of(len(full))]
        if self._shadows is not None and len(full):
            if len(self._shadows) >= MAX_SHADOWS:  # drafts again and again, accepting nothing
                del self._shadows[0]
            self._shadows.append((self._n, full))
        return self._last.copy()

    def _forget_drafts(self) -> None:
        """Drop the drafts the policy waits to hear about."""
        self._last = _NONE
        if self._shadows is not None:
            self._shadows = []

    def _append_observed(self, policy: Policy, new: np.ndarray) -> None:
        """_append, telling the policy what became of its drafts."""
        self._observe(policy, new)
        self._append(new)
        if self._shadows and isinstance(policy, Learns):
            self._shadows = self._learn(policy, self._shadows)

    def _observe(self, policy: Policy, new: np.ndarray) -> None:
        """Tell the policy how much of the last draft the model accepted (new starts with it)."""
        last, self._last = self._last, _NONE
        if len(last):
            m = min(len(last), len(new))
            wrong = np.flatnonzero(last[:m] != new[:m])
            policy.observe(len(last), int(wrong[0]) if len(wrong) else m)

    def _learn(
        self, policy: Learns, shadows: list[tuple[int, np.ndarray]]
    ) -> list[tuple[int, np.ndarray]]:
        """Tell a learning policy how many leading tokens of each whole draft proved right.

        A draft made at position n0 is settled once the sequence shows its
        first wrong token, or all of it: the tokens it did not submit too.
        Returns the drafts still waiting.
        """
        n, waiting = self._n, []
        for n0, full in shadows:
            known = min(n - n0, len(full))
            wrong = np.flatnonzero(full[:known] != self._held[n0 : n0 + known])
            if len(wrong) or known == len(full):
                policy.learn(len(full), int(wrong[0]) if len(wrong) else known)
            else:
                waiting.append((n0, full))
        return waiting

    def _require_started(self) -> None:
        if not self._started:
            raise NgramdraftError("call start(prompt_tokens) before drafting or accepting")


def flatten_tokens(
    tokens: Any, lengths: "ArrayLike | None", n: int
) -> tuple[np.ndarray, np.ndarray]:
    """(flat int32 tokens, offsets[n + 1]) of per-sequence tokens, every id checked."""
    if lengths is not None:
        arr = np.asarray(tokens)
        lengths = np.asarray(lengths, dtype=np.int64)
        if arr.ndim != 2 or arr.shape[0] != n or lengths.shape != (n,):
            raise InvalidTokensError(
                f"with lengths, tokens must be a 2-D array of {n} rows and lengths {n} counts"
            )
        if n and (lengths.min() < 0 or lengths.max() > arr.shape[1]):
            raise InvalidTokensError(f"lengths must be 0 .. {arr.shape[1]} (the rows' width)")
        flat = arr[np.arange(arr.shape[1]) < lengths[:, None]]
    else:
        if len(tokens) != n:
            raise InvalidTokensError(f"got {len(tokens)} token sequences for {n} seq_ids")
        lengths = np.fromiter(map(len, tokens), dtype=np.int64, count=n)
        if n and all(type(t) is np.ndarray and t.ndim == 1 for t in tokens):
            flat = np.concatenate(tokens)  # arrays: joined in C, not element by element
        else:
            flat = np.array(list(itertools.chain.from_iterable(tokens)))
            flat = flat if flat.size else np.zeros(0, dtype=np.int64)
    if flat.dtype.kind not in "iu" or flat.dtype == np.bool_:
        raise InvalidTokensError(f"tokens must be integer ids, got dtype {flat.dtype}")
    check_token_range(flat, "tokens")
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return np.ascontiguousarray(flat, dtype=np.int32), offsets


def check_new_sequence(seq_id: object, active: "dict[Any, Any]", room: bool, max_seqs: int) -> None:
    """A batch's add(): the id must be new and a slot free (``room``)."""
    if seq_id in active:
        raise InvalidParameterError(
            f"sequence {seq_id!r} is already active: finish() it first, or use a new id"
        )
    if not room:
        raise InvalidParameterError(
            f"max_seqs={max_seqs} sequences are active: finish() one first, or "
            "create the BatchDrafter with a larger max_seqs"
        )


def sync_arguments(
    n: int, token_ids: Any, lengths: "ArrayLike", rows: "ArrayLike | None"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A batch's sync(): (token_ids, lengths, rows) checked for n sequences, as arrays."""
    token_ids = np.asarray(token_ids)
    if token_ids.ndim != 2 or token_ids.dtype != np.int32:
        raise InvalidTokensError(
            f"token_ids must be a 2-D int32 array, got {token_ids.ndim}-D {token_ids.dtype}"
        )
    token_ids = np.ascontiguousarray(token_ids)
    rows = np.arange(n) if rows is None else np.asarray(rows, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    if rows.shape != (n,) or lengths.shape != (n,):
        raise InvalidParameterError(f"rows and lengths must hold {n} values each")
    if n and (rows.min() < 0 or rows.max() >= len(token_ids)):
        raise InvalidParameterError(f"rows must be 0 .. {len(token_ids) - 1}")
    if n and (lengths.min() < 0 or lengths.max() > token_ids.shape[1]):
        raise InvalidParameterError(f"lengths must be 0 .. {token_ids.shape[1]}")
    return token_ids, lengths, rows
