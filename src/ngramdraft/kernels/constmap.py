"""A constmap: a static function from n-gram keys to uint32 values, binary-fuse style.

Each key hashes to three cells of ``fuse`` (uint32), one in each of three
consecutive segments; the xor of the three cells is the key's value. Building
is the peeling construction of binary fuse filters (Graf & Lemire, 2022) with
a stored value in place of a fingerprint. A key that was not in the set
yields an arbitrary value: what the value means, and how an absent key is told
apart, is the caller's (``frozen.py`` stores each key's index and compares
the key stored there).
"""

import math

import numpy as np
from numba import njit

from .hashing import key_hash, mulhi32
from .prefetch import prefetch

_S18 = np.uint64(18)
_MAX_SEGMENT = 1 << 18


def fuse_shape(n_keys, slack=0.0):
    """(segment_length, segment_count) for n_keys keys.

    The constants are those of the binary fuse paper for three hashes; ``slack``
    widens the array after repeated failed constructions (tiny key sets).
    """
    size = max(n_keys, 2)
    seg = 1 << math.floor(math.log(size) / math.log(3.33) + 2.25)
    seg = min(seg, _MAX_SEGMENT)
    factor = max(1.125, 0.875 + 0.25 * math.log(1e6) / math.log(size)) + slack
    capacity = round(size * factor)
    count = max(1, -(-capacity // seg) - 2)
    return seg, count


@njit(cache=True, _nrt=False)
def cells(h, seg, seg_count_length):
    mask = np.uint64(seg - 1)
    h0 = mulhi32(h, np.uint64(seg_count_length))
    h1 = (h0 + np.uint64(seg)) ^ ((h >> _S18) & mask)
    h2 = (h0 + np.uint64(2 * seg)) ^ (h & mask)
    return np.int64(h0), np.int64(h1), np.int64(h2)


@njit(cache=True)
def key_hashes(keys, seed):
    """Seeded hashes of a (K, width) key array (width 2 or 4, padding -1)."""
    out = np.empty(keys.shape[0], dtype=np.uint64)
    width = keys.shape[1]
    for i in range(keys.shape[0]):
        k2 = keys[i, 2] if width > 2 else np.int32(-1)
        k3 = keys[i, 3] if width > 3 else np.int32(-1)
        out[i] = key_hash(keys[i, 0], keys[i, 1], k2, k3, seed)
    return out


@njit(cache=True)
def build(hashes, values, seg, seg_count):
    """The fuse array storing values[i] for hashes[i], or an empty array if peeling failed."""
    n = hashes.shape[0]
    scl = seg * seg_count
    size = scl + 2 * seg
    count = np.zeros(size, dtype=np.int32)
    hxor = np.zeros(size, dtype=np.uint64)
    ixor = np.zeros(size, dtype=np.uint32)
    for i in range(n):
        h = hashes[i]
        c0, c1, c2 = cells(h, seg, scl)
        for c in (c0, c1, c2):
            count[c] += 1
            hxor[c] ^= h
            ixor[c] ^= np.uint32(i)
    queue = np.empty(size, dtype=np.int32)
    nq = 0
    for c in range(size):
        if count[c] == 1:
            queue[nq] = c
            nq += 1
    order_cell = np.empty(n, dtype=np.int32)
    order_idx = np.empty(n, dtype=np.uint32)
    order_hash = np.empty(n, dtype=np.uint64)
    done = 0
    while nq > 0:
        nq -= 1
        c = queue[nq]
        if count[c] != 1:
            continue
        h = hxor[c]
        i = ixor[c]
        order_cell[done] = c
        order_idx[done] = i
        order_hash[done] = h
        done += 1
        c0, c1, c2 = cells(h, seg, scl)
        for d in (c0, c1, c2):
            count[d] -= 1
            hxor[d] ^= h
            ixor[d] ^= i
            if count[d] == 1:
                queue[nq] = d
                nq += 1
    if done != n:
        return np.zeros(0, dtype=np.uint32)
    fuse = np.zeros(size, dtype=np.uint32)
    for j in range(n - 1, -1, -1):
        c = order_cell[j]
        c0, c1, c2 = cells(order_hash[j], seg, scl)
        fuse[c] = 0
        fuse[c] = values[order_idx[j]] ^ fuse[c0] ^ fuse[c1] ^ fuse[c2]
    return fuse


@njit(cache=True, _nrt=False)
def value_of(fuse, params, n_keys, h):
    """The value the map stores for the key of hash h; arbitrary if the key is absent."""
    if n_keys == 0:
        return np.int64(0)
    c0, c1, c2 = cells(h, np.int64(params[1]), np.int64(params[2]))
    return np.int64(fuse[c0] ^ fuse[c1] ^ fuse[c2])


@njit(cache=True, _nrt=False)
def prefetch_cells(fuse, params, n_keys, h):
    """Start loading the three cells value_of will read."""
    if n_keys:
        c0, c1, c2 = cells(h, np.int64(params[1]), np.int64(params[2]))
        prefetch(fuse, c0)
        prefetch(fuse, c1)
        prefetch(fuse, c2)
