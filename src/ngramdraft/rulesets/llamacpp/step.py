"""llama.cpp's drafting rules (common/ngram-cache.cpp), bit for bit: the default rule set.

What the rules are, in words and tables, is ``docs/rules.md``; this module
is their one implementation, in numba. In short:

* Nothing is drafted after fewer than NGRAM_STATIC tokens.
* For each drafted token: the static part S is the static cache's followers of
  the last 2-gram. The context cache is tried with the lax thresholds, then
  the dynamic cache with the strict ones, then the static cache alone.
* A primary try walks its n-gram list (sizes nmin..nmax, in that order) from
  the end; the threshold tables are indexed by the position in that list, not
  by the n-gram size (so nmin = 2 gives sizes 2..4 the entries 0..2).
* A follower's score is count * (100 * S[token] if token in S else 1); the
  first strictly larger score wins, so ties go to the smallest token id
  (followers are visited in ascending token order).
* A part proposes its winner only if its count sum reaches MIN_SAMPLE and
  the winner's count is at least MIN_PERCENT of the sum. All arithmetic is
  int32 with wrap-around, as the compiled C++ does.

Two indexes let most parts go unread; each says what it means, and this
module decides whether these thresholds may use it (a threshold changed
below what an index promises turns it off here, and nothing a file stores
changes): the mutable table's marks (``kernels/table.py``) for the dynamic
role, and the static file's draft flags (``kernels/frozen.py``) for the
static cache's own draft. Before a part is scanned, its stored sum and
largest count settle the thresholds exactly (``dominance.may_reach``).

A draft step takes the tables and the static cache as namedtuples
(``Table``, ``Frozen``); the drafter's state kernels and replay's loop both
call :func:`draft_step`. Everything here is inlined by numba
(``inline="always"``): a call that is not inlined passes every array as
seven scalars on the stack, and every caller runs without numba's runtime.
"""

import numpy as np
from numba import njit

from ...kernels.constmap import prefetch_cells, value_of
from ...kernels.dominance import may_reach, wrap32
from ...kernels.frozen import (
    CORRUPT,
    DRAFTS,
    FLAG_PERCENT,
    FLAG_SAMPLE,
    find_key_hashed,
    followers_span,
    is_follower,
    key_hash_of,
    may_draft,
)
from ...kernels.prefetch import prefetch
from ...kernels.search import find
from ...kernels.table import (
    LENGTH,
    MARK_PERCENT,
    MARK_SAMPLE,
    MAXC,
    START,
    TOTAL,
    lookup_hashed,
    marked,
    ngram_at,
    ngram_hash,
    prefetch_slot,
)

NGRAM_MIN = 1
NGRAM_MAX = 4
NGRAM_STATIC = 2

# (min_sample, min_percent) per position in the n-gram list: the context
# cache's lax thresholds and the dynamic cache's strict ones. The static
# cache's own draft uses the lax entry of NGRAM_STATIC.
LAX_MIN_SAMPLE = np.array([2, 2, 1, 1], dtype=np.int64)
LAX_MIN_PERCENT = np.array([66, 50, 50, 50], dtype=np.int64)
STRICT_MIN_SAMPLE = np.array([4, 3, 2, 2], dtype=np.int64)
STRICT_MIN_PERCENT = np.array([75, 66, 66, 66], dtype=np.int64)
STATIC_MIN_SAMPLE = int(LAX_MIN_SAMPLE[NGRAM_STATIC - 1])
STATIC_MIN_PERCENT = int(LAX_MIN_PERCENT[NGRAM_STATIC - 1])

# Whether the indexes answer for these thresholds (see the module's doc).
FILTER_DYNAMIC = (
    int(STRICT_MIN_SAMPLE.min()) >= MARK_SAMPLE and int(STRICT_MIN_PERCENT.min()) >= MARK_PERCENT
)
USE_STATIC_FLAG = STATIC_MIN_SAMPLE >= FLAG_SAMPLE and STATIC_MIN_PERCENT >= FLAG_PERCENT

UNKNOWN = -1  # length of the static part before it is looked up
NEED_STATIC = -2  # try_primary: look the static part up and ask again
_INT32_LIMIT = 2**31
_NO_KEY = np.int32(-1)


@njit(cache=True, _nrt=False)
def passes(acc, mx, min_sample, min_percent):
    """Whether a part of wrapped count sum acc whose winner counts mx proposes it."""
    return acc >= min_sample and wrap32(100 * mx) >= wrap32(min_percent * acc)


