"""Hash chains of positions: the longest earlier match of a sequence's suffix, in bounded time.

The structure of LZ77 compressors (zlib's ``head``/``prev``), kept at a few
n-gram sizes at once. For each size ``m`` in ``sizes`` (ascending), every
position ``i`` of a token array ``text`` with ``i + 1 >= m`` is filed under
the hash of the m-gram ending at ``i``: ``head[l, h]`` is the latest such
position, ``prev[l, i]`` the one before it with the same hash (-1: none).
Positions are filed in increasing order and removed in decreasing order
(a rewind), so removing ``i`` is ``head[l, h] = prev[l, i]``, exactly.

A query walks the chain of the pattern's last m-gram from the largest size
down, at most ``max_chain`` candidates per size, and measures each
candidate's match backwards up to ``max_match`` tokens; the first size with
a verified candidate decides (every match it finds is at least m long, so
longer than any a smaller size could add). Among the longest, the
candidate whose continuation is nearest ``near`` wins, else the latest.
Cost per query: at most ``len(sizes) * max_chain * max_match`` token
comparisons, whatever the text's length.

Filing a long run reads a chain head per position and size, each a cache
miss in a table larger than the caches: blocks of ``PREFETCH_BLOCK``
positions prefetch their heads before filing them in order, so that the
misses overlap (the chains are as one-by-one filing leaves them).

Worked example, sizes (2,), text ``5 6 7 5 6`` (positions 0..4): position 1
is filed under h(5 6), 2 under h(6 7), 3 under h(7 5), 4 under h(5 6) with
``prev[0, 4] = 1``. The pattern ``... 5 6`` ending at 4 walks 4 (itself,
skipped by ``limit``), then 1: a match of 2 tokens, continuation at 2 (``7``).

``text`` may hold -1 as a separator (earlier requests, back to back): no
pattern holds -1, so no match crosses one.
"""

import numpy as np
from numba import njit

from .hashing import mix64
from .prefetch import prefetch

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
MAX_MATCH = 64  # tokens a match is measured back over: longer ones tie
MAX_CHAIN = 32  # candidates a query tries per n-gram size
PREFETCH_BLOCK = 64  # filing 1 Mi tokens: 0.43 s unprefetched; 16: 0.14 s, 64: 0.11 s, 128: 0.12 s


@njit(cache=True, nogil=True, inline="always")
def _hash(a, end, m, mask):
    """Hash of the m tokens of ``a`` ending at ``end``, reduced by ``mask``."""
    h = np.uint64(m)
    for t in range(end - m + 1, end + 1):
        h = mix64(h ^ (np.uint64(np.int64(a[t]) & 0xFFFFFFFF) * _GOLDEN))
    return np.int64(h & np.uint64(mask))


@njit(cache=True, nogil=True)
def file_positions(text, sizes, prev, head, start, stop):
    """File positions start .. stop-1 of ``text`` in every size's chain."""
    width = head.shape[1]
    mask = width - 1
    for lv in range(sizes.shape[0]):
        m = sizes[lv]
        for block in range(max(start, m - 1), stop, PREFETCH_BLOCK):
            end = min(block + PREFETCH_BLOCK, stop)
            if end - block == PREFETCH_BLOCK:
                for i in range(block, end):
                    prefetch(head, lv * width + _hash(text, i, m, mask))
            for i in range(block, end):
                h = _hash(text, i, m, mask)
                prev[lv, i] = head[lv, h]
                head[lv, h] = i


@njit(cache=True, nogil=True)
def unfile_positions(text, sizes, prev, head, start, stop):
    """Remove positions stop-1 down to start (the latest filed ones), exactly."""
    mask = head.shape[1] - 1
    for i in range(stop - 1, start - 1, -1):
        for lv in range(sizes.shape[0]):
            m = sizes[lv]
            if i + 1 >= m:
                head[lv, _hash(text, i, m, mask)] = prev[lv, i]


@njit(cache=True, nogil=True, inline="always")
def match_length(text, j, pattern, pn, most):
    """How many tokens, at most ``most``, of text ending at j equal pattern[:pn]'s last."""
    n = 0
    while n < most and n <= j and n < pn and text[j - n] == pattern[pn - 1 - n]:
        n += 1
    return n


@njit(cache=True, nogil=True)
def longest_match(
    text, limit, sizes, prev, head, pattern, pn, max_match, max_chain, near, shortest
):
    """(end, length) of the longest match of pattern[:pn]'s suffix ending before ``limit``.

    ``end`` is the match's last position in ``text`` (its continuation starts
    at end + 1), -1 if no size finds one. Ties in length go to the end whose
    continuation is nearest ``near`` (>= 0), else to the latest. A caller
    that needs ``shortest`` tokens or more is told of no shorter match, and
    the sizes below the largest that is at most ``shortest`` are not walked
    (a match that long ends in that size's n-gram, so its chain holds it).
    """
    mask = head.shape[1] - 1
    for lv in range(sizes.shape[0] - 1, -1, -1):
        m = sizes[lv]
        if pn < m:
            continue
        best, best_len, best_gap = -1, 0, 1 << 62
        j = head[lv, _hash(pattern, pn - 1, m, mask)]
        walked = 0
        while j >= 0 and walked < max_chain:
            if j < limit:
                walked += 1
                n = match_length(text, j, pattern, pn, max_match)
                if n >= m:
                    gap = abs(j + 1 - near) if near >= 0 else 0
                    if n > best_len or (n == best_len and gap < best_gap):
                        best, best_len, best_gap = j, n, gap
                        if gap == 0 and n >= min(max_match, pn):  # nothing can beat it
                            break
            j = prev[lv, j]
        if best >= 0 and best_len >= shortest:
            return best, best_len
        if best >= 0 or m <= shortest:
            break
    return -1, 0


@njit(cache=True, nogil=True)
def match_near(text, limit, pattern, pn, center, window, max_match):
    """(end, length): the longest match of pattern[:pn]'s suffix ending within ``window`` of center.

    Ends are tried outwards from ``center`` (nearest first, so the nearest
    of the longest wins), below ``limit``; (-1, 0) if none matches a token.
    """
    best, best_len = -1, 0
    for step in range(2 * window + 1):
        j = center + (step + 1) // 2 if step % 2 else center - step // 2
        if j < 0 or j >= limit:
            continue
        n = match_length(text, j, pattern, pn, max_match)
        if n > best_len:
            best, best_len = j, n
    return best, best_len
