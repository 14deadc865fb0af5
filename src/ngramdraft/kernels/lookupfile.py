"""Scanning llama.cpp lookup cache files (records of int32, docs/format.md)."""

import numpy as np
from numba import njit

OK = 0
TRUNCATED = 1
BAD_NGRAM = 2
BAD_NTOKENS = 3
BAD_TOKEN = 4
BAD_COUNT = 5


@njit(cache=True)
def scan_records(data):
    """Record start positions (in int32 words) of a lookup file's words.

    Returns (starts, status, word): status is OK, or the first problem found
    and the word index where it is. Every record is checked: n-gram tokens
    real then -1 padding, ntokens > 0, follower ids >= 0, counts > 0.
    """
    n = data.shape[0]
    starts = np.empty(n // 7 + 1, dtype=np.int64)
    k = 0
    p = 0
    while p < n:
        if p + 5 > n:
            return starts[:k], TRUNCATED, p
        if data[p] < 0:
            return starts[:k], BAD_NGRAM, p
        pad = False
        for j in range(1, 4):
            if data[p + j] < -1 or (pad and data[p + j] != -1):
                return starts[:k], BAD_NGRAM, p + j
            pad = pad or data[p + j] == -1
        m = data[p + 4]
        if m <= 0:
            return starts[:k], BAD_NTOKENS, p + 4
        if p + 5 + 2 * m > n:
            return starts[:k], TRUNCATED, p
        for j in range(p + 5, p + 5 + 2 * m, 2):
            if data[j] < 0:
                return starts[:k], BAD_TOKEN, j
            if data[j + 1] <= 0:
                return starts[:k], BAD_COUNT, j + 1
        starts[k] = p
        k += 1
        p += 5 + 2 * m
    return starts[:k], OK, p


@njit(cache=True)
def gather_records(data, starts):
    """keys[K,4], offsets, tokens, counts of scanned records, followers sorted by token.

    Returns a negative record index -r-1 in place of keys when record r lists
    a follower twice (a hash table cannot).
    """
    k = starts.shape[0]
    keys = np.empty((k, 4), dtype=np.int32)
    offsets = np.zeros(k + 1, dtype=np.int64)
    for r in range(k):
        offsets[r + 1] = offsets[r] + data[starts[r] + 4]
    tokens = np.empty(offsets[k], dtype=np.int32)
    counts = np.empty(offsets[k], dtype=np.int32)
    for r in range(k):
        p = starts[r]
        keys[r] = data[p : p + 4]
        m = data[p + 4]
        body = data[p + 5 : p + 5 + 2 * m]
        order = np.argsort(body[0::2], kind="mergesort")
        o = offsets[r]
        for j in range(m):
            tokens[o + j] = body[2 * order[j]]
            counts[o + j] = body[2 * order[j] + 1]
            if j > 0 and tokens[o + j] == tokens[o + j - 1]:
                return -r - 1, keys, offsets, tokens, counts
    return k, keys, offsets, tokens, counts
