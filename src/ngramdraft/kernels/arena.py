"""Memory for the n-gram tables on huge pages: many small tables packed into large regions.

Why: a server's BatchDrafter keeps one context table per sequence, each a
few KiB to a few hundred KiB, and reads every one of them cold at each step.
256 sequences' tables span about 100 MB, far more than the TLB maps in 4 KiB
pages, so a probe that misses the cache also waits for a page walk. Linux
backs memory advised ``MADV_HUGEPAGE`` with 2 MiB pages where it can
(transparent huge pages in "madvise" mode, Debian's and Ubuntu's default;
with "always" every allocation gets them already, with "never" none).
numpy advises its own arrays of 4 MiB and more (``LARGE``); smaller ones, and
whatever a numba kernel allocates, come from malloc, which does not. So the
tables' arrays below ``LARGE`` are carved from regions of ``REGION`` bytes
that numpy allocates, and therefore advises. Measured in ``docs/serving.md``.

Layout: a region is cut into blocks of a power of two bytes (its size
class), from ``SMALL`` up, each starting on a cache line; arrays smaller
than ``SMALL`` (less than a page) are numpy's own. A block is handed out
as an array whose memory belongs to a keeper object (``_Block``); numpy
points every view of the array back to it, so the keeper dies only when
the last view does, and only then does the block go back to its class's
free list, to be zeroed and handed out again. A region whose every block
is free is dropped, its memory returned; a free block waits for its own
class, so the arena holds at most each class's peak in use. A block comes
back through a weakref callback, which may run on any thread, even inside
:func:`zeros`: it only appends to a queue, which :func:`zeros` drains
under its lock.

Worked example (``REGION`` of 32 MiB): ``zeros((4096, 8), int64)`` (256 KiB)
takes the first block of a new region, bytes 0-262,143; ``zeros(1500,
int32)`` (6,000 bytes) the 8 KiB block after it. When the first array and
its views are gone, that 256 KiB block waits in class 262,144's free list
and the next request of 128-256 KiB takes it, zeroed; once both blocks are
free and a newer region is the one being cut, the region is dropped.
"""

import itertools
import math
import os
import threading
import weakref
from collections import deque
from typing import Any

import numpy as np

REGION = 1 << 25  # bytes numpy allocates at once (and advises): 16 huge pages
LARGE = 1 << 22  # numpy advises huge pages for arrays this large itself
SMALL = 1 << 12  # smaller arrays are numpy's own: less than a page, and many
LINE = 64  # every block starts on a cache line


class _Region:
    """Memory cut into blocks: ``at`` bytes cut so far, ``live`` blocks handed out."""

    __slots__ = ("address", "at", "live", "memory")

    def __init__(self) -> None:
        self.memory = np.zeros(REGION, dtype=np.uint8)
        self.address = self.memory.ctypes.data
        self.at = -self.address % LINE
        self.live = 0


class _Block:
    """The owner numpy sees of one block's array (and of every view of it)."""

    __slots__ = ("__array_interface__", "__weakref__", "region")

    def __init__(self, region: _Region, offset: int, shape: tuple[int, ...], dtype: Any) -> None:
        self.region = region  # keeps the region's memory while the block is in use
        self.__array_interface__ = {
            "data": (region.address + offset, False),
            "shape": shape,
            "typestr": dtype.str,
            "version": 3,
        }


_lock = threading.Lock()
# A child forked while another thread held the lock would wait for it forever.
os.register_at_fork(after_in_child=lambda: globals().update(_lock=threading.Lock()))
_free: dict[int, list[tuple[_Region, int]]] = {}  # size class -> free blocks
_returned: deque[tuple[_Region, int, int]] = deque()  # blocks whose arrays are gone
_pending: dict["weakref.ref[_Block]", tuple[_Region, int, int]] = {}  # blocks in use
_cutting: _Region | None = None  # the region new blocks are cut from


def zeros(shape: int | tuple[int, ...], dtype: Any) -> np.ndarray:
    """A zeroed C-contiguous array, on huge pages where the system gives them."""
    dims = (int(shape),) if isinstance(shape, int | np.integer) else tuple(map(int, shape))
    dtype = np.dtype(dtype)
    nbytes = math.prod(dims) * dtype.itemsize
    if not SMALL <= nbytes < LARGE:
        return np.zeros(dims, dtype=dtype)
    size = 1 << (nbytes - 1).bit_length()
    with _lock:
        _take_back()
        region, offset, used = _take(size)
        region.live += 1
    keeper = _Block(region, offset, dims, dtype)
    _pending[weakref.ref(keeper, _gone)] = (region, offset, size)
    array = np.asarray(keeper)
    if used:
        array.fill(0)
    return array


def _gone(
    ref: "weakref.ref[_Block]",
    pending: dict["weakref.ref[_Block]", tuple[_Region, int, int]] = _pending,
    returned: deque[tuple[_Region, int, int]] = _returned,
) -> None:
    """A block's keeper is gone: queue the block (bound early: at exit, globals may be)."""
    returned.append(pending.pop(ref))


def _take(size: int) -> tuple[_Region, int, bool]:
    """(region, offset, whether it was used before) of a free block of ``size`` bytes."""
    global _cutting
    blocks = _free.get(size)
    if blocks:
        region, offset = blocks.pop()
        return region, offset, True
    if _cutting is None or _cutting.at + size > REGION:
        if _cutting is not None and _cutting.live == 0:
            _drop(_cutting)
        _cutting = _Region()
    offset = _cutting.at
    _cutting.at += size
    return _cutting, offset, False


def _take_back() -> None:
    """File the blocks whose arrays are gone; drop a region none of whose blocks is in use."""
    while _returned:
        region, offset, size = _returned.popleft()
        _free.setdefault(size, []).append((region, offset))
        region.live -= 1
        if region.live == 0 and region is not _cutting:
            _drop(region)


def _drop(region: _Region) -> None:
    for size, blocks in _free.items():
        _free[size] = [b for b in blocks if b[0] is not region]


def _check() -> None:
    """The arena's invariants (tests call it after each change): every free block lies
    in its region, inside what was cut, aligned, and no two free blocks overlap."""
    with _lock:
        _take_back()
        spans: dict[int, list[tuple[int, int]]] = {}
        for size, blocks in _free.items():
            assert SMALL <= size < LARGE and size & (size - 1) == 0, size
            for region, offset in blocks:
                assert (region.address + offset) % LINE == 0
                assert offset >= 0 and offset + size <= region.at <= REGION, (offset, size)
                assert region.live >= 0
                spans.setdefault(id(region), []).append((offset, offset + size))
        for found in spans.values():
            found.sort()
            for (_, end), (start, _) in itertools.pairwise(found):
                assert end <= start, "two free blocks overlap"
