"""llama.cpp's common_ngram_cache_draft, with followers visited in ascending token order.

Rules (SPEC.md; llama.cpp common/ngram-cache.cpp):

* Nothing is drafted after fewer than NGRAM_STATIC tokens.
* For each drafted token: the static part S is the static cache's followers of
  the last 2-gram. The context cache is tried with the lax thresholds, then
  the dynamic cache with the strict ones, then the static cache alone.
* A primary try walks its n-gram list (sizes nmin..nmax, in that order) from
  the end; the threshold tables are indexed by the position in that list, not
  by the n-gram size (so nmin = 2 gives sizes 2..4 the entries 0..2).
* A follower's score is count * (100 * S[token] if token in S else 1); the
  first strictly larger score wins, so ties go to the smallest token id.
* All arithmetic is int32 with wrap-around, as the compiled C++ does.

The step's helpers and draft_arrays itself are inlined by numba
(``inline="always"``), as the table's are (see kernels/table.py); every
caller runs without numba's runtime, which inlined code would otherwise
burden with reference counting.
"""

import numpy as np
from numba import njit

from .constmap import prefetch_cells, value_of
from .frozen import (
    CORRUPT,
    DRAFTS,
    find_key_hashed,
    followers_span,
    is_follower,
    key_hash_of,
    may_draft,
)
from .prefetch import prefetch
from .search import find
from .table import (
    LENGTH,
    MAXC,
    START,
    TOTAL,
    candidate,
    lookup_hashed,
    ngram_at,
    ngram_hash,
    prefetch_slot,
)
from .thresholds import (
    LAX_MIN_PERCENT,
    LAX_MIN_SAMPLE,
    NGRAM_MAX,
    NGRAM_STATIC,
    STRICT_MIN_PERCENT,
    STRICT_MIN_SAMPLE,
    may_pass,
    passes,
    wrap32,
)

_INT32_LIMIT = 2**31

UNKNOWN = -1  # length of the static part before it is looked up
NEED_STATIC = -2  # try_primary: look the static part up and ask again


@njit(cache=True, _nrt=False, inline="always")
def try_primary(
    slots,
    tags,
    tok,
    cnt,
    seq,
    end,
    true_len,
    nmin,
    nmax,
    hashes,
    min_sample,
    min_percent,
    stok,
    scnt,
    slo,
    sn,
    gmax,
    cand,
    filtered,
):
    """The token a context/dynamic table proposes after seq[:end], -1, or NEED_STATIC.

    hashes[size - 1] is the hash of the n-gram of that size ending at end;
    stok/scnt[slo:slo+sn] is the static part S of the last 2-gram (sn is
    UNKNOWN until it has been looked up), gmax the static cache's largest
    count. NEED_STATIC: a part passed the thresholds' precheck and its winner
    depends on S, which is UNKNOWN. ``filtered`` (the dynamic role) skips the
    n-grams the table's ``cand`` bits rule out.
    """
    for i in range(nmax - nmin, -1, -1):
        size = nmin + i
        if size > true_len:
            continue  # the n-gram would start before the sequence does
        if filtered and not candidate(tags, cand, hashes[size - 1]):
            continue
        k0, k1, k2, k3 = ngram_at(seq, end, size)
        s = lookup_hashed(slots, tags, k0, k1, k2, k3, hashes[size - 1])
        if s < 0:
            continue
        total = slots[s, TOTAL]
        if not may_pass(total, slots[s, MAXC], min_sample[i], min_percent[i]):
            continue
        a = slots[s, START]
        m = slots[s, LENGTH]
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
            c = np.int64(cnt[j])
            w = np.int64(1)
            if weigh:
                p = find(stok, slo, sn, tok[j])
                if p >= 0:
                    w = wrap32(100 * np.int64(scnt[p]))
            if wrap32(c * w) > wrap32(max_cp * max_cs):
                best = tok[j]
                max_cp = c
                max_cs = w
            acc = wrap32(acc + c)
        if passes(acc, max_cp, min_sample[i], min_percent[i]):
            return best
    return -1


