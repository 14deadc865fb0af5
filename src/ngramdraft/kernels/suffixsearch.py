"""Searching a corpus's suffix array: the longest match, and the most frequent continuation.

``text``, ``sa``, ``buckets`` and ``grams`` come from a file
(``caches/suffix_corpus.py``): ``buckets[t + 1] .. buckets[t + 2]`` is where the
suffixes starting with token t lie (``docs/format.md``), and ``grams``
(``kernels/gramindex.py``) where those starting with a frequent 2-gram or
3-gram do, which starts each binary search in a range thousands of times
smaller; every bucket, every range and every position read from ``sa`` is
bounded before it is used, and a token
above ``max_token`` is never drafted, so a damaged file yields wrong drafts
at worst, never a read out of bounds or a token outside the vocabulary.
Every loop is a binary search or bounded by a constant, so a damaged (say,
unsorted) array cannot make one run long either.
"""

from numba import njit

from . import gramindex
from .prefetch import prefetch
from .suffixsort import DEPTH

# params: the largest token id, the shortest match that drafts, the fewest
# occurrences that do, and the share (percent, 50 or more) the continuation must hold.
MAX_TOKEN, MIN_MATCH, MIN_COUNT, MIN_SHARE = range(4)
# last: a sequence's previous search, where its next one starts: the sequence's
# length then (-1: none), the match's length (0: not even the floor's), its sa range.
LAST_N, LAST_LENGTH, LAST_LO, LAST_HI = range(4)
LAST_WORDS = 4


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


@njit(cache=True, nogil=True, inline="always")
def _ahead(text, sa, lo, mid, hi, depth):
    """Prefetch what a binary search's next two steps in sa[lo:hi] may read, whichever way
    the step at mid goes: the corpus at depth for the two next midpoints, the suffix
    array for the four after them. A level otherwise waits for two cache misses, one
    after the other (the position, then the corpus at it); so they overlap."""
    left, right = (lo + mid) >> 1, (mid + 1 + hi) >> 1
    _ahead_at(text, sa, left, depth)
    _ahead_at(text, sa, right, depth)
    n = sa.shape[0] - 1
    for i in (
        (lo + left) >> 1,
        (left + 1 + mid) >> 1,
        (mid + 1 + right) >> 1,
        (right + 1 + hi) >> 1,
    ):
        prefetch(sa, min(i, n))


@njit(cache=True, nogil=True, inline="always")
def _ahead_at(text, sa, i, depth):
    """Prefetch the corpus where the suffix at sa[i] reaches depth (i clamped into sa)."""
    if sa.shape[0] > 0 and text.shape[0] > 0:
        p = sa[min(max(i, 0), sa.shape[0] - 1)] + depth
        prefetch(text, min(max(p, 0), text.shape[0] - 1))


@njit(cache=True, nogil=True, inline="always")
def _bounds(text, sa, pattern, s, length, lo, hi, bound):
    """(the first i in [lo, hi) whose suffix sorts after pattern[s:s+length] (bound 1), or
    does not sort before it (bound 0), hi if none; the first i it saw whose suffix sorts
    after the pattern, hi if none).

    With bound 0 the second is a limit for the search of where the pattern's
    suffixes end: those two searches share their first steps, until one step
    lands among the pattern's suffixes, and the second search starts from
    where the first left them instead of again from the whole range.
    """
    after = hi
    while lo < hi:
        mid = (lo + hi) >> 1
        _ahead(text, sa, lo, mid, hi, 0)
        c = _compare(text, sa[mid], pattern, s, length)
        if c < bound:
            lo = mid + 1
        else:
            hi = mid
            if c > 0:
                after = mid
    return lo, after


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


@njit(cache=True, nogil=True, inline="always")
def _start(buckets, grams, n, pattern, s, length):
    """(lo, hi): a range of sa holding the suffixes that start with pattern[s:s+length], the
    narrowest the index knows (its first three tokens', else two's), else the first token's."""
    lo = hi = -1
    if length >= 3:
        lo, hi = gramindex.lookup(grams, n, pattern[s], pattern[s + 1], pattern[s + 2])
    if lo < 0 and length >= 2:
        lo, hi = gramindex.lookup(grams, n, pattern[s], pattern[s + 1], -1)
    if lo < 0:
        lo, hi = _bucket(buckets, n, pattern[s])
    return lo, hi


