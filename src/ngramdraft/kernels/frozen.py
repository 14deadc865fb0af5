"""Lookups in a frozen (read-only, usually mmap'd) cache: constmap + key check + span.

A frozen cache is the tuple of arrays a static cache file holds:
``keys[K, width]`` sorted, ``offsets[K+1]``, ``stats[K, 3]`` (best token, its
count, wrapped sum of counts), ``fuse`` (the constmap), and the flat
``tokens``/``counts`` arrays, sorted by token within each key's span.
``params`` holds the constmap's seed, segment length and segment-count length,
then the largest count and the largest token id in the file.

The constmap's value for key i is ``i | DRAFTS`` when the key's own statistics
pass the static-only draft thresholds, else ``i``. For a key not in the file
the value is arbitrary, but such a key has no static-only draft either, so a
clear DRAFTS bit answers "no static-only draft" exactly, from the three cells
alone. A draft step that every cache fails (most steps) so waits for one
level of memory, not two.
"""

from collections import namedtuple

import numpy as np
from numba import njit

from .constmap import value_of
from .hashing import key_hash
from .search import find

Frozen = namedtuple("Frozen", "keys offsets stats fuse tokens counts params")

CORRUPT = -2
DRAFTS = np.int64(1 << 31)


def empty_frozen(width=2):
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


@njit(cache=True, _nrt=False)
def key_hash_of(params, k0, k1, k2, k3):
    """The key's hash under this frozen cache's constmap seed."""
    return key_hash(k0, k1, k2, k3, params[0])


@njit(cache=True, _nrt=False)
def find_key_hashed(keys, fuse, params, k0, k1, k2, k3, h):
    """Index of the key of hash h in a frozen cache's keys, or -1 when absent."""
    n = keys.shape[0]
    i = value_of(fuse, params, n, h) & (DRAFTS - 1)
    if i >= n:
        return np.int64(-1)
    if keys[i, 0] != k0 or keys[i, 1] != k1:
        return np.int64(-1)
    if keys.shape[1] > 2:
        if keys[i, 2] != k2 or keys[i, 3] != k3:
            return np.int64(-1)
    elif k2 != -1 or k3 != -1:
        return np.int64(-1)
    return i


@njit(cache=True, _nrt=False)
def followers_span(keys, fuse, params, offsets, n_entries, k0, k1, k2, k3, h):
    """(start, length) of the followers of the key of hash h; (0, 0) when absent.

    The length is CORRUPT when the file's offsets are impossible.
    """
    i = find_key_hashed(keys, fuse, params, k0, k1, k2, k3, h)
    if i < 0:
        return np.int64(0), np.int64(0)
    return span(offsets, n_entries, i)


@njit(cache=True, _nrt=False)
def may_draft(fuse, params, n_keys, h):
    """False when the key of hash h surely has no static-only draft (see DRAFTS)."""
    return n_keys > 0 and (value_of(fuse, params, n_keys, h) & DRAFTS) != 0


@njit(cache=True, _nrt=False)
def span(offsets, n_entries, i):
    """(start, length) of key i's followers; length CORRUPT if the offsets are impossible.

    Offsets are not all read when a file is opened, so a damaged file must not
    be able to send a kernel outside the arrays: the check is two comparisons.
    """
    lo = offsets[i]
    hi = offsets[i + 1]
    if lo < 0 or hi < lo or hi > n_entries:
        return np.int64(0), np.int64(CORRUPT)
    return lo, hi - lo


@njit(cache=True, _nrt=False)
def is_follower(offsets, tokens, params, i, token):
    """Whether ``token`` is one of key i's followers and within the file's token range.

    A static-only draft comes from the key's precomputed stats, which a
    damaged file can make anything: this ties it to the bounds-checked span
    and to the largest id the (checksummed) header records, so that no token
    the model's vocabulary lacks is ever drafted.
    """
    lo, n = span(offsets, tokens.shape[0], i)
    if n == CORRUPT or token > np.int64(params[4]):
        return False
    return find(tokens, lo, n, token) >= 0
