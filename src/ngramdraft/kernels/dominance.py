"""Whether a part's top follower can hold a share of its samples: one test, three users.

A *part* is an n-gram's followers with their counts; its *samples* are the
sum of those counts. Drafting rules (``rulesets/llamacpp/step.py``) ask whether a
part has at least ``min_sample`` samples and its winner at least
``min_percent`` of them, in C++'s int32 arithmetic, which wraps. Two indexes
answer a weaker question ahead of time so that most parts are never read:
the mutable table's marks (``kernels/table.py``) and the static file's
draft flags (``kernels/frozen.py``). All three ask it through
:func:`may_reach`, exact and without wrap-around: below WRAP_SAFE samples no
product of a percent (<= 100) and a count wraps, so the int32 test and the
exact one agree; at or above it, a wrapped test can pass whatever the
shares, and so may_reach says yes.

An index built with (sample, percent) answers for every rule at least that
strict: a part the rule passes is a part the index marked.
"""

import numpy as np
from numba import njit

WRAP_SAFE = (2**31 - 1) // 100


@njit(cache=True, _nrt=False)
def wrap32(x):
    """x reduced to int32 with two's-complement wrap-around, kept in an int64."""
    return ((np.int64(x) + 0x80000000) & 0xFFFFFFFF) - 0x80000000


@njit(cache=True, _nrt=False)
def may_reach(total, maxc, min_sample, min_percent):
    """Whether a part of exact sample count ``total`` and largest count ``maxc`` can pass.

    Exact below WRAP_SAFE (the winner of a scan never counts more than
    maxc); above it every part may pass, as wrapped arithmetic allows.
    """
    return total >= WRAP_SAFE or (total >= min_sample and 100 * maxc >= min_percent * total)
