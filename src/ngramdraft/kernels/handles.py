"""Handles: the arrays of a cache passed to a kernel as one int64 array of (address, size).

numba checks and unboxes every argument of every call, about 100 ns an
array; a draft call that took the 22 arrays of three caches spent more on
that than on drafting, and every call site had to list them in the right
order. A handle is an int64 array holding, for each array of a table or a
frozen cache, its address and its size, written by one function here
(``table_handle``, ``frozen_handle``) and read back by one inlined function
(``table_of``, ``frozen_of``) inside kernels, which rebuilds the
:data:`~ngramdraft.kernels.table.Table` or
:data:`~ngramdraft.kernels.frozen.Frozen` namedtuple: a call passes one
array per cache, and no call site can forget an array or swap two.

Layout (int64 words), in the namedtuples' field order:

=========  ==============================================================
table      slots (address, rows) | tags | tok | cnt | meta | marks:
           address, length each (12 words)
frozen     keys (address, rows) | offsets | stats (address, rows) | fuse |
           tokens | counts | params: address, length (14 words)
positions  text (address, length) | prev (address, columns) | head
           (address, columns) | n, the tokens held (7 words; the suffix
           rules' PositionIndex, ``caches/positions.py``)
=========  ==============================================================

A handle borrows: whoever builds one must keep its arrays alive and build a
new one whenever an array is replaced (a table grows);
``rulesets/llamacpp/state.py`` does both for a drafter's state.
"""

import ctypes

import numpy as np
from numba import carray, config, njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from ..errors import InternalError
from .frozen import Frozen
from .table import ROW, Table

TABLE_WORDS = 12
FROZEN_WORDS = 14
POSITIONS_WORDS = 7
POSITIONS_N = 6
SIZES = np.array([2, 4, 8], dtype=np.int64)  # a PositionIndex's n-gram sizes: prev's, head's rows


if config.DISABLE_JIT:  # coverage runs the kernels as Python, where carray takes ctypes'
    _NOWHERE = ctypes.create_string_buffer(8)  # what an empty array's null address reads

    def _pointer(address):
        """The int64 ``address`` as a void pointer, for numba.carray."""
        return ctypes.c_void_p(int(address) or ctypes.addressof(_NOWHERE))

else:

    @intrinsic
    def _pointer(typingctx, address):
        """The int64 ``address`` as a void pointer, for numba.carray."""

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], cgutils.voidptr_t)

        return types.voidptr(types.int64), codegen


def _put(out: np.ndarray, at: int, arrays: tuple[np.ndarray, ...]) -> None:
    for i, a in enumerate(arrays):
        if not a.flags.c_contiguous:
            raise InternalError("a handle was asked to hold an array that is not C-contiguous")
        out[at + 2 * i] = a.ctypes.data
        out[at + 2 * i + 1] = a.shape[0]


def table_handle(table: Table, out: np.ndarray | None = None, at: int = 0) -> np.ndarray:
    """Write the handle of a Table into out[at:at+12] (a new array if None)."""
    out = np.zeros(TABLE_WORDS, dtype=np.int64) if out is None else out
    _put(out, at, table)
    return out


def frozen_handle(frozen: Frozen, out: np.ndarray | None = None, at: int = 0) -> np.ndarray:
    """Write the handle of a Frozen cache into out[at:at+14]."""
    out = np.zeros(FROZEN_WORDS, dtype=np.int64) if out is None else out
    _put(out, at, frozen)
    return out


def positions_handle(text: np.ndarray, prev: np.ndarray, head: np.ndarray, out: np.ndarray) -> None:
    """Write a PositionIndex's arrays into its handle (its count, word 6, is left alone)."""
    _put(out, 0, (text, prev.reshape(-1), head.reshape(-1)))
    out[3] = prev.shape[1]
    out[5] = head.shape[1]


@njit(cache=True, inline="always")
def positions_at(h, at):
    """(text, prev, head, handle) of the PositionIndex whose handle's address is h[at]."""
    p = carray(_pointer(h[at]), (POSITIONS_WORDS,), np.int64)
    rows = SIZES.shape[0]
    return (
        carray(_pointer(p[0]), (p[1],), np.int32),
        carray(_pointer(p[2]), (rows, p[3]), np.int32),
        carray(_pointer(p[4]), (rows, p[5]), np.int32),
        p,
    )


@njit(cache=True, inline="always")
def int32s(h, at):
    """The int32 array whose (address, length) is h[at:at+2]."""
    return carray(_pointer(h[at]), (h[at + 1],), np.int32)


@njit(cache=True, inline="always")
def int64s(h, at):
    """The int64 array whose (address, length) is h[at:at+2]."""
    return carray(_pointer(h[at]), (h[at + 1],), np.int64)


@njit(cache=True, inline="always")
def table_of(h, at):
    """The Table whose handle is at h[at:]."""
    return Table(
        carray(_pointer(h[at]), (h[at + 1], ROW), np.int64),
        carray(_pointer(h[at + 2]), (h[at + 3],), np.uint8),
        carray(_pointer(h[at + 4]), (h[at + 5],), np.int32),
        carray(_pointer(h[at + 6]), (h[at + 7],), np.int32),
        carray(_pointer(h[at + 8]), (h[at + 9],), np.int64),
        carray(_pointer(h[at + 10]), (h[at + 11],), np.uint64),
    )


@njit(cache=True, inline="always")
def frozen_of(h, at):
    """The Frozen cache whose handle is at h[at:]."""
    return Frozen(
        carray(_pointer(h[at]), (h[at + 1], 2), np.int32),
        carray(_pointer(h[at + 2]), (h[at + 3],), np.int64),
        carray(_pointer(h[at + 4]), (h[at + 5], 3), np.int32),
        carray(_pointer(h[at + 6]), (h[at + 7],), np.uint32),
        carray(_pointer(h[at + 8]), (h[at + 9],), np.int32),
        carray(_pointer(h[at + 10]), (h[at + 11],), np.int32),
        carray(_pointer(h[at + 12]), (h[at + 13],), np.uint64),
    )


@njit(cache=True, inline="always")
def table_at(h, at):
    """The Table whose handle's address is h[at] (a handle held by its cache, followed)."""
    return table_of(carray(_pointer(h[at]), (TABLE_WORDS,), np.int64), 0)


@njit(cache=True, inline="always")
def frozen_at(h, at):
    """The Frozen cache whose handle's address is h[at]."""
    return frozen_of(carray(_pointer(h[at]), (FROZEN_WORDS,), np.int64), 0)