@njit(cache=True, _nrt=False, inline="always")
def try_primary(t, thresholds, filtered, grams, f, part):
    """The token a context or dynamic table ``t`` proposes, -1, or NEED_STATIC.

    ``thresholds`` is (min_sample, min_percent), indexed by position;
    ``filtered`` skips the n-grams the table's marks rule out. ``grams`` is
    the step's n-grams: (seq, end, true_len, sizes, hashes), the n-gram of
    each size ending at seq[end], the sequence's true length there (an
    n-gram may not start before it), the sizes (min, max) and hashes[size -
    1]. ``part`` is the static part S, (start, length) in f's followers;
    its length is UNKNOWN until looked up. NEED_STATIC: a part passed the
    precheck and its winner depends on S, which is UNKNOWN.
    """
    min_sample, min_percent = thresholds
    seq, end, true_len, sizes, hashes = grams
    lo, sn = part
    nmin, nmax = sizes
    gmax = np.int64(f.params[3])
    for i in range(nmax - nmin, -1, -1):
        size = nmin + i
        if size > true_len:
            continue  # the n-gram would start before the sequence does
        if filtered and not marked(t.tags, t.marks, hashes[size - 1]):
            continue
        s = lookup_hashed(t.slots, t.tags, ngram_at(seq, end, size), hashes[size - 1])
        if s < 0:
            continue
        total = t.slots[s, TOTAL]
        if not may_reach(total, t.slots[s, MAXC], min_sample[i], min_percent[i]):
            continue
        a = t.slots[s, START]
        m = t.slots[s, LENGTH]
        # A lone follower wins whatever its static weight, unless count * weight
        # can wrap: gmax bounds every weight. Each factor is bounded first, so
        # that the int64 product cannot overflow either.
        weigh = sn != 0 and (
            m > 1
            or total >= _INT32_LIMIT
            or 100 * gmax >= _INT32_LIMIT
            or total * 100 * gmax >= _INT32_LIMIT
        )
        if weigh and sn == UNKNOWN:
            return NEED_STATIC
        best = -1
        max_cp = np.int64(0)
        max_cs = np.int64(0)
        acc = np.int64(0)
        for j in range(a, a + m):
            c = np.int64(t.cnt[j])
            w = np.int64(1)
            if weigh:
                p = find(f.tokens, lo, sn, t.tok[j])
                if p >= 0:
                    w = wrap32(100 * np.int64(f.counts[p]))
            if wrap32(c * w) > wrap32(max_cp * max_cs):
                best = t.tok[j]
                max_cp = c
                max_cs = w
            acc = wrap32(acc + c)
        if passes(acc, max_cp, min_sample[i], min_percent[i]):
            return best
    return -1


@njit(cache=True, _nrt=False, inline="always")
def propose(t, thresholds, filtered, grams, f, part, hs):
    """try_primary, looking the static part up first (key hash hs) if it turns out to be needed.

    Returns (token or -1, part) with the static part as now known; its
    length is CORRUPT for a damaged static cache.
    """
    seq, end = grams[0], grams[1]
    while True:  # at most twice: the second time the static part is known
        token = try_primary(t, thresholds, filtered, grams, f, part)
        if token != NEED_STATIC:
            return token, part
        part = followers_span(f, (seq[end - 2], seq[end - 1], _NO_KEY, _NO_KEY), hs)
        if part[1] == CORRUPT:
            return -1, part


@njit(cache=True, _nrt=False, inline="always")
def _hash_size(seq, end, true_len, sizes, size, ctx, dyn):
    """Hash of the n-gram of this size ending at end (0 if not looked up), prefetched.

    Both tables hash alike, so one hash serves both lookups, and the first
    slot of every lookup a draft step makes is requested before any is read.
    """
    if size < sizes[0] or size > sizes[1] or size > true_len:
        return np.uint64(0)
    h = ngram_hash(ngram_at(seq, end, size))
    prefetch_slot(ctx.slots, ctx.tags, h)
    if not FILTER_DYNAMIC or marked(dyn.tags, dyn.marks, h):
        prefetch_slot(dyn.slots, dyn.tags, h)
    return h


