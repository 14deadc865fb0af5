"""A suffix file's n-gram index: where the suffixes of each frequent 2-gram and 3-gram lie.

The corpus search (``kernels/suffixsearch.py``) probes a length by a binary
search among the suffixes that start with the probe's first token: 17
levels for a bucket of 100,000, each waiting for two cache misses (the
position, then the corpus at it). The index hands it the range of the
probe's first three tokens (or two) instead, so only the levels below that
range remain. It holds every 2-gram and 3-gram (without a separator) that
starts at least ``MIN_COUNT`` suffixes; rarer ones are cheap to search for
and would make the table several times larger. Measured on the 541 MB
corpus: 1.6 million n-grams at 16 (64 MiB), 0.41 million at 64 (16 MiB).

The layout (``docs/format.md``, the suffix kind's ``grams``): ``slots``
rows of two int64, ``slots`` a power of two at least twice the n-grams
held (zero rows: no index). A row is empty (key 0) or holds an n-gram's
``key`` and its range, ``lo | hi << 32``. An n-gram (a, b, c), c = -1 for a
2-gram, is keyed ``(a + 1) << 42 | (b + 1) << 21 | (c + 1)``, so ids must be
below ``2**21 - 1`` (a corpus with larger ids has no index). Its row is the
first empty one from ``slot(key)`` on (linear probing), 2-grams inserted
before 3-grams, each in suffix order; an n-gram that would land more than
``MAX_PROBE`` rows on is left out, so a lookup reads at most that many.

A lookup bounds what it reads, so a damaged index narrows a search wrongly
(a wrong draft), never outside the suffix array.
"""

import numpy as np
from numba import njit

from .hashing import mix64

MIN_COUNT = 64
MAX_PROBE = 64
ID_BITS = 21
MAX_ID = (1 << ID_BITS) - 2  # ids above it do not fit a key
GRAMS = (2, 3)  # the lengths indexed, in the order they are inserted (the rows of _runs)


@njit(cache=True, nogil=True, inline="always")
def key(a, b, c):
    """An n-gram's key: (a, b) with c = -1, or (a, b, c); never 0."""
    # int64 first: a token read from an int32 array would shift out of its 32 bits in
    # Python (a coverage run), where numba widens it.
    a, b, c = np.int64(a), np.int64(b), np.int64(c)
    return ((a + 1) << (2 * ID_BITS)) | ((b + 1) << ID_BITS) | (c + 1)


@njit(cache=True, nogil=True, inline="always")
def slot(k, mask):
    """Where a key's probing starts: splitmix64's finalizer, masked."""
    return np.int64(mix64(np.uint64(k)) & np.uint64(mask))


@njit(cache=True, nogil=True, inline="always")
def lookup(grams, n, a, b, c):
    """(lo, hi), bounded to [0, n]: the suffixes starting with (a, b[, c]) are in sa[lo:hi];
    (-1, -1) if the index does not hold it."""
    slots = grams.shape[0]
    if slots == 0 or max(a, b, c) > MAX_ID:
        return -1, -1
    k, mask = key(a, b, c), slots - 1
    s = slot(k, mask)
    for _ in range(MAX_PROBE):
        found = grams[s, 0]
        if found == k:
            v = grams[s, 1]
            lo = min(max(v & 0xFFFFFFFF, 0), n)
            return lo, min(max(v >> 32, lo), n)
        if found == 0:
            break
        s = (s + 1) & mask
    return -1, -1


@njit(cache=True, nogil=True)
def _runs(text, sa, out):
    """The ranges of sa whose suffixes start with one 2-gram (out[0]) or 3-gram (out[1]),
    no separator in it, held by at least MIN_COUNT of them, in order, as rows (lo, hi);
    returns how many of each. One pass: each suffix's common prefix with the one before."""
    n = sa.shape[0]
    k = np.zeros(2, dtype=np.int64)
    start = np.zeros(2, dtype=np.int64)
    for i in range(1, n + 1):
        common = 0
        if i < n:
            p, q = sa[i - 1], sa[i]
            while common < 3 and p + common < n and q + common < n:
                x = text[p + common]
                if x < 0 or x != text[q + common]:
                    break
                common += 1
        for j in range(2):  # a run of two or more holds a whole m-gram, no separator in it
            if common < j + 2:
                if i - start[j] >= MIN_COUNT:
                    out[j, k[j], 0], out[j, k[j], 1] = start[j], i
                    k[j] += 1
                start[j] = i
    return k


@njit(cache=True, nogil=True)
def _insert(grams, text, sa, runs, m):
    mask = grams.shape[0] - 1
    for r in range(runs.shape[0]):
        lo, hi = runs[r, 0], runs[r, 1]
        p = sa[lo]
        k = key(text[p], text[p + 1], text[p + 2] if m == 3 else -1)
        s = slot(k, mask)
        for _ in range(MAX_PROBE):
            if grams[s, 0] == 0:
                grams[s, 0], grams[s, 1] = k, lo | (hi << 32)
                break
            s = (s + 1) & mask


def build(text: np.ndarray, sa: np.ndarray, max_token: int) -> np.ndarray:
    """The index of a corpus (its tokens and their suffix array, in suffix order, checked),
    an int64 array of (slots, 2); no rows if ids exceed MAX_ID or nothing is frequent enough.

    Memory: the ranges found, 16 bytes each (at most n / MIN_COUNT of a length), then the table.
    """
    if max_token > MAX_ID or len(sa) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    out = np.zeros((2, len(sa) // MIN_COUNT + 1, 2), dtype=np.int64)
    k = _runs(text, sa, out)
    found = [out[j, : k[j]] for j in range(2)]
    held = int(k.sum())
    if held == 0:
        return np.zeros((0, 2), dtype=np.int64)
    grams = np.zeros((1 << (2 * held - 1).bit_length(), 2), dtype=np.int64)
    for m, runs in zip(GRAMS, found, strict=True):
        _insert(grams, text, sa, runs, m)
    return grams