@njit(cache=True, nogil=True)
def find(text, sa, buckets, grams, pattern, s, length):
    """(lo, hi): the suffixes that start with pattern[s:s+length] are sa[lo:hi]."""
    lo, hi = _start(buckets, grams, sa.shape[0], pattern, s, length)
    lo, hi = _bounds(text, sa, pattern, s, length, lo, hi, 0)
    return lo, _bounds(text, sa, pattern, s, length, lo, hi, 1)[0]


@njit(cache=True, nogil=True, inline="always")
def _at(text, sa, buckets, grams, pattern, pn, length):
    """Where the suffixes starting with the last ``length`` tokens of pattern[:pn] begin
    in sa, and a limit to where they end; -1 if there are none (one binary search)."""
    lo, hi = _start(buckets, grams, sa.shape[0], pattern, pn - length, length)
    i, after = _bounds(text, sa, pattern, pn - length, length, lo, hi, 0)
    if i < hi and _compare(text, sa[i], pattern, pn - length, length) == 0:
        return i, after
    return -1, after


@njit(cache=True, nogil=True)
def longest(text, sa, buckets, grams, pattern, pn, floor, ceiling):
    """(length, lo, hi): the longest suffix of pattern[:pn], from floor up to ceiling tokens,
    in the corpus (length 0 if not even floor's)."""
    return _longest(text, sa, buckets, grams, pattern, pn, floor, ceiling, floor)


@njit(cache=True, nogil=True)
def _longest(text, sa, buckets, grams, pattern, pn, floor, ceiling, guess):
    """``longest``, its first probe at ``guess`` (the likeliest length).

    A suffix occurs only if every shorter one does: from the guess the
    probes gallop up (by the guess, then doubling) or down (by 1, 2, 4, ...)
    to a length that occurs next to one that does not, then halve the gap,
    one binary search a probe.
    """
    top = min(ceiling, pn, DEPTH)
    floor = max(floor, 1)
    if floor > top:
        return 0, 0, 0
    guess = min(max(guess, floor), top)
    lo, end = _at(text, sa, buckets, grams, pattern, pn, guess)
    if lo >= 0:
        good, bad, step = guess, top + 1, guess
        while good + step < bad:
            i, e = _at(text, sa, buckets, grams, pattern, pn, good + step)
            if i < 0:
                bad = good + step
                break
            good, lo, end = good + step, i, e
            step *= 2
    else:
        good, bad, step = floor - 1, guess, 1
        while bad > floor:
            probe = max(bad - step, floor)
            i, e = _at(text, sa, buckets, grams, pattern, pn, probe)
            if i >= 0:
                good, lo, end = probe, i, e
                break
            bad, step = probe, step * 2
        if good < floor:
            return 0, 0, 0
    while bad - good > 1:
        mid = (good + bad) >> 1
        i, e = _at(text, sa, buckets, grams, pattern, pn, mid)
        if i < 0:
            bad = mid
        else:
            good, lo, end = mid, i, e
    return good, lo, _bounds(text, sa, pattern, pn - good, good, lo, end, 1)[0]


@njit(cache=True, nogil=True, inline="always")
def _follower(text, sa, i, depth):
    p = sa[i]
    return _token(text, p + depth) if 0 <= p < text.shape[0] else -1


@njit(cache=True, nogil=True)
def _past(text, sa, lo, hi, depth, t, bound):
    """In sa[lo:hi], whose suffixes agree up to depth and so sort by their token there:
    the first i whose token there is above t (bound 1) or not below it (bound 0)."""
    return _past_bounds(text, sa, lo, hi, depth, t, bound)[0]


@njit(cache=True, nogil=True, inline="always")
def _past_bounds(text, sa, lo, hi, depth, t, bound):
    """``_past``, and the first i it saw whose token is above t (hi if none): as ``_bounds``."""
    after = hi
    while lo < hi:
        mid = (lo + hi) >> 1
        _ahead(text, sa, lo, mid, hi, depth)
        x = _follower(text, sa, mid, depth)
        if x < t + bound:
            lo = mid + 1
        else:
            hi = mid
            if x > t:
                after = mid
    return lo, after


