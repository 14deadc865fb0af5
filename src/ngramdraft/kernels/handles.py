"""Handles: the arrays of a cache passed to a kernel as one int64 array of (address, size).

numba checks and unboxes every argument of every call, about 100 ns an
array; a draft call that took the 22 arrays of three caches spent more on
that than on drafting, and every call site had to list them in the right
order. A handle is an int64 array holding, for each array of a table or a
frozen cache, its address and its size, written by one function here
(``table_handle``, ``frozen_handle``) and read back by one inlined function
(``table_arrays``, ``frozen_arrays``) inside kernels: a call passes one
array per cache, and no call site can forget an array or swap two.

Layout (int64 words):

=========  ==============================================================
table      slots address, rows | tags | tok | cnt | meta | cand: address,
           length each (12 words)
frozen     keys address, rows | offsets | stats | fuse | tokens | counts |
           params: address, length (rows for keys and stats) (14 words)
=========  ==============================================================

A handle borrows: whoever builds one must keep its arrays alive and build a
new one whenever an array is replaced (a table grows). ``Handles`` below
does both for a set of named slots.
"""

import numpy as np
from numba import carray, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .table import ROW

TABLE_WORDS = 12
FROZEN_WORDS = 14


@intrinsic
def _pointer(typingctx, address):
    """The int64 ``address`` as a void pointer, for numba.carray."""

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], cgutils.voidptr_t)

    return types.voidptr(types.int64), codegen


def _put(out, at, arrays):
    for i, a in enumerate(arrays):
        if not a.flags.c_contiguous:
            raise ValueError("handles hold C-contiguous arrays only")
        out[at + 2 * i] = a.ctypes.data
        out[at + 2 * i + 1] = a.shape[0]


def table_handle(table, out=None, at=0):
    """Write the handle of a Table (kernels/table.py) into out[at:at+12] (a new array if None)."""
    out = np.zeros(TABLE_WORDS, dtype=np.int64) if out is None else out
    _put(out, at, table)
    return out


def frozen_handle(frozen, out=None, at=0):
    """Write the handle of a Frozen cache (kernels/frozen.py) into out[at:at+14]."""
    out = np.zeros(FROZEN_WORDS, dtype=np.int64) if out is None else out
    f = frozen
    _put(out, at, (f.keys, f.offsets, f.stats, f.fuse, f.tokens, f.counts, f.params))
    return out


@njit(cache=True, inline="always")
def table_arrays(h, at):
    """(slots, tags, tok, cnt, meta, cand) of the table handle at h[at:]."""
    return (
        carray(_pointer(h[at]), (h[at + 1], ROW), np.int64),
        carray(_pointer(h[at + 2]), (h[at + 3],), np.uint8),
        carray(_pointer(h[at + 4]), (h[at + 5],), np.int32),
        carray(_pointer(h[at + 6]), (h[at + 7],), np.int32),
        carray(_pointer(h[at + 8]), (h[at + 9],), np.int64),
        carray(_pointer(h[at + 10]), (h[at + 11],), np.uint64),
    )


@njit(cache=True, inline="always")
def frozen_arrays(h, at):
    """(keys, fuse, params, offsets, stats, tokens, counts) of the frozen handle at h[at:]."""
    return (
        carray(_pointer(h[at]), (h[at + 1], 2), np.int32),
        carray(_pointer(h[at + 6]), (h[at + 7],), np.uint32),
        carray(_pointer(h[at + 12]), (h[at + 13],), np.uint64),
        carray(_pointer(h[at + 2]), (h[at + 3],), np.int64),
        carray(_pointer(h[at + 4]), (h[at + 5], 3), np.int32),
        carray(_pointer(h[at + 8]), (h[at + 9],), np.int32),
        carray(_pointer(h[at + 10]), (h[at + 11],), np.int32),
    )
