"""Branchless binary search over a sorted int32 span."""

from numba import njit


@njit(cache=True, _nrt=False)
def floor_index(arr, lo, n, t):
    """Index of the last element <= t in arr[lo:lo+n] (lo if none is), n >= 1.

    The loop runs ceil(log2(n)) times whatever t is, and the select compiles
    to a conditional move, so the branch predictor never has to guess.
    """
    base = lo
    while n > 1:
        half = n >> 1
        base = base + half if arr[base + half] <= t else base
        n -= half
    return base


@njit(cache=True, _nrt=False)
def find(arr, lo, n, t):
    """Index of t in the sorted span arr[lo:lo+n], or -1."""
    if n <= 0:
        return -1
    i = floor_index(arr, lo, n, t)
    return i if arr[i] == t else -1