@njit(cache=True, nogil=True)
def match(text, sa, buckets, grams, pattern, pn, floor, last):
    """What ``longest(..., floor, DEPTH)`` returns, found from the sequence's previous search.

    The longest match ending at a token is at most one longer than the
    longest ending at the token before. So if the previous match extends
    over every token appended since, that extension is the longest, found
    by narrowing its range among its own occurrences (two binary searches a
    token) rather than by probing lengths in a first token's bucket.
    Otherwise the search probes from the longest the previous match allows
    downwards. ``last`` (``LAST_*``) is read, then updated.
    """
    n0, length, lo, hi = last[LAST_N], last[LAST_LENGTH], last[LAST_LO], last[LAST_HI]
    found, ceiling = False, DEPTH
    if 0 <= n0 <= pn:
        # bound: no match ending at the sequence's token q is longer
        q, bound = n0 - 1, length if length > 0 else floor - 1
        found = length > 0 and length + pn - n0 <= DEPTH
        while found and q + 1 < pn:
            t = pattern[q + 1]
            a, after = _past_bounds(text, sa, lo, hi, length, t, 0)
            q += 1
            found = a < hi and _follower(text, sa, a, length) == t
            if found:
                lo, hi = a, _past(text, sa, a + 1, after, length, t, 1)
                length += 1
                bound = length
        ceiling = bound + pn - 1 - q
    if not found:  # the likeliest length is the cap: the previous match, one token on
        length, lo, hi = _longest(text, sa, buckets, grams, pattern, pn, floor, ceiling, ceiling)
    last[LAST_N], last[LAST_LENGTH], last[LAST_LO], last[LAST_HI] = pn, length, lo, hi
    return length, lo, hi


@njit(cache=True, nogil=True)
def draft(text, sa, buckets, grams, pattern, pn, params, last, out):
    """Draft into out the corpus's commonest continuation of pattern[:pn]; returns the count.

    From the longest match, each next token is the one following at least
    ``MIN_SHARE`` percent (50 or more) of the occurrences still in range, and
    at least ``MIN_COUNT`` of them; the range then narrows to those. The
    occurrences sit together sorted by that token, so one holding half of
    them or more holds the middle one (of an odd count; one of the middle
    two of an even count, the first if both qualify, as the smaller id): two
    lookups and two binary searches per drafted token. A run of ``need``
    through the middle reaches ``reach = (need - 1) // 2`` positions before
    it or as many after it, so a token found at neither place holds fewer,
    and is turned down by those two lookups instead (on prose, where most
    are, that halves the continuation's reads). The depth the array is
    sorted to bounds the draft. ``last``: the sequence's previous search
    (``match``).
    """
    length, lo, hi = match(text, sa, buckets, grams, pattern, pn, params[MIN_MATCH], last)
    if length == 0:
        return 0
    d = 0
    while d < out.shape[0] and length + d < DEPTH and hi - lo >= params[MIN_COUNT]:
        depth = length + d
        # a run of `need` or more through mid reaches mid - reach or mid + reach
        need = (params[MIN_SHARE] * (hi - lo) + 99) // 100
        reach = (need - 1) // 2
        first = lo + (hi - lo - 1) // 2
        for i in (first, first - reach, first + reach):  # the lookups below, overlapped
            _ahead_at(text, sa, i, depth)
        best, best_lo, best_hi, tried = -1, 0, 0, -1
        for half in range(2):
            mid = lo + (hi - lo - 1 + half) // 2
            x = _follower(text, sa, mid, depth)
            if x < 0 or x == tried:
                continue
            tried = x
            left = _follower(text, sa, mid - reach, depth)
            if left != x and _follower(text, sa, mid + reach, depth) != x:
                continue
            a = _past(text, sa, lo, mid, depth, x, 0)
            b = _past(text, sa, mid + 1, hi, depth, x, 1)
            if (b - a) * 100 >= params[MIN_SHARE] * (hi - lo):
                best, best_lo, best_hi = x, a, b
                break
        if best < 0 or best > params[MAX_TOKEN] or best_hi - best_lo < params[MIN_COUNT]:
            break
        out[d] = best
        d += 1
        lo, hi = best_lo, best_hi
    return d
