"""SuffixBatch: many sequences by id, by the suffix rules (``BatchDrafter(rules="suffix")``).

The interface is :class:`~ngramdraft.BatchDrafter`'s, and the drafts are those
of one :class:`~ngramdraft.rulesets.suffix.drafter.SuffixDrafter` per sequence,
all sharing one :class:`~ngramdraft.caches.requests.RequestMemory` and one
corpus (:class:`~ngramdraft.caches.suffix_corpus.SuffixCorpus`), if given. A draft, an
accept or a sync of every sequence asked for is one kernel call (``rows.py``:
the rules' step for each sequence's state, taken by its address), over the
machine's threads from ``PARALLEL_FROM`` sequences on, as the llama.cpp rules'
batch; with a policy, which decides in Python how much of each draft to submit
and is told each sequence's tokens, each sequence is drafted and told by its
own call.
"""

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ...caches.requests import RequestMemory
from ...drafting.batch import (
    DONE,
    MISMATCH,
    NEED_ROOM,
    BatchDrafter,
    flatten_tokens,
    id_error,
    left_over,
    on_threads,
    repeated_ids,
    sync_arguments,
)
from ...drafting.drafter import MAX_DRAFT
from ...validation import check_int
from .drafter import SuffixDrafter
from .rows import (
    accept_rows,
    accept_rows_parallel,
    draft_rows,
    draft_rows_parallel,
    sync_rows,
    sync_rows_parallel,
)
from .state import STATE_WORDS

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


class SuffixBatch(BatchDrafter):
    """A :class:`~ngramdraft.BatchDrafter` by the suffix rules, over SuffixDrafters (see the
    module's doc); its parameters are SuffixDrafter's and ``max_seqs``."""

    def __init__(
        self,
        static: object = None,
        dynamic: RequestMemory | None = None,
        n_draft: int = 8,
        ngram_min: int = 1,
        ngram_max: int = 4,
        max_seqs: int = 256,
        *,
        rules: str = "suffix",
        **options: Any,
    ) -> None:
        self.max_seqs = check_int(max_seqs, "max_seqs", 1, 1 << 20)
        self.n_draft = check_int(n_draft, "n_draft", 1, MAX_DRAFT)
        first = SuffixDrafter(static, dynamic, n_draft, ngram_min, ngram_max, **options)
        self.static, self.dynamic, self.shared = first.static, first.dynamic, first.shared
        # A policy decides in Python what each draft submits: then each row is its own call.
        self._per_row = first.policy is not None
        earlier = first.shared or first.dynamic  # every row finishes into the same place
        self._make = lambda: SuffixDrafter(first.static, earlier, n_draft, **options)
        self._spare: list[SuffixDrafter] = [first]
        self._active: dict[Hashable, SuffixDrafter] = {}

    def _has_room(self) -> bool:
        return len(self._active) < self.max_seqs

    def draft(self, seq_ids: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray]:
        """(tokens, lengths): row i holds lengths[i] drafted tokens for seq_ids[i] (int32)."""
        drafters = self._drafters(seq_ids)
        out = np.zeros((len(drafters), self.n_draft), dtype=np.int32)
        lengths = np.zeros(len(drafters), dtype=np.int32)
        if self._per_row:
            for i, drafter in enumerate(drafters):
                d = drafter.draft()
                out[i, : len(d)] = d
                lengths[i] = len(d)
        elif drafters:
            if (damage := drafters[0].damage) is not None:
                raise damage
            with self.dynamic.lock:
                args = (_states(drafters), out, lengths)
                on_threads(len(drafters), draft_rows, draft_rows_parallel, *args)
        return out, lengths

    def accept(
        self,
        seq_ids: Sequence[Hashable],
        tokens: "Sequence[ArrayLike] | np.ndarray",
        lengths: "ArrayLike | None" = None,
    ) -> None:
        """Append each sequence's verified tokens, as BatchDrafter.accept."""
        drafters = self._drafters(seq_ids)
        flat, starts, ends = flatten_tokens(tokens, lengths, len(drafters))
        if self._per_row:
            for i, drafter in enumerate(drafters):
                drafter.accept(flat[starts[i] : ends[i]])
            return
        status = np.full(len(drafters), DONE, dtype=np.int64)
        with self.dynamic.lock:
            args = (_states(drafters), flat, starts, ends, status)
            on_threads(len(drafters), accept_rows, accept_rows_parallel, *args)
        for i in left_over(status):  # grown, then accepted alone
            drafters[i].finish_accept(flat[starts[i] : ends[i]])

    def sync(
        self,
        seq_ids: Sequence[Hashable],
        token_ids: np.ndarray,
        lengths: "ArrayLike",
        rows: "ArrayLike | None" = None,
    ) -> np.ndarray:
        """Follow sequences an engine hands over whole, as BatchDrafter.sync."""
        drafters = self._drafters(seq_ids)
        token_ids, lengths, rows = sync_arguments(len(drafters), token_ids, lengths, rows)
        status = np.full(len(drafters), DONE, dtype=np.int64)
        with self.dynamic.lock:  # per row, the kernel only compares; the drafters accept
            args = (_states(drafters), token_ids, rows, lengths, not self._per_row, status)
            on_threads(len(drafters), sync_rows, sync_rows_parallel, *args)
        for i in np.flatnonzero(status == (DONE if self._per_row else NEED_ROOM)):
            new = token_ids[rows[i], drafters[i].n_tokens : lengths[i]]
            if not self._per_row:  # grown, then accepted alone
                drafters[i].finish_accept(new)
            elif len(new):
                drafters[i].accept(new)
        return status == MISMATCH

    def _drafters(self, seq_ids: Sequence[Hashable]) -> list[SuffixDrafter]:
        try:
            drafters = [self._active[i] for i in seq_ids]
        except (KeyError, TypeError) as e:
            raise id_error(e) from None
        if len(set(map(id, drafters))) != len(drafters):
            raise repeated_ids()
        return drafters


def _states(drafters: list[SuffixDrafter]) -> np.ndarray:
    """The drafters' states as (address, length) pairs, what the batch kernels take."""
    states = np.empty(2 * len(drafters), dtype=np.int64)
    states[0::2] = [d.state_address for d in drafters]
    states[1::2] = STATE_WORDS
    return states
