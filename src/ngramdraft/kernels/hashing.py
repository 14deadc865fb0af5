"""64-bit hashing of n-gram keys, shared by the mutable table and the constmap."""

import numpy as np
from numba import njit

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)
_S32 = np.uint64(32)
_LOW32 = np.uint64(0xFFFFFFFF)


@njit(cache=True, _nrt=False)
def mix64(x):
    # splitmix64's finalizer: every input bit flips each output bit with p ~ 1/2,
    # which linear probing and the fuse segments both rely on.
    x = (x ^ (x >> _S30)) * _M1
    x = (x ^ (x >> _S27)) * _M2
    return x ^ (x >> _S31)


@njit(cache=True, _nrt=False)
def _pack(a, b):
    # Masking in int64 first means the same with and without the JIT (NumPy
    # refuses np.uint32(-1) where numba wraps it).
    return (np.uint64(np.int64(a) & 0xFFFFFFFF) << _S32) | np.uint64(np.int64(b) & 0xFFFFFFFF)


@njit(cache=True, _nrt=False)
def key_hash(k0, k1, k2, k3, seed):
    """Hash of a 4-slot key (padding slots hold -1), seeded."""
    h = mix64(_pack(k0, k1) ^ (seed * _GOLDEN))
    return mix64(h ^ _pack(k2, k3))


@njit(cache=True, _nrt=False)
def mulhi32(h, n):
    """(h * n) >> 64 for n < 2**32, without 128-bit integers."""
    hi = h >> _S32
    lo = h & _LOW32
    return (hi * n + ((lo * n) >> _S32)) >> _S32
