"""Counting 2-gram followers for static caches: packed triples.

A triple (a, b, c) says "2-gram (a, b) was followed by c". With ``bits`` bits
per token (3 * bits <= 63) it packs into one uint64 as ``a << 2B | b << B | c``,
so sorting the packed integers sorts the triples lexicographically, which is
exactly the static file's order (keys ascending, followers ascending).
"""

import numpy as np
from numba import njit

INT32_MAX = 2**31 - 1


@njit(cache=True, nogil=True)
def pack_tokens(tokens, base, a_lo, a_hi, bits, out, pos, starts):
    """Append the packed triples of a token run whose first token is in [a_lo, a_hi).

    tokens[0] sits at position ``base`` of the whole sequence; a triple whose
    three tokens do not all follow the same document start (``starts``,
    sorted, may be empty) is skipped. Returns the new fill position of out.
    """
    sh1 = np.uint64(bits)
    sh2 = np.uint64(2 * bits)
    nxt = np.searchsorted(starts, base + 2, side="right")  # first start after the first follower
    doc = starts[nxt - 1] if nxt > 0 else np.int64(0)
    for i in range(2, tokens.shape[0]):
        while nxt < starts.shape[0] and starts[nxt] <= base + i:
            doc = starts[nxt]
            nxt += 1
        a = tokens[i - 2]
        if a_lo <= a < a_hi and base + i - 2 >= doc:
            out[pos] = (
                (np.uint64(a) << sh2) | (np.uint64(tokens[i - 1]) << sh1) | np.uint64(tokens[i])
            )
            pos += 1
    return pos


@njit(cache=True, nogil=True)
def pack_spans(keys, offsets, tokens, counts, selected, bits, out, out_counts, pos):
    """Append the triples of the selected 2-gram keys of a cache, with their counts."""
    sh1 = np.uint64(bits)
    sh2 = np.uint64(2 * bits)
    for k in selected:
        hi = (np.uint64(keys[k, 0]) << sh2) | (np.uint64(keys[k, 1]) << sh1)
        for j in range(offsets[k], offsets[k + 1]):
            out[pos] = hi | np.uint64(tokens[j])
            out_counts[pos] = counts[j]
            pos += 1
    return pos


@njit(cache=True, nogil=True)
def reduce_sorted(packed, counts, n):
    """Collapse equal neighbours of sorted packed[:n] in place, summing their counts.

    counts[:n] holds each item's count, or counts is empty and every item
    counts 1. Returns m, the number of distinct triples (now packed[:m]), and
    their counts. Distinct triples are counted first so that only m counts,
    not n, are ever allocated.
    """
    m = 0
    for i in range(n):
        if i == 0 or packed[i] != packed[i - 1]:
            m += 1
    out_counts = np.zeros(m, dtype=np.int64)
    k = -1
    for i in range(n):
        if i == 0 or packed[i] != packed[k]:
            k += 1
            packed[k] = packed[i]
        out_counts[k] += counts[i] if counts.shape[0] > 0 else 1
    return m, out_counts


@njit(cache=True, nogil=True)
def group(packed, counts, bits):
    """Split sorted distinct triples into keys, offsets[K+1], tokens, counts.

    A count past what an int32 holds is stored as INT32_MAX: it saturates,
    as the mutable cache's counts do (a corpus of hundreds of billions of
    tokens can count one (2-gram, follower) pair that often).
    """
    mask = np.uint64((1 << bits) - 1)
    sh1 = np.uint64(bits)
    sh2 = np.uint64(2 * bits)
    n = packed.shape[0]
    n_keys = 0
    for i in range(n):
        if i == 0 or (packed[i] >> sh1) != (packed[i - 1] >> sh1):
            n_keys += 1
    keys = np.empty((n_keys, 2), dtype=np.int32)
    starts = np.empty(n_keys + 1, dtype=np.int64)
    tok = np.empty(n, dtype=np.int32)
    cnt = np.empty(n, dtype=np.int32)
    k = -1
    for i in range(n):
        p = packed[i]
        if i == 0 or (p >> sh1) != (packed[i - 1] >> sh1):
            k += 1
            keys[k, 0] = np.int32(p >> sh2)
            keys[k, 1] = np.int32((p >> sh1) & mask)
            starts[k] = i
        tok[i] = np.int32(p & mask)
        cnt[i] = np.int32(min(counts[i], INT32_MAX))
    starts[n_keys] = n
    return keys, starts, tok, cnt
