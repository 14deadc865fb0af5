"""PositionIndex: a token array that finds the longest earlier match of any suffix.

The storage of the suffix rules' sequence and earlier-requests roles
(``rulesets/suffix/step.py``): the tokens themselves plus the hash chains of
``kernels/chains.py`` at the n-gram sizes ``SIZES``. Appending files the new
positions; ``rewind`` unfiles them, exactly, in time proportional to the
tokens removed; a query costs the same at any length.

Kernels take the index by its ``handle`` (``kernels/handles.py``): an int64
array of the arrays' addresses and sizes and the count ``n``, which the
index rewrites whenever it replaces its arrays, so one address stays valid
for the index's life.

Memory, per token of capacity: 4 bytes of token, 4 per size of ``prev`` and
8 per size of ``head`` (twice the capacity, so a chain's head is rarely
shared), i.e. 40 bytes with three sizes. Capacity doubles as tokens arrive
(every position is refiled then, amortized over the doubling), so a
sequence of n tokens holds between 40n and 80n bytes.
"""

import numpy as np

from ..kernels.chains import MAX_CHAIN, MAX_MATCH, file_positions, unfile_positions
from ..kernels.handles import POSITIONS_N, POSITIONS_WORDS, SIZES, positions_handle

__all__ = ["MAX_CHAIN", "MAX_MATCH", "SIZES", "PositionIndex"]
INITIAL = 256


class PositionIndex:
    """Tokens (int32, -1 allowed as a separator) with their positions filed by n-gram."""

    def __init__(self, capacity: int = INITIAL) -> None:
        self.handle = np.zeros(POSITIONS_WORDS, dtype=np.int64)
        self._alloc(max(INITIAL, capacity))

    @property
    def n(self) -> int:
        """Tokens held (kept in the handle, where kernels read and advance it)."""
        return int(self.handle[POSITIONS_N])

    @n.setter
    def n(self, value: int) -> None:
        self.handle[POSITIONS_N] = value

    def _alloc(self, capacity: int) -> None:
        # A power of two: the chains' hashes are reduced by a mask of head's width; any
        # other width leaves bits out of the mask, and chains collide (and queries, capped
        # at MAX_CHAIN candidates, miss matches).
        capacity = 1 << (capacity - 1).bit_length()
        self.text = np.full(capacity, -1, dtype=np.int32)
        self.prev = np.full((len(SIZES), capacity), -1, dtype=np.int32)
        self.head = np.full((len(SIZES), 2 * capacity), -1, dtype=np.int32)
        positions_handle(self.text, self.prev, self.head, self.handle)

    @classmethod
    def of(cls, tokens: np.ndarray, capacity: int = 0) -> "PositionIndex":
        """A new index holding exactly ``tokens`` (checked int32), with room for ``capacity``."""
        index = cls(max(len(tokens), capacity))
        index.append(tokens)
        return index

    def take(self, other: "PositionIndex") -> None:
        """Hold what ``other`` holds, in its arrays (``other`` is spent); the handle stays.

        Building ``other`` is the slow part and needs no lock; taking it is a
        swap of arrays, so drafters that share this index wait only for that.
        """
        self.text, self.prev, self.head = other.text, other.prev, other.head
        positions_handle(self.text, self.prev, self.head, self.handle)
        self.n = other.n

    @property
    def tokens(self) -> np.ndarray:
        """The tokens held (a view: valid until the next append)."""
        return self.text[: self.n]

    def clear(self) -> None:
        """Forget every token (the arrays are kept for the next sequence)."""
        unfile_positions(self.text, SIZES, self.prev, self.head, 0, self.n)
        self.n = 0

    def reserve(self, capacity: int) -> None:
        """Room for ``capacity`` tokens without a refile."""
        if capacity > len(self.text):
            keep = self.text[: self.n].copy()
            self._alloc(capacity)
            self.text[: len(keep)] = keep
            file_positions(self.text, SIZES, self.prev, self.head, 0, self.n)

    def append(self, tokens: np.ndarray) -> None:
        """Add tokens (checked int32) at the end and file their positions."""
        n = self.n
        self.reserve(n + len(tokens))
        self.text[n : n + len(tokens)] = tokens
        file_positions(self.text, SIZES, self.prev, self.head, n, n + len(tokens))
        self.n = n + len(tokens)

    def rewind(self, k: int) -> None:
        """Remove the last ``k`` tokens (0 <= k <= n) as if never appended."""
        unfile_positions(self.text, SIZES, self.prev, self.head, self.n - k, self.n)
        self.n -= k

    def _check(self) -> None:
        """Invariants (tests call this after every mutation): chains equal a fresh filing."""
        width = self.head.shape[1]
        assert width & (width - 1) == 0, "head's width is not a power of two"
        fresh = PositionIndex(len(self.text))
        fresh.append(self.text[: self.n].copy())
        assert fresh.text.shape == self.text.shape
        assert np.array_equal(fresh.head, self.head), "a chain's head differs from a fresh filing"
        for lv, m in enumerate(SIZES):
            filed = slice(int(m) - 1, self.n)
            assert np.array_equal(fresh.prev[lv, filed], self.prev[lv, filed])
