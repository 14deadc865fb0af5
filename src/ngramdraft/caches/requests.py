"""RequestMemory: earlier requests, the suffix rules' dynamic role, within a token budget.

Finished sequences are kept back to back, each followed by a -1 separator,
in one :class:`~ngramdraft.caches.positions.PositionIndex`, so a query finds
the longest match of the current sequence's end in any of them. Past
``max_tokens`` the oldest sequences go first: the index is rebuilt from the
newest that fill half the budget, so a rebuild's cost is spread over at
least half a budget of added tokens. One memory may be shared by any number
of drafters and threads: ``lock`` is held while it changes and while a
drafter's kernel reads it.
"""

import threading

import numpy as np

from ..validation import as_tokens, check_int
from .positions import PositionIndex

MAX_TOKENS = 1 << 20  # the default budget: at most 80 MiB of index (positions.py)


class RequestMemory:
    """Earlier requests' tokens, searchable by the suffix rules (see the module's doc)."""

    role = "dynamic"

    def __init__(self, max_tokens: int = MAX_TOKENS) -> None:
        self.max_tokens = check_int(max_tokens, "max_tokens", 2)
        self.lock = threading.Lock()
        self.index = PositionIndex()
        self.max_token = -1

    def __len__(self) -> int:
        """Tokens held, separators included."""
        return self.index.n

    def add(self, tokens: "np.ndarray | list[int]") -> None:
        """Remember one finished sequence (its last max_tokens - 1 tokens)."""
        seq = as_tokens(tokens, "tokens")[-(self.max_tokens - 1) :]
        if len(seq) == 0:
            return
        with self.lock:
            if self.index.n + len(seq) + 1 > self.max_tokens:
                self._evict(self.max_tokens // 2 - len(seq) - 1)
            self.index.append(np.append(seq, np.int32(-1)))
            self.max_token = max(self.max_token, int(seq.max()))

    def _evict(self, keep: int) -> None:
        """Keep only the newest whole sequences that fit in ``keep`` tokens."""
        held = self.index.tokens
        need = len(held) - keep  # tokens to drop, at least
        if need <= 0:
            return
        ends = np.flatnonzero(held == -1)  # each sequence ends with its separator
        at = np.searchsorted(ends, need - 1)  # the first end at or past need
        cut = int(ends[at]) + 1 if at < len(ends) else len(held)
        kept = held[cut:].copy()
        self.index = PositionIndex(len(kept) + 1)
        self.index.append(kept)
        self.max_token = int(kept.max(initial=-1))
