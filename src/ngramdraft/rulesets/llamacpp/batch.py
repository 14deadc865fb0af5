"""LlamaCppBatch: many sequences by llama.cpp's rules, drafts identical to one drafter each.

Each sequence is a :class:`~ngramdraft.rulesets.llamacpp.drafter.LlamaCppDrafter`
whose kernel state is one row of a shared table of states (``state.py``),
so one numba call (``rows.py``) drafts for all of them and one accepts every
sequence's new tokens. Sequences share the static and the dynamic caches;
finishing a sequence merges it into the dynamic cache (and a dynamic path
is saved under its lock, see :mod:`ngramdraft.caches.shared`).
"""

import os
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from ...build.static import as_static
from ...caches.shared import LOCK_TIMEOUT, SharedDynamicFile, dynamic_role
from ...drafting.batch import (
    MISMATCH,
    BatchDrafter,
    flatten_tokens,
    id_error,
    left_over,
    on_threads,
    repeated_ids,
    sync_arguments,
)
from ...drafting.drafter import MAX_DRAFT, damaged
from ...errors import InvalidParameterError
from ...kernels.frozen import CORRUPT
from ...validation import check_int, check_ngram_range
from .drafter import LlamaCppDrafter
from .rows import (
    accept_rows,
    accept_rows_parallel,
    draft_rows,
    draft_rows_parallel,
    sync_rows,
    sync_rows_parallel,
)
from .state import STATE_WORDS, N

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ...caches.base import Cache
    from ...caches.ngram import NgramCache
    from ...caches.static import StaticCache


class LlamaCppBatch(BatchDrafter):
    """A :class:`~ngramdraft.BatchDrafter` by llama.cpp's rules (the default).

    ``static``, ``dynamic``, ``n_draft``, ``ngram_min``, ``ngram_max``,
    ``tokenizer``, ``lock_timeout``, ``save_every`` and ``max_dynamic_ngrams``
    are :class:`~ngramdraft.Drafter`'s, shared by every sequence; ``policy``
    must be None (every draft is submitted whole, as llama.cpp's).
    """

    def __init__(
        self,
        static: "StaticCache | Cache | str | os.PathLike[str] | None" = None,
        dynamic: "NgramCache | Cache | SharedDynamicFile | str | os.PathLike[str] | None" = None,
        n_draft: int = 8,
        ngram_min: int = 1,
        ngram_max: int = 4,
        max_seqs: int = 256,
        *,
        tokenizer: object = None,
        lock_timeout: float = LOCK_TIMEOUT,
        save_every: float = 0.0,
        max_dynamic_ngrams: int | None = None,
        policy: object = None,
        rules: str = "llamacpp",
    ) -> None:
        if policy is not None:
            raise InvalidParameterError(
                "BatchDrafter(rules='llamacpp') takes no policy: its kernels draft every "
                "sequence in one call, whole as llama.cpp does; give the policy to one Drafter "
                "per sequence, or to BatchDrafter(rules='suffix')"
            )
        self.max_seqs = check_int(max_seqs, "max_seqs", 1, 1 << 20)
        check_int(n_draft, "n_draft", 1, MAX_DRAFT)
        check_ngram_range(ngram_min, ngram_max)
        self.static = None if static is None else as_static(static, tokenizer=tokenizer)
        self.shared, self.dynamic = dynamic_role(
            dynamic, lock_timeout=lock_timeout, max_ngrams=max_dynamic_ngrams, save_every=save_every
        )
        # Every sequence's drafter shares the file (saves merge under its lock)
        # or, without one, the in-memory cache.
        shared_dynamic = self.shared or self.dynamic
        static_role = self.static
        self._make = lambda: LlamaCppDrafter(
            static_role, shared_dynamic, n_draft, ngram_min, ngram_max
        )
        self.n_draft = n_draft
        self._states = np.zeros((self.max_seqs, STATE_WORDS), dtype=np.int64)
        self._free = list(range(self.max_seqs - 1, -1, -1))
        self._active: dict[Hashable, LlamaCppDrafter] = {}
        self._row_of: dict[Hashable, int] = {}  # each active sequence's row of states
        self._spare: list[LlamaCppDrafter] = []
        # The rows of the last ids asked for: a server drafts and accepts the same
        # running sequences step after step, and an id's row changes only at add/finish.
        self._known: tuple[tuple[Hashable, ...], np.ndarray] | None = None

    def _has_room(self) -> bool:
        return bool(self._free)

    def _place(self, seq_id: Hashable, drafter: LlamaCppDrafter) -> None:
        """A free row of the states' table: the drafter's kernel state from now on."""
        row = self._free.pop()
        self._row_of[seq_id] = row
        self._known = None
        drafter.use_state(self._states[row])

    def _release(self, seq_id: Hashable) -> None:
        self._free.append(self._row_of.pop(seq_id))
        self._known = None

    def draft(self, seq_ids: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, lengths): row i holds lengths[i] drafted tokens for seq_ids[i] (int32)."""
        rows = self._rows(seq_ids)
        out = np.zeros((len(rows), self.n_draft), dtype=np.int32)
        lengths = np.zeros(len(rows), dtype=np.int32)
        with self.dynamic.lock:  # no merge from another thread while the kernels read it
            on_threads(len(rows), draft_rows, draft_rows_parallel, self._states, rows, out, lengths)
        if len(rows) and (lengths.min() == CORRUPT or self._damaged()):
            raise damaged(self.static)
        return out, lengths

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
        rows = self._rows(seq_ids)
        flat, starts, ends = flatten_tokens(tokens, lengths, len(rows))
        status = np.empty(len(rows), dtype=np.int64)
        args = (self._states, rows, flat, starts, ends, status)
        on_threads(len(rows), accept_rows, accept_rows_parallel, *args)
        self._grow_and_go_on(seq_ids, status, lambda i: flat[starts[i] : ends[i]])

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
        ids = self._rows(seq_ids)
        token_ids, lengths, rows = sync_arguments(len(ids), token_ids, lengths, rows)
        status = np.empty(len(ids), dtype=np.int64)
        args = (self._states, ids, token_ids, rows, lengths, status)
        on_threads(len(ids), sync_rows, sync_rows_parallel, *args)
        mismatch = status == MISMATCH
        status[mismatch] = -1

        def new_tokens(i: int) -> np.ndarray:
            return token_ids[rows[i], self._states[ids[i], N] : lengths[i]]

        self._grow_and_go_on(seq_ids, status, new_tokens)
        return mismatch

    def _grow_and_go_on(
        self,
        seq_ids: Sequence[Hashable],
        status: np.ndarray,
        new_tokens: Callable[[int], np.ndarray],
    ) -> None:
        """Finish the accepts that stopped for room: a full sequence or context table."""
        for i in left_over(status):
            self._active[seq_ids[i]].finish_accept(new_tokens(i), int(status[i]))

    def _rows(self, seq_ids: Sequence[Hashable]) -> np.ndarray:
        try:
            ids = tuple(seq_ids)
            if self._known is not None and self._known[0] == ids:
                return self._known[1]
            rows = np.fromiter((self._row_of[i] for i in ids), dtype=np.int64, count=len(ids))
        except (KeyError, TypeError, ValueError) as e:  # ValueError: an array among the ids
            raise id_error(e) from None
        if len(set(rows.tolist())) != len(rows):
            raise repeated_ids()
        self._known = (ids, rows)
        return rows

    def _damaged(self) -> bool:
        return self.static is not None and self.static.prefault().damage is not None
