"""Reading a mapped ``.ngd`` file: its pages, its sections as arrays, its meta, its
checksums. Nothing is read past what the header (``header.py``) checked."""

import ctypes
import json
import mmap
import os
import sys
from typing import Any

import numpy as np
import xxhash

from ...errors import ChecksumError, CorruptFileError, WrongFileKindError
from ...kernels.frozen import Frozen
from ...validation import check_file
from .header import BLOCK, HEADER_SIZE, NOT_NGRAMS, TOKEN_KINDS, Header, bad_file, parse_header

_MADV_POPULATE_READ = 22  # linux/mman.h; not exported by Python's mmap module


def populate(buf: mmap.mmap) -> None:
    """Map every page of a read-only mapping into the page tables (blocking).

    Drafting reads a static cache at random, so without this the first
    lookups each take a page fault. madvise(MADV_POPULATE_READ) (Linux 5.14+)
    does them all at once; it is called through ctypes, which releases the
    GIL, so a cold file being read from disk stalls no Python thread.
    Elsewhere, or on failure, nothing happens: it is only a hint.
    """
    view = np.frombuffer(buf, dtype=np.uint8)
    if not sys.platform.startswith("linux") or view.size == 0:
        return
    madvise = ctypes.CDLL(None, use_errno=True).madvise
    madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    base, size = view.ctypes.data, view.size
    # In steps: each call holds the process's mmap lock, which another
    # open's mmap() must wait for.
    for start in range(0, size, BLOCK):
        if madvise(base + start, min(BLOCK, size - start), _MADV_POPULATE_READ):
            return


def map_file(path: str | os.PathLike[str]) -> tuple[mmap.mmap, Header]:
    """(mmap, header) of a cache file, opened read-only."""
    with open(check_file(path), "rb") as f:
        size = os.fstat(f.fileno()).st_size
        raw = f.read(HEADER_SIZE)
        header = parse_header(raw, size, path)
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return mm, header


def section_array(
    buf: mmap.mmap, header: Header, name: str, dtype: Any, shape: tuple[int, ...]
) -> np.ndarray:
    offset, size, _ = header.sections.get(name, (0, 0, 0))
    count = size // np.dtype(dtype).itemsize
    arr = np.frombuffer(buf, dtype=dtype, count=count, offset=offset)
    return arr.reshape(shape)


def read_meta(buf: mmap.mmap, header: Header, path: object) -> dict[str, Any]:
    offset, size, _ = header.sections["meta"]
    try:
        meta = json.loads(bytes(buf[offset : offset + size]).decode("utf-8")) if size else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        bad_file(CorruptFileError, path, f"meta section is not UTF-8 JSON ({e})")
    except RecursionError:
        bad_file(CorruptFileError, path, "meta section nests JSON too deeply to be ours")
    if not isinstance(meta, dict):
        bad_file(CorruptFileError, path, "meta section is not a JSON object")
    tokenizer = meta.get("tokenizer")
    if tokenizer is not None and not (
        isinstance(tokenizer, dict)
        and isinstance(tokenizer.get("name"), str)
        and all(isinstance(tokenizer.get(k, ""), str) for k in ("kind", "fingerprint"))
    ):
        bad_file(CorruptFileError, path, "meta's tokenizer is not a tokenizer identity")
    return meta


def verify_sections(buf: mmap.mmap, header: Header, path: object) -> None:
    """Check every section's checksum; raises ChecksumError naming the first bad one."""
    for name in header.sections:
        offset, size, digest = header.sections[name]
        h = xxhash.xxh3_64()
        for start in range(offset, offset + size, BLOCK):
            h.update(buf[start : min(start + BLOCK, offset + size)])
        if h.intdigest() != digest:
            bad_file(ChecksumError, path, f"{name} section checksum mismatch (the file is damaged)")


def frozen_view(buf: mmap.mmap, header: Header, path: object) -> Frozen:
    """The file's arrays as a Frozen cache (views of the mapping, nothing copied).

    Only the offsets' two ends are read: the cheap half of their check, the
    kernels bound every span they use (``kernels/frozen.py``).
    """
    if header.kind in TOKEN_KINDS:
        bad_file(WrongFileKindError, path, NOT_NGRAMS[header.kind])
    k, n, w = header.n_keys, header.n_entries, header.key_width
    frozen = Frozen(
        keys=section_array(buf, header, "keys", np.int32, (k, w)),
        offsets=section_array(buf, header, "offsets", np.int64, (k + 1,)),
        stats=section_array(buf, header, "stats", np.int32, (k, 3)),
        fuse=section_array(buf, header, "fuse", np.uint32, (-1,)),
        tokens=section_array(buf, header, "tokens", np.int32, (n,)),
        counts=section_array(buf, header, "counts", np.int32, (n,)),
        params=np.array(
            [
                header.fuse_seed,
                header.fuse_segment_length,
                header.fuse_segment_length * header.fuse_segment_count,
                header.max_count,
                max(header.max_token, 0),  # -1 when empty: then nothing is drafted
            ],
            dtype=np.uint64,
        ),
    )
    frozen.params.flags.writeable = False
    if frozen.offsets[0] != 0 or frozen.offsets[k] != n:
        bad_file(CorruptFileError, path, "offsets do not span the follower arrays")
    return frozen
