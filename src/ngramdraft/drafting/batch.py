"""BatchDrafter: many sequences by id, one call per step, whatever the rule set.

A server drafts for every running sequence at each step. ``BatchDrafter(...)``
makes the batch of the rule set ``rules`` names (``drafting/rulesets.py``),
a subclass of this class; each rule set's batch runs its row kernels over
every sequence asked for in one call, over the machine's threads from
``PARALLEL_FROM`` sequences on, with the GIL released. Here: the protocol,
what every batch does alike (its sequences' drafters by id, spare drafters
reused, the calls that act on one sequence, the dynamic file's saves), the
checks every batch makes of its arguments, and the statuses every rule
set's row kernels return. A rule set's batch adds its kernels' calls
(``draft``, ``accept``, ``sync``) and where a sequence's state lives
(``_place``, ``_release``).
"""

import functools
import itertools
import threading
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numba
import numpy as np

from ..errors import InvalidParameterError, InvalidTokensError, UnknownSequenceError
from ..kernels.padded import first_bad_id
from ..validation import check_token_range, not_a_token, within
from .drafter import uncopyable
from .rulesets import rule_set

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

# Below this many sequences a batch's call runs on one thread: starting the
# others costs more than they save.
PARALLEL_FROM = 32

# A sequence's outcome in a batch's accept or sync (its row kernels' status):
# done; the sequence's buffer has no room for its new tokens (the caller grows
# it and accepts them); the engine's row is another sequence (left as it was).
# llama.cpp's rules' accepts also return ``position << 2 | table.NEED_SLOTS`` or
# ``NEED_POOL`` (1, 2): a table to grow; these stay clear of them.
DONE, NEED_ROOM, MISMATCH = -1, 3, 4


# The calls of a batch that read or write its sequences (every one but the constructor).
SERIALIZED = (
    "__len__",
    "__contains__",
    "add",
    "draft",
    "accept",
    "sync",
    "rewind",
    "finish",
    "flush",
    "tokens",
    "observe_pass",
)


