"""Searching a corpus's suffix array: the longest match, and the most frequent continuation.

``text``, ``sa`` and ``buckets`` come from a file (``caches/corpus.py``):
``buckets[t + 1] .. buckets[t + 2]`` is where the suffixes starting with token t
lie (``docs/format.md``), which starts each binary search in a range a few
thousand times smaller; every bucket and every position read from ``sa`` is
bounded before it is used, and a token
above ``max_token`` is never drafted, so a damaged file yields wrong drafts
at worst, never a read out of bounds or a token outside the vocabulary.
Every loop is a binary search or bounded by a constant, so a damaged (say,
unsorted) array cannot make one run long either.
"""

from numba import njit

from .suffixsort import DEPTH

# Distinct continuations weighed per drafted token: the commonest of the first
# this many (each found by one binary search) stands for the commonest of all.
MAX_FOLLOWERS = 64
# params: the largest token id, the shortest match that drafts, the fewest
# occurrences that do, and the share (percent) the continuation must hold.
MAX_TOKEN, MIN_MATCH, MIN_COUNT, MIN_SHARE = range(4)


@njit(cache=True, nogil=True, inline="always")
def _token(text, p):
    """The corpus's token at p: -1 (a separator) past its end or outside it."""
    return text[p] if 0 <= p < text.shape[0] else -1


@njit(cache=True, nogil=True, inline="always")
def _compare(text, p, pattern, s, length):
    """-1, 0 or 1: the suffix at p sorts before, starts with, or sorts after pattern[s:s+length]."""
    if p < 0 or p >= text.shape[0]:
        return 1  # a damaged position: anywhere will do, as long as it is in bounds
    for d in range(length):
        x = _token(text, p + d)
        y = pattern[s + d]
        if x != y:
            return -1 if x < y else 1
    return 0


@njit(cache=True, nogil=True)
def _first(text, sa, pattern, s, length, lo, hi, bound):
    """The first i in [lo, hi) whose suffix sorts after pattern[s:s+length] (bound 1), or
    does not sort before it (bound 0); hi if none."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if _compare(text, sa[mid], pattern, s, length) < bound:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True, nogil=True, inline="always")
def _bucket(buckets, n, t):
    """(lo, hi): where the suffixes starting with token t lie, from the file's buckets
    (bounded: a damaged bucket narrows a search wrongly, never outside sa); all of sa
    without buckets."""
    if buckets.shape[0] == 0:
        return 0, n
    if t + 2 >= buckets.shape[0]:
        return n, n
    lo = min(max(buckets[t + 1], 0), n)
    return lo, min(max(buckets[t + 2], lo), n)


@njit(cache=True, nogil=True)
def find(text, sa, buckets, pattern, s, length):
    """(lo, hi): the suffixes that start with pattern[s:s+length] are sa[lo:hi]."""
    lo, hi = _bucket(buckets, sa.shape[0], pattern[s])
    lo = _first(text, sa, pattern, s, length, lo, hi, 0)
    return lo, _first(text, sa, pattern, s, length, lo, hi, 1)


@njit(cache=True, nogil=True, inline="always")
def _at(text, sa, buckets, pattern, pn, length):
    """Where the suffixes starting with the last ``length`` tokens of pattern[:pn] begin
    in sa, and where their bucket ends; -1 if there are none (one binary search)."""
    lo, hi = _bucket(buckets, sa.shape[0], pattern[pn - length])
    i = _first(text, sa, pattern, pn - length, length, lo, hi, 0)
    if i < hi and _compare(text, sa[i], pattern, pn - length, length) == 0:
        return i, hi
    return -1, hi


@njit(cache=True, nogil=True)
def longest(text, sa, buckets, pattern, pn, floor, ceiling):
    """(length, lo, hi): the longest suffix of pattern[:pn], from floor up to ceiling tokens,
    in the corpus (length 0 if not even floor's).

    A suffix occurs only if every shorter one does: the length is found by
    doubling from the floor, then halving, one binary search a probe.
    """
    top = min(ceiling, pn, DEPTH)
    floor = max(floor, 1)
    if floor > top:
        return 0, 0, 0
    lo, end = _at(text, sa, buckets, pattern, pn, floor)
    if lo < 0:
        return 0, 0, 0
    good, bad = floor, top + 1
    step = floor
    while good + step < bad:
        i, e = _at(text, sa, buckets, pattern, pn, good + step)
        if i < 0:
            bad = good + step
            break
        good, lo, end = good + step, i, e
        step *= 2
    while bad - good > 1:
        mid = (good + bad) >> 1
        i, e = _at(text, sa, buckets, pattern, pn, mid)
        if i < 0:
            bad = mid
        else:
            good, lo, end = mid, i, e
    return good, lo, _first(text, sa, pattern, pn - good, good, lo, end, 1)


@njit(cache=True, nogil=True, inline="always")
def _follower(text, sa, i, depth):
    p = sa[i]
    return _token(text, p + depth) if 0 <= p < text.shape[0] else -1


@njit(cache=True, nogil=True)
def draft(text, sa, buckets, pattern, pn, params, out):
    """Draft into out the corpus's commonest continuation of pattern[:pn]; returns the count.

    From the longest match, each next token is the commonest one following
    the occurrences still in range (they sit together, sorted by it), as
    long as it follows at least ``MIN_COUNT`` of them and ``MIN_SHARE``
    percent; the range then narrows to those. The depth the array is sorted
    to bounds the draft.
    """
    length, lo, hi = longest(text, sa, buckets, pattern, pn, params[MIN_MATCH], DEPTH)
    if length == 0:
        return 0
    d = 0
    while d < out.shape[0] and length + d < DEPTH:
        depth = length + d
        best, best_lo, best_hi = -1, 0, 0
        i = lo
        for _ in range(MAX_FOLLOWERS):
            if i >= hi:
                break
            x = _follower(text, sa, i, depth)
            a, b = i + 1, hi  # the run of x ends at the first follower above it
            while a < b:
                mid = (a + b) >> 1
                if _follower(text, sa, mid, depth) <= x:
                    a = mid + 1
                else:
                    b = mid
            if x >= 0 and a - i > best_hi - best_lo:
                best, best_lo, best_hi = x, i, a
            i = a
        count = best_hi - best_lo
        if best < 0 or best > params[MAX_TOKEN] or count < params[MIN_COUNT]:
            break
        if count * 100 < params[MIN_SHARE] * (hi - lo):
            break
        out[d] = best
        d += 1
        lo, hi = best_lo, best_hi
    return d
