"""An engine's padded token table: the first id out of range among those a batch reads.

An engine's sampler hands over each sequence's verified tokens as a row of a
table, padded past its count (vLLM pads with -1). Only each row's first
count ids are tokens; numpy can check them only by building a mask of the
whole table, which costs a server's step more than the accept itself.
"""

import numpy as np
from numba import njit

_TOKEN_MAX = np.int64(2**31 - 1)


@njit(cache=True, nogil=True, _nrt=False)
def first_bad_id(flat, starts, ends):
    """Index in ``flat`` of the first id outside 0 .. 2**31-1 in some flat[starts[i]:ends[i]],
    or -1. The spans must lie within ``flat``."""
    for i in range(starts.shape[0]):
        for j in range(starts[i], ends[i]):
            if flat[j] < 0 or flat[j] > _TOKEN_MAX:
                return j
    return -1