@njit(cache=True, _nrt=False, inline="always")
def propose(
    slots, tags, tok, cnt, cand, filtered, seq, end, true_len, nmin, nmax, hashes,
    min_sample, min_percent, keys, fuse, params, offsets, stok, scnt, h, slo, sn,
):  # fmt: skip
    """try_primary, looking the static part up first if it turns out to be needed.

    Returns (token or -1, slo, sn) with the static part as now known; sn is
    CORRUPT for a damaged static cache.
    """
    gmax = np.int64(params[3])
    while True:  # at most twice: the second time the static part is known
        t = try_primary(
            slots, tags, tok, cnt, seq, end, true_len, nmin, nmax, hashes, min_sample,
            min_percent, stok, scnt, slo, sn, gmax, cand, filtered,
        )  # fmt: skip
        if t != NEED_STATIC:
            return t, slo, sn
        pad = np.int32(-1)
        slo, sn = followers_span(
            keys, fuse, params, offsets, stok.shape[0], seq[end - 2], seq[end - 1], pad, pad, h
        )
        if sn == CORRUPT:
            return -1, slo, sn


@njit(cache=True, _nrt=False)
def _hash_size(seq, end, size, true_len, nmin, nmax, c_slots, c_tags, d_slots, d_tags, d_cand):
    """Hash of the n-gram of this size ending at end (0 if not looked up), prefetched.

    Both tables hash alike, so one hash serves both lookups, and the first
    slot of every lookup a draft step makes is requested before any is read.
    """
    if size < nmin or size > nmax or size > true_len:
        return np.uint64(0)
    k0, k1, k2, k3 = ngram_at(seq, end, size)
    h = ngram_hash(k0, k1, k2, k3)
    prefetch_slot(c_slots, c_tags, h)
    if candidate(d_tags, d_cand, h):
        prefetch_slot(d_slots, d_tags, h)
    return h


@njit(cache=True, _nrt=False, inline="always")
def _hashes(seq, end, true_len, nmin, nmax, c_slots, c_tags, d_slots, d_tags, d_cand):
    """(hash of size 1, 2, 3, 4) for try_primary."""
    c, d = (c_slots, c_tags), (d_slots, d_tags, d_cand)
    return (
        _hash_size(seq, end, 1, true_len, nmin, nmax, *c, *d),
        _hash_size(seq, end, 2, true_len, nmin, nmax, *c, *d),
        _hash_size(seq, end, 3, true_len, nmin, nmax, *c, *d),
        _hash_size(seq, end, 4, true_len, nmin, nmax, *c, *d),
    )


@njit(cache=True, _nrt=False, inline="always")
def _request_step(
    seq, end, true_len, nmin, nmax, c_slots, c_tags, d_slots, d_tags, d_cand, fuse, params, n_keys
):
    """(static hash, table hashes) of a draft step after seq[:end], its first lines requested."""
    pad = np.int32(-1)
    hs = key_hash_of(params, seq[end - 2], seq[end - 1], pad, pad)
    prefetch_cells(fuse, params, n_keys, hs)
    return hs, _hashes(seq, end, true_len, nmin, nmax, c_slots, c_tags, d_slots, d_tags, d_cand)


@njit(cache=True, _nrt=False, inline="always")
def prefetch_step(
    seq, n_seq, nmin, nmax, c_slots, c_tags, d_slots, d_tags, d_cand, fuse, params, n_keys
):
    """Request the lines the first step of a draft after seq[:n_seq] reads first.

    A decoding loop that calls this as soon as it knows the token, before its
    own work on it (the context update), finds them loaded when it drafts.
    """
    if n_seq >= NGRAM_STATIC:
        _request_step(
            seq, n_seq, n_seq, nmin, nmax, c_slots, c_tags, d_slots, d_tags, d_cand,
            fuse, params, n_keys,
        )  # fmt: skip


@njit(cache=True, _nrt=False)
def try_static(best, mx, acc):
    """The static cache's own proposal (lax thresholds of NGRAM_STATIC), or -1.

    best, mx, acc: the part's first strictly largest count's token, that
    count and the wrapped sum of counts (precomputed in the file's stats).
    """
    i = NGRAM_STATIC - 1
    if best < 0 or not passes(acc, mx, LAX_MIN_SAMPLE[i], LAX_MIN_PERCENT[i]):
        return -1
    return best


