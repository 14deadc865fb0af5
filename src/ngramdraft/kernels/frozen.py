"""A frozen (read-only, usually mmap'd) cache: its arrays, lookups, and what it stores per key.

A frozen cache is the tuple of arrays a cache file holds (``files/ngd/``
reads and writes them; ``docs/format.md`` specifies them): ``keys[K,
width]`` sorted, ``offsets[K+1]``, ``stats[K, 3]`` (best token, its count,
wrapped sum of counts), ``fuse`` (the constmap), and the flat
``tokens``/``counts`` arrays, sorted by token within each key's span.
``params`` holds the constmap's seed, segment length and segment-count
length, then the largest count and the largest token id in the file.

The constmap's value for key i is ``i | DRAFTS`` when the key's part may
reach FLAG_SAMPLE samples with FLAG_PERCENT of them on its best follower
(``dominance.may_reach``), else ``i``. For a key not in the file the value
is arbitrary, but such a key has no part either, so a clear DRAFTS bit
answers "no rule at least that strict drafts from this key alone" exactly,
from the three cells alone. A draft step that every cache fails (most
steps) so waits for one level of memory, not two. Which rules may use the
flag is the rules' business (``rulesets/llamacpp/step.py``).
"""

from collections import namedtuple

import numpy as np
from numba import njit

from .constmap import value_of
from .dominance import may_reach, wrap32
from .hashing import key_hash
from .search import find

Frozen = namedtuple("Frozen", "keys offsets stats fuse tokens counts params")

CORRUPT = -2
DRAFTS = np.int64(1 << 31)
# The flags' definition: llama.cpp's lax thresholds of a static 2-gram.
FLAG_SAMPLE = 2
FLAG_PERCENT = 50


def empty_frozen(width: int = 2) -> Frozen:
    """A frozen cache with no keys (the static role when there is no static cache)."""
    arrays = Frozen(
        keys=np.zeros((0, width), dtype=np.int32),
        offsets=np.zeros(1, dtype=np.int64),
        stats=np.zeros((0, 3), dtype=np.int32),
        fuse=np.zeros(0, dtype=np.uint32),
        tokens=np.zeros(0, dtype=np.int32),
        counts=np.zeros(0, dtype=np.int32),
        params=np.zeros(5, dtype=np.uint64),
    )
    for a in arrays:
        a.flags.writeable = False
    return arrays


@njit(cache=True, _nrt=False, inline="always")
def key_hash_of(f, key):
    """The key's hash under this frozen cache's constmap seed."""
    return key_hash(key[0], key[1], key[2], key[3], f.params[0])


@njit(cache=True, _nrt=False, inline="always")
def find_key_hashed(f, key, h):
    """Index of the key of hash h in a frozen cache's keys, or -1 when absent."""
    keys = f.keys
    n = keys.shape[0]
    i = value_of(f.fuse, f.params, n, h) & (DRAFTS - 1)
    if i >= n:
        return np.int64(-1)
    if keys[i, 0] != key[0] or keys[i, 1] != key[1]:
        return np.int64(-1)
    if keys.shape[1] > 2:
        if keys[i, 2] != key[2] or keys[i, 3] != key[3]:
            return np.int64(-1)
    elif key[2] != -1 or key[3] != -1:
        return np.int64(-1)
    return i


@njit(cache=True, _nrt=False, inline="always")
def followers_span(f, key, h):
    """(start, length) of the followers of the key of hash h; (0, 0) when absent.

    The length is CORRUPT when the file's offsets are impossible.
    """
    i = find_key_hashed(f, key, h)
    if i < 0:
        return np.int64(0), np.int64(0)
    return span(f, i)


@njit(cache=True, _nrt=False, inline="always")
def may_draft(f, h):
    """False when the key of hash h surely has no part that reaches the flags' shares."""
    n_keys = f.keys.shape[0]
    return n_keys > 0 and (value_of(f.fuse, f.params, n_keys, h) & DRAFTS) != 0


@njit(cache=True, _nrt=False, inline="always")
def span(f, i):
    """(start, length) of key i's followers; length CORRUPT if the offsets are impossible.

    Offsets are not all read when a file is opened, so a damaged file must not
    be able to send a kernel outside the arrays: the check is two comparisons.
    """
    lo = f.offsets[i]
    hi = f.offsets[i + 1]
    if lo < 0 or hi < lo or hi > f.tokens.shape[0]:
        return np.int64(0), np.int64(CORRUPT)
    return lo, hi - lo


@njit(cache=True, _nrt=False, inline="always")
def is_follower(f, i, token):
    """Whether ``token`` is one of key i's followers and within the file's token range.

    A draft taken from a key's stats, which a damaged file can make anything,
    is tied by this to the bounds-checked span and to the largest id the
    (checksummed) header records, so that no token the model's vocabulary
    lacks is ever drafted.
    """
    lo, n = span(f, i)
    if n == CORRUPT or token > np.int64(f.params[4]):
        return False
    return find(f.tokens, lo, n, token) >= 0


@njit(cache=True)
def span_stats(offsets, tokens, counts):
    """Per key: (best token, its count, wrapped sum): the stats section's rows.

    best is the first strictly largest count in ascending token order.
    """
    k = offsets.shape[0] - 1
    stats = np.empty((k, 3), dtype=np.int32)
    for i in range(k):
        best = -1
        mx = 0
        acc = np.int64(0)
        for j in range(offsets[i], offsets[i + 1]):
            if counts[j] > mx:
                mx = counts[j]
                best = tokens[j]
            acc = wrap32(acc + counts[j])
        stats[i, 0] = best
        stats[i, 1] = mx
        stats[i, 2] = acc
    return stats


@njit(cache=True)
def key_values(offsets, counts, first):
    """The constmap values of keys first, first + 1, ...: each index, flagged (see DRAFTS)."""
    k = offsets.shape[0] - 1
    values = np.empty(k, dtype=np.uint32)
    for i in range(k):
        total = np.int64(0)
        mx = np.int64(0)
        for j in range(offsets[i], offsets[i + 1]):
            total += counts[j]
            mx = max(mx, np.int64(counts[j]))
        v = np.int64(first + i)
        if total > 0 and may_reach(total, mx, FLAG_SAMPLE, FLAG_PERCENT):
            v |= DRAFTS
        values[i] = v
    return values
