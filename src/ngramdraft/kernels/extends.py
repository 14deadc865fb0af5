"""Whether an engine's row of tokens extends the sequence a drafter holds (a batch's sync)."""

import numpy as np
from numba import njit


@njit(cache=True, inline="always")
def extends(seq, n, row, m):
    """Whether row[:m] starts with seq[:n] and its other ids are all >= 0.

    The known prefix is compared whole: rows that carry no identity but
    their content have no cheaper exact test.
    """
    if m < n:
        return False
    # Branch-free reductions that LLVM vectorizes: most rows do match.
    differ = np.int32(0)
    for j in range(n):
        differ |= seq[j] ^ row[j]
    sign = np.int32(0)
    for j in range(n, m):
        sign |= row[j]
    return differ == 0 and sign >= 0