@njit(cache=True)
def constmap_values(stats, first):
    """The constmap values of keys first, first + 1, ... with these stats (see frozen.DRAFTS)."""
    values = np.empty(stats.shape[0], dtype=np.uint32)
    for i in range(stats.shape[0]):
        v = np.int64(first + i)
        if try_static(stats[i, 0], np.int64(stats[i, 1]), np.int64(stats[i, 2])) >= 0:
            v |= DRAFTS
        values[i] = v
    return values


@njit(cache=True, nogil=True, _nrt=False, inline="always")
def draft_arrays(
    seq, n_seq, n_draft, nmin, nmax,
    c_slots, c_tags, c_tok, c_cnt,
    d_slots, d_tags, d_tok, d_cnt, d_cand,
    keys, fuse, params, offsets, stats, stok, scnt,
    buf,
):  # fmt: skip
    """Draft after seq[:n_seq] into buf; returns the count d, or CORRUPT.

    buf (length >= NGRAM_MAX + n_draft) receives the last min(n_seq, NGRAM_MAX)
    tokens of seq followed by the d drafted tokens. The caches come as their
    arrays: context (c_*) and dynamic (d_*) tables, and the frozen static
    cache. Arrays rather than the tuples holding them, because numba types a
    tuple argument slowly and a hot loop should unpack once.

    Each step requests, at once, every line its first reads need: the first
    slot of each table probe and the constmap's three cells. The static part
    is then read only when a proposal's weighting needs it, and the static
    cache's own draft only when the constmap's DRAFTS flag allows one; so a
    step that every cache fails, the commonest kind, waits for one level of
    memory.
    """
    if n_seq < NGRAM_STATIC:
        return 0
    tail = min(n_seq, NGRAM_MAX)
    for j in range(tail):
        buf[j] = seq[n_seq - tail + j]
    n_keys = keys.shape[0]
    pad = np.int32(-1)
    d = 0
    while d < n_draft:
        end = tail + d
        true_len = n_seq + d
        hs, hashes = _request_step(
            buf, end, true_len, nmin, nmax, c_slots, c_tags, d_slots, d_tags, d_cand,
            fuse, params, n_keys,
        )  # fmt: skip
        # The context role is not filtered (its thresholds are lax), so it is
        # handed the dynamic table's bits only to fill the argument.
        tok, slo, sn = propose(
            c_slots, c_tags, c_tok, c_cnt, d_cand, False, buf, end, true_len, nmin, nmax, hashes,
            LAX_MIN_SAMPLE, LAX_MIN_PERCENT, keys, fuse, params, offsets, stok, scnt,
            hs, np.int64(0), UNKNOWN if n_keys else np.int64(0),
        )  # fmt: skip
        if tok < 0 and sn != CORRUPT:
            tok, slo, sn = propose(
                d_slots, d_tags, d_tok, d_cnt, d_cand, True, buf, end, true_len, nmin, nmax, hashes,
                STRICT_MIN_SAMPLE, STRICT_MIN_PERCENT, keys, fuse, params, offsets, stok, scnt,
                hs, slo, sn,
            )  # fmt: skip
        if sn == CORRUPT:
            return CORRUPT
        if tok < 0 and may_draft(fuse, params, n_keys, hs):
            # The key's stats and span offsets are requested with its key row:
            # the three misses overlap instead of following one another.
            i = value_of(fuse, params, n_keys, hs) & (DRAFTS - 1)
            if i < n_keys:
                prefetch(stats, 3 * i)
                prefetch(offsets, i)
            key = find_key_hashed(keys, fuse, params, buf[end - 2], buf[end - 1], pad, pad, hs)
            if key >= 0:
                tok = try_static(stats[key, 0], np.int64(stats[key, 1]), np.int64(stats[key, 2]))
                if tok >= 0 and not is_follower(offsets, stok, params, key, tok):
                    return CORRUPT
        if tok < 0:
            break
        buf[end] = tok
        d += 1
    return d