def _one_at_a_time(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def call(self: "BatchDrafter", *args: Any, **kwargs: Any) -> Any:
        with self._calls:
            return method(self, *args, **kwargs)

    return call


class BatchDrafter:
    """Draft for many sequences by id, exactly as one :class:`~ngramdraft.Drafter` each would.

    Parameters are :class:`~ngramdraft.Drafter`'s, shared by every sequence
    (the caches, ``n_draft``, the rule set's own), and ``max_seqs``: at most
    that many sequences are active at once. ``BatchDrafter(rules="suffix")``
    is a BatchDrafter of the suffix rules, with the same methods; it also
    takes a ``policy``, which each sequence gets a copy of (its rows are
    then drafted one by one, the policy deciding in Python). llama.cpp's
    rules' batch drafts every sequence in one kernel call and takes none.

    ``add(seq_id, prompt)`` starts a sequence; ``draft(seq_ids)`` returns
    (tokens, lengths): row i holds lengths[i] drafted tokens for seq_ids[i];
    ``accept(seq_ids, tokens)`` appends each sequence's verified tokens;
    ``sync(seq_ids, token_ids, lengths, rows)`` follows sequences an engine
    hands over whole, in a 2-D token table (vLLM's), and returns where a row
    does not extend its sequence; ``rewind``, ``finish``, ``flush``,
    ``tokens`` and ``observe_pass`` act on one sequence as Drafter's do.
    Unknown or repeated ids, rewinding more than a sequence holds and more
    than ``max_seqs`` sequences are named errors. Several threads may call
    one batch (an engine's loop stepping it, a request handler finishing a
    cancelled request): its calls run one at a time.
    """

    max_seqs: int
    n_draft: int
    static: Any
    dynamic: Any
    shared: Any  # the dynamic role's file, saved under its lock (None: no file)
    _calls: threading.RLock
    _active: "dict[Hashable, Any]"  # seq_id -> its drafter (the rule set's Drafter)
    _spare: list[Any]  # finished drafters, started again by add()
    _make: Callable[[], Any]  # a new drafter for a sequence, sharing the batch's caches

    def __new__(cls, *args: Any, rules: str = "llamacpp", **options: Any) -> "BatchDrafter":
        if cls is BatchDrafter:  # the rule set's own class, whose __init__ Python then calls
            cls = rule_set(rules).BATCH
        batch = super().__new__(cls)
        batch._calls = threading.RLock()
        return batch

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A rule set's batch runs its calls one at a time: each thread's waits for the
        others'. Its kernels write the sequences' states and buffers, which a call may
        also replace (a sequence grown); two at once corrupted the process's memory."""
        super().__init_subclass__(**kwargs)
        for name in SERIALIZED:
            if name in vars(cls):
                setattr(cls, name, _one_at_a_time(vars(cls)[name]))

    def __getstate__(self) -> None:
        raise uncopyable(self)  # its sequences' kernel states hold addresses, as a Drafter's

    # What every rule set's batch does alike.

    @_one_at_a_time
    def __len__(self) -> int:
        """Sequences active."""
        return len(self._active)

    @_one_at_a_time
    def __contains__(self, seq_id: object) -> bool:
        """Whether sequence ``seq_id`` is active."""
        return seq_id in self._active

    @_one_at_a_time
    def add(self, seq_id: Hashable, prompt_tokens: "ArrayLike") -> None:
        """Start sequence ``seq_id`` with its prompt."""
        check_new_sequence(seq_id, self._active, self._has_room(), self.max_seqs)
        drafter = self._spare.pop() if self._spare else self._make()
        self._place(seq_id, drafter)
        try:
            drafter.start(prompt_tokens)
        except BaseException:
            self._release(seq_id)
            self._spare.append(drafter)
            raise
        self._active[seq_id] = drafter

    @_one_at_a_time
    def rewind(self, seq_id: Hashable, n: int) -> None:
        """Remove sequence ``seq_id``'s last n tokens, as :meth:`Drafter.rewind`."""
        self._drafter(seq_id).rewind(n)

    @_one_at_a_time
    def finish(self, seq_id: Hashable) -> None:
        """End sequence ``seq_id``, as :meth:`Drafter.finish` (its drafter is kept for the
        next add)."""
        drafter = self._drafter(seq_id)
        del self._active[seq_id]
        self._release(seq_id)
        self._spare.append(drafter)
        drafter.finish()

    @_one_at_a_time
    def flush(self) -> None:
        """Save what finished sequences added to a dynamic file and no save has written yet
        (no file: nothing)."""
        if self.shared is not None:
            self.shared.save()

    @_one_at_a_time
    def tokens(self, seq_id: Hashable) -> np.ndarray:
        """Sequence ``seq_id`` so far, a copy."""
        return self._drafter(seq_id).tokens

    @_one_at_a_time
    def observe_pass(self, seq_id: Hashable, n_tokens: int, seconds: float) -> None:
        """The engine's pass over ``n_tokens`` of sequence ``seq_id``'s tokens took ``seconds``,
        as :meth:`Drafter.observe_pass` (for a policy that learns pass costs)."""
        self._drafter(seq_id).observe_pass(n_tokens, seconds)

    def _drafter(self, seq_id: Hashable) -> Any:
        try:
            return self._active[seq_id]
        except (KeyError, TypeError) as e:
            raise id_error(e) from None

    # What each rule set's batch implements (tests/test_rulesets.py checks it does).

    def _has_room(self) -> bool:
        """Whether another sequence may be added."""
        raise NotImplementedError

    def _place(self, seq_id: Hashable, drafter: Any) -> None:
        """Give a sequence's drafter what it needs before it starts (a row of states)."""

    def _release(self, seq_id: Hashable) -> None:
        """Take back what :meth:`_place` gave a sequence that is gone."""

    def draft(self, seq_ids: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, lengths): row i holds lengths[i] drafted tokens for seq_ids[i] (int32)."""
        raise NotImplementedError

    def accept(
        self,
        seq_ids: Sequence[Hashable],
        tokens: "Sequence[ArrayLike] | np.ndarray",
        lengths: "ArrayLike | None" = None,
    ) -> None:
        """Append each sequence's verified tokens (any number per sequence).

        ``tokens`` is a list of token sequences, one per id; or a 2-D array
        whose row i holds seq_ids[i]'s tokens in its first ``lengths[i]``
        entries (as :meth:`draft` returns them).
        """
        raise NotImplementedError

    def sync(
        self,
        seq_ids: Sequence[Hashable],
        token_ids: np.ndarray,
        lengths: "ArrayLike",
        rows: "ArrayLike | None" = None,
    ) -> np.ndarray:
        """Follow sequences an engine hands over whole, as :meth:`Drafter.sync` does for one.

        ``token_ids`` is the engine's 2-D int32 token table: seq_ids[i]'s
        sequence is ``token_ids[rows[i], :lengths[i]]`` (rows default to
        0, 1, ...). Where that extends what the drafter holds, the new tokens
        are accepted. Returns a bool array, True where it does not (another
        sequence, an edited one, or a negative id): those are left as they
        were, for the caller to finish or match elsewhere.
        """
        raise NotImplementedError


def on_threads(
    n: int, kernel: Callable[..., None], parallel: Callable[..., None], *args: Any
) -> None:
    """Run a batch's kernel over n sequences: on this thread below PARALLEL_FROM, else its
    ``_parallel`` twin over the machine's threads."""
    if n >= PARALLEL_FROM:
        parallel(*args, numba.get_num_threads())
    else:
        kernel(*args)


def left_over(status: np.ndarray) -> list[int]:
    """The sequences a batch's accept left for Python (status >= 0: room to make), in order.

    A step usually leaves none, which one reduction tells: cheaper than finding them
    for the few sequences of a small server's step.
    """
    if status.max(initial=DONE) < 0:
        return []
    return np.flatnonzero(status >= 0).tolist()


def flatten_tokens(
    tokens: Any, lengths: "ArrayLike | None", n: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat int32 tokens, starts, ends): sequence i's are flat[starts[i]:ends[i]], checked.

    A 2-D table with lengths is read where it lies, row i's first lengths[i]
    entries, and what lies beyond them is never read (an engine's padding,
    -1 in vLLM's); a list of sequences is joined first.
    """
    if lengths is not None:
        table = np.asarray(tokens)
        lengths = int_array(lengths, "lengths", n)
        if table.ndim != 2 or table.shape[0] != n:
            raise InvalidTokensError(f"with lengths, tokens must be a 2-D array of {n} rows")
        width = table.shape[1]
        if not within(lengths, 0, width):
            raise InvalidTokensError(f"lengths must be 0 .. {width} (the rows' width)")
        _check_ids(table)
        # Checked as given (int64 ids past int32 must not wrap into range first); other
        # kinds as int64, where uint64 ids past int64 wrap negative and are caught.
        kind = table.dtype if table.dtype in (np.int32, np.int64) else np.int64
        flat = np.ascontiguousarray(table, dtype=kind).reshape(-1)
        starts = np.arange(n, dtype=np.int64) * width
        ends = starts + lengths
        bad = first_bad_id(flat, starts, ends)
        if bad >= 0:
            r, c = divmod(int(bad), width)
            why = f"row {r} holds lengths[{r}] = {lengths[r]}"
            raise not_a_token(f"tokens[{r}, {c}]", int(table[r, c]), why)
        return flat.astype(np.int32, copy=False), starts, ends  # padding may wrap: unread
    try:
        if len(tokens) != n:
            raise InvalidTokensError(f"got {len(tokens)} token sequences for {n} seq_ids")
        # Summed in Python: for the few sequences of a small server's step, numpy's
        # cumsum alone costs more than the accept's kernel.
        sums = itertools.accumulate(map(len, tokens), initial=0)
        offsets = np.fromiter(sums, dtype=np.int64, count=n + 1)
        joined = _joined(tokens) if n and type(tokens[0]) is np.ndarray else None
    except (TypeError, KeyError):  # an id where a sequence of ids belongs, or a mapping
        raise InvalidTokensError(
            f"tokens must hold one sequence of ids per seq_id (a list of {n} lists "
            "or arrays), or be a 2-D array with lengths"
        ) from None
    if joined is not None:
        flat = joined
    else:
        flat = np.array(list(itertools.chain.from_iterable(tokens)))
        flat = flat if flat.size else np.zeros(0, dtype=np.int64)
    if flat.ndim != 1 or len(flat) != offsets[n]:
        raise InvalidTokensError("each sequence's tokens must be a flat sequence of ids")
    _check_ids(flat)
    check_token_range(flat, "tokens")
    return np.ascontiguousarray(flat, dtype=np.int32), offsets[:-1], offsets[1:]


def _check_ids(arr: np.ndarray) -> None:
    if arr.dtype.kind not in "iu" or arr.dtype == np.bool_:
        raise InvalidTokensError(f"tokens must be integer ids, got dtype {arr.dtype}")


def _joined(arrays: Any) -> np.ndarray | None:
    """Arrays of ids joined in C, or None where they are not that (an empty list among
    them makes floats; joined one by one, it does not)."""
    try:
        flat = np.concatenate(arrays)
    except ValueError:
        return None
    return flat if flat.ndim == 1 and flat.dtype.kind in "iu" else None


def id_error(error: Exception) -> InvalidParameterError:
    """The named error of a batch's failed lookup of sequence ids: an unknown id (a
    KeyError), or ids that are not hashable values, or not given as a list."""
    if isinstance(error, KeyError):
        return UnknownSequenceError(f"unknown sequence id {error.args[0]!r}: add() it first")
    return InvalidParameterError(
        "sequence ids must be hashable values (ints, strings, tuples), and a list of them "
        "where a call takes several"
    )


def repeated_ids() -> InvalidParameterError:
    """The named error of a batch's call given one sequence id twice."""
    return InvalidParameterError("seq_ids lists a sequence twice: give each id once")


def check_new_sequence(seq_id: object, active: "dict[Any, Any]", room: bool, max_seqs: int) -> None:
    """A batch's add(): the id must be a new hashable value and a slot free (``room``)."""
    try:
        known = seq_id in active
    except TypeError as e:
        raise id_error(e) from None
    if known:
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
    rows = np.arange(n) if rows is None else int_array(rows, "rows", n)
    lengths = int_array(lengths, "lengths", n)
    if not within(rows, 0, len(token_ids) - 1):
        raise InvalidParameterError(f"rows must be 0 .. {len(token_ids) - 1}")
    if not within(lengths, 0, token_ids.shape[1]):
        raise InvalidParameterError(f"lengths must be 0 .. {token_ids.shape[1]}")
    return token_ids, lengths, rows


def int_array(values: Any, name: str, n: int) -> np.ndarray:
    """``values`` as n int64s, else InvalidParameterError (floats are not cut to ints)."""
    arr = np.asarray(values)
    if n == 0 and arr.shape == (0,):  # [] is float64 to numpy
        return np.zeros(0, dtype=np.int64)
    if arr.shape != (n,) or arr.dtype == np.bool_ or arr.dtype.kind not in "iu":
        raise InvalidParameterError(
            f"{name} must be {n} integers, got {arr.dtype} of shape {arr.shape}"
        )
    return arr.astype(np.int64, copy=False)