@njit(cache=True, _nrt=False, inline="always")
def _request_step(seq, end, true_len, sizes, ctx, dyn, f):
    """(static key hash, table hashes by size) of a draft step after seq[:end], lines requested."""
    hs = key_hash_of(f, (seq[end - 2], seq[end - 1], _NO_KEY, _NO_KEY))
    prefetch_cells(f.fuse, f.params, f.keys.shape[0], hs)
    hashes = (
        _hash_size(seq, end, true_len, sizes, 1, ctx, dyn),
        _hash_size(seq, end, true_len, sizes, 2, ctx, dyn),
        _hash_size(seq, end, true_len, sizes, 3, ctx, dyn),
        _hash_size(seq, end, true_len, sizes, 4, ctx, dyn),
    )
    return hs, hashes


@njit(cache=True, _nrt=False, inline="always")
def prefetch_step(seq, n_seq, sizes, ctx, dyn, f):
    """Request the lines the first step of a draft after seq[:n_seq] reads first.

    A decoding loop that calls this as soon as it knows the token, before its
    own work on it (the context update), finds them loaded when it drafts.
    """
    if n_seq >= NGRAM_STATIC:
        _request_step(seq, n_seq, n_seq, sizes, ctx, dyn, f)


@njit(cache=True, _nrt=False)
def try_static(best, mx, acc):
    """The static cache's own proposal (lax thresholds of NGRAM_STATIC), or -1.

    best, mx, acc: the part's first strictly largest count's token, that
    count and the wrapped sum of counts (the file's stats).
    """
    if best < 0 or not passes(acc, mx, STATIC_MIN_SAMPLE, STATIC_MIN_PERCENT):
        return -1
    return best


@njit(cache=True, _nrt=False, inline="always")
def _static_draft(f, grams, hs):
    """The static cache's own draft for the step (or -1), CORRUPT if the file lied."""
    seq, end = grams[0], grams[1]
    n_keys = f.keys.shape[0]
    if not (may_draft(f, hs) if USE_STATIC_FLAG else n_keys > 0):
        return -1
    # The key's stats and span offsets are requested with its key row:
    # the three misses overlap instead of following one another.
    i = value_of(f.fuse, f.params, n_keys, hs) & (DRAFTS - 1)
    if i < n_keys:
        prefetch(f.stats, 3 * i)
        prefetch(f.offsets, i)
    key = find_key_hashed(f, (seq[end - 2], seq[end - 1], _NO_KEY, _NO_KEY), hs)
    if key < 0:
        return -1
    token = try_static(f.stats[key, 0], np.int64(f.stats[key, 1]), np.int64(f.stats[key, 2]))
    if token >= 0 and not is_follower(f, key, token):
        return CORRUPT
    return token


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def draft_step(seq, n_seq, n_draft, sizes, ctx, dyn, f, buf):
    """Draft after seq[:n_seq] into buf; returns the count d, or CORRUPT.

    ``sizes`` is (ngram_min, ngram_max); ``ctx`` and ``dyn`` are the context
    and dynamic tables, ``f`` the static cache (empty when there is none).
    buf (length >= NGRAM_MAX + n_draft) receives the last min(n_seq,
    NGRAM_MAX) tokens of seq followed by the d drafted tokens.

    Each step requests, at once, every line its first reads need: the first
    slot of each table probe and the constmap's three cells. The static part
    is then read only when a proposal's weighting needs it, and the static
    cache's own draft only when the constmap's flag allows one; so a step
    that every cache fails, the commonest kind, waits for one level of
    memory.
    """
    if n_seq < NGRAM_STATIC:
        return 0
    tail = min(n_seq, NGRAM_MAX)
    for j in range(tail):
        buf[j] = seq[n_seq - tail + j]
    no_static = np.int64(UNKNOWN) if f.keys.shape[0] else np.int64(0)
    lax = (LAX_MIN_SAMPLE, LAX_MIN_PERCENT)
    strict = (STRICT_MIN_SAMPLE, STRICT_MIN_PERCENT)
    d = 0
    while d < n_draft:
        end = tail + d
        true_len = n_seq + d
        hs, hashes = _request_step(buf, end, true_len, sizes, ctx, dyn, f)
        grams = (buf, end, true_len, sizes, hashes)
        token, part = propose(ctx, lax, False, grams, f, (np.int64(0), no_static), hs)
        if token < 0 and part[1] != CORRUPT:
            token, part = propose(dyn, strict, FILTER_DYNAMIC, grams, f, part, hs)
        if part[1] == CORRUPT:
            return CORRUPT
        if token < 0:
            token = _static_draft(f, grams, hs)
            if token == CORRUPT:
                return CORRUPT
        if token < 0:
            break
        buf[end] = token
        d += 1
    return d
