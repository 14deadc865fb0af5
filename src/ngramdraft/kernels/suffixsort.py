"""Sorting a corpus's suffixes to a fixed depth, and merging sorted shards.

The order (``docs/format.md``, the suffix kind): suffixes compare token by
token over at most ``DEPTH`` tokens, a separator (-1) or the corpus's end
ending the comparison as a token below every other, and suffixes equal that
far are ordered by position. Nothing past the depth decides anything, so a
shard sorted with ``DEPTH`` tokens of the next shard in view sorts its
suffixes exactly as the whole corpus would, and merging shards gives the
same bytes as sorting the whole at once: a one-machine build in bounded
memory and a Dask build are the same file. Searching needs no more: a
pattern of up to ``DEPTH`` tokens occupies one contiguous range.

:func:`sort_shard` sorts with libdivsufsort (``pydivsufsort``), whose full
order refines this one, then puts each run of suffixes equal to the depth
in position order. We wrote prefix doubling first; libdivsufsort measured
3.5x faster on the same tokens, at less memory (``benchmarks/corpus_index.py``).
"""

import numpy as np
from numba import njit
from pydivsufsort import divsufsort

DEPTH = 64


def sort_shard(tokens: np.ndarray, count: int) -> np.ndarray:
    """Positions 0..count-1 of ``tokens`` (int32; then ``DEPTH`` tokens of what follows, or
    fewer at the corpus's end) in suffix order, as int64."""
    if len(tokens) == 0:
        return np.zeros(0, dtype=np.int64)
    # It sorts signed ids as unsigned ones with the sign bit flipped: the separator
    # -1 still sorts below every id, and so does the end.
    order = divsufsort(np.ascontiguousarray(tokens, dtype=np.int32)).astype(np.int64)
    order = order[order < count]
    _by_position_when_equal(tokens, order)
    return order


@njit(cache=True, nogil=True, inline="always")
def _compare(text, a, b):
    """-1, 0 or 1 as the suffix at a sorts before, with, or after the one at b, to the depth."""
    n = text.shape[0]
    for d in range(DEPTH):
        x = text[a + d] if a + d < n else -1
        y = text[b + d] if b + d < n else -1
        if x != y:
            return -1 if x < y else 1
        if x < 0:
            break
    return 0


@njit(cache=True, nogil=True, inline="always")
def _before(text, a, b):
    """Whether the suffix at a sorts before the one at b (both < len(text))."""
    c = _compare(text, a, b)
    return c < 0 or (c == 0 and a < b)


@njit(cache=True, nogil=True)
def _by_position_when_equal(text, order):
    """Sort, by position, each run of ``order`` (in a finer suffix order) equal to the depth."""
    i, n = 0, order.shape[0]
    while i < n:
        j = i + 1
        while j < n and _compare(text, order[j - 1], order[j]) == 0:
            j += 1
        if j - i > 1:
            order[i:j] = np.sort(order[i:j])
        i = j


@njit(cache=True, nogil=True)
def _sift(text, sa, cursor, heap, size, i):
    while True:
        small, left = i, 2 * i + 1
        for c in (left, left + 1):
            if c < size and _before(text, sa[cursor[heap[c]]], sa[cursor[heap[small]]]):
                small = c
        if small == i:
            return
        heap[i], heap[small] = heap[small], heap[i]
        i = small


@njit(cache=True, nogil=True)
def merge_block(text, sa, cursor, ends, heap, state, out):
    """Fill ``out`` with the next suffixes of the shards' sorted runs, merged; returns the count.

    ``sa`` holds the shards' runs one after another (global positions),
    ``cursor``/``ends`` each run's next index and end; ``heap`` (one slot
    per run) and ``state`` ([size, 0 before the first call]) carry the
    merge from one call to the next.
    """
    if state[1] == 0:
        state[1] = 1
        size = 0
        for r in range(cursor.shape[0]):
            if cursor[r] < ends[r]:
                heap[size] = r
                size += 1
        state[0] = size
        for i in range(size // 2 - 1, -1, -1):
            _sift(text, sa, cursor, heap, size, i)
    size = state[0]
    filled = 0
    while filled < out.shape[0] and size > 0:
        r = heap[0]
        out[filled] = sa[cursor[r]]
        filled += 1
        cursor[r] += 1
        if cursor[r] == ends[r]:
            size -= 1
            heap[0] = heap[size]
        _sift(text, sa, cursor, heap, size, 0)
    state[0] = size
    return filled


@njit(cache=True, nogil=True)
def first_out_of_order(text, sa):
    """The first i whose suffix does not sort before the next one's, or -1 (positions in bounds)."""
    for i in range(sa.shape[0] - 1):
        if not _before(text, sa[i], sa[i + 1]):
            return i
    return -1
