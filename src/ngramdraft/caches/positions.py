"""PositionIndex: a token array that finds the longest earlier match of any suffix.

The storage of the suffix rules' sequence and earlier-requests roles
(``rules/suffix.py``): the tokens themselves plus the hash chains of
``kernels/chains.py`` at the n-gram sizes ``SIZES``. Appending files the new
positions; ``rewind`` unfiles them, exactly, in time proportional to the
tokens removed; a query costs the same at any length.

Memory, per token of capacity: 4 bytes of token, 4 per size of ``prev`` and
8 per size of ``head`` (twice the capacity, so a chain's head is rarely
shared), i.e. 40 bytes with three sizes. Capacity doubles as tokens arrive
(every position is refiled then, amortized over the doubling), so a
sequence of n tokens holds between 40n and 80n bytes.
"""

import numpy as np

from ..kernels.chains import file_positions, unfile_positions

SIZES = np.array([2, 4, 8], dtype=np.int64)
MAX_MATCH = 64  # tokens a match is measured back over: longer ones tie
MAX_CHAIN = 32  # candidates a query tries per n-gram size
INITIAL = 256


class PositionIndex:
    """Tokens (int32, -1 allowed as a separator) with their positions filed by n-gram."""

    def __init__(self, capacity: int = INITIAL) -> None:
        self.n = 0
        self._alloc(max(INITIAL, capacity))

    def _alloc(self, capacity: int) -> None:
        self.text = np.full(capacity, -1, dtype=np.int32)
        self.prev = np.full((len(SIZES), capacity), -1, dtype=np.int32)
        self.head = np.full((len(SIZES), 2 * capacity), -1, dtype=np.int32)

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
            size = len(self.text)
            while size < capacity:
                size *= 2
            self._alloc(size)
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
        fresh = PositionIndex(len(self.text))
        fresh.append(self.text[: self.n].copy())
        assert fresh.text.shape == self.text.shape
        assert np.array_equal(fresh.head, self.head), "a chain's head differs from a fresh filing"
        for lv, m in enumerate(SIZES):
            filed = slice(int(m) - 1, self.n)
            assert np.array_equal(fresh.prev[lv, filed], self.prev[lv, filed])
