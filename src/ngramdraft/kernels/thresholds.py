"""llama.cpp's drafting thresholds, as tables (common/ngram-cache.h).

A part proposes its best follower only if its count sum reaches MIN_SAMPLE
and the best follower's count is at least MIN_PERCENT of the sum, in int32
arithmetic with wrap-around as the compiled C++ does (``passes``). The context
cache uses the lax tables, the dynamic cache the strict ones, the static
cache alone the lax entry of NGRAM_STATIC. Tables are indexed by the
position in the n-gram list (sizes ngram_min..ngram_max), not by the size.
"""

import numpy as np
from numba import njit

NGRAM_MIN = 1
NGRAM_MAX = 4
NGRAM_STATIC = 2

LAX_MIN_SAMPLE = np.array([2, 2, 1, 1], dtype=np.int64)
LAX_MIN_PERCENT = np.array([66, 50, 50, 50], dtype=np.int64)
STRICT_MIN_SAMPLE = np.array([4, 3, 2, 2], dtype=np.int64)
STRICT_MIN_PERCENT = np.array([75, 66, 66, 66], dtype=np.int64)

# What a dynamic-role part needs at the least, whatever its position: the
# table marks parts that reach it (kernels/table.py, ``cand``).
STRICT_FLOOR_SAMPLE = int(STRICT_MIN_SAMPLE.min())
STRICT_FLOOR_PERCENT = int(STRICT_MIN_PERCENT.min())

# Below this exact sum, neither the sum nor 100 * count nor percent * sum can
# wrap, so the thresholds can be tested on the stored sum and largest count
# before reading the part (the winner's count is never above the largest).
PRECHECK_LIMIT = (2**31 - 1) // 100


@njit(cache=True, _nrt=False)
def may_pass(total, maxc, min_sample, min_percent):
    """Whether a part of exact count sum ``total`` and largest count ``maxc`` can pass.

    Exact below PRECHECK_LIMIT (the scan's winner has at most maxc); above it
    the wrapped int32 arithmetic decides, so every such part may pass.
    """
    return total >= PRECHECK_LIMIT or (total >= min_sample and 100 * maxc >= min_percent * total)


@njit(cache=True, _nrt=False)
def wrap32(x):
    """x reduced to int32 with two's-complement wrap-around, kept in an int64."""
    return ((np.int64(x) + 0x80000000) & 0xFFFFFFFF) - 0x80000000


@njit(cache=True, _nrt=False)
def passes(acc, mx, min_sample, min_percent):
    """Whether a part of wrapped count sum acc whose winner counts mx proposes it."""
    return acc >= min_sample and wrap32(100 * mx) >= wrap32(min_percent * acc)
