"""The native cache file (``.ngd``): writing, and reading with every size checked.

The byte layout is specified in ``docs/format.md``; this module is its only
implementation. A file is a 512-byte header followed by seven sections, each
aligned to 64 bytes, in any order the header's section table gives:

=========  ===========================  ======================================
section    contents                     size
=========  ===========================  ======================================
meta       UTF-8 JSON object            <= 1 MiB
keys       int32[n_keys, key_width]     n_keys * key_width * 4
offsets    int64[n_keys + 1]            (n_keys + 1) * 8
stats      int32[n_keys, 3]             n_keys * 12
tokens     int32[n_entries]             n_entries * 4
counts     int32[n_entries]             n_entries * 4
fuse       uint32[(segs + 2) * seglen]  0 when n_keys == 0
=========  ===========================  ======================================

Reading parses and checks only the header (one page): opening costs the same
at any size. ``verify_sections`` reads everything and checks the checksums.
"""

import ctypes
import itertools
import json
import mmap
import os
import struct
import sys
from dataclasses import dataclass, field

import numpy as np
import xxhash

from .atomic import atomic_output
from .errors import (
    ChecksumError,
    CorruptFileError,
    TruncatedFileError,
    UnsupportedVersionError,
    WrongFileKindError,
)

MAGIC = b"NGRMDRFT"
NATIVE_SUFFIX = ".ngd"
VERSION = 2
BYTE_ORDER_MARK = 0x0A0B0C0D
HEADER_SIZE = 512
ALIGN = 64
MAX_META = 1 << 20
KIND_STATIC = 1
KIND_DYNAMIC = 2
KIND_NAMES = {KIND_STATIC: "static", KIND_DYNAMIC: "dynamic"}
KEY_WIDTH = {KIND_STATIC: 2, KIND_DYNAMIC: 4}
SECTIONS = ("meta", "keys", "offsets", "stats", "tokens", "counts", "fuse")
MAX_SEGMENT = 1 << 18
MAX_KEYS = 1 << 31  # constmap values keep bit 31 for a flag (kernels/frozen.py)

_FIXED = struct.Struct("<8sIIIIII QQQQQqQQ")  # 96 bytes
_SECTION = struct.Struct("<QQQQ")  # offset, size, xxh3_64, reserved
_CHECKSUM_AT = HEADER_SIZE - 8
_BLOCK = 8 << 20
_MADV_POPULATE_READ = 22  # linux/mman.h; not exported by Python's mmap module


@dataclass
class Header:
    kind: int
    n_keys: int
    n_entries: int
    fuse_seed: int
    fuse_segment_length: int
    fuse_segment_count: int
    max_token: int
    n_source_tokens: int
    max_count: int
    sections: dict = field(default_factory=dict)  # name -> (offset, size, xxh3)
    version: int = VERSION

    @property
    def key_width(self):
        return KEY_WIDTH[self.kind]

    def expected_sizes(self):
        k, n, w = self.n_keys, self.n_entries, self.key_width
        fuse_cells = (self.fuse_segment_count + 2) * self.fuse_segment_length if k else 0
        return {
            "keys": k * w * 4,
            "offsets": (k + 1) * 8,
            "stats": k * 12,
            "tokens": n * 4,
            "counts": n * 4,
            "fuse": fuse_cells * 4,
        }

    def pack(self):
        fixed = _FIXED.pack(
            MAGIC,
            self.version,
            BYTE_ORDER_MARK,
            HEADER_SIZE,
            self.kind,
            self.key_width,
            0,
            self.n_keys,
            self.n_entries,
            self.fuse_seed,
            self.fuse_segment_length,
            self.fuse_segment_count,
            self.max_token,
            self.n_source_tokens,
            self.max_count,
        )
        table = b"".join(_SECTION.pack(*self.sections[name], 0) for name in SECTIONS)
        body = fixed + table
        body += bytes(_CHECKSUM_AT - len(body))
        return body + struct.pack("<Q", xxhash.xxh3_64_intdigest(body))


def _fail(cls, path, message):
    raise cls(f"{path}: {message}")


def parse_header(raw, file_size, path):
    """Header of a file whose first bytes are ``raw``; checks every size and offset."""
    if file_size < HEADER_SIZE:
        if raw[: len(MAGIC)] == MAGIC[: len(raw)] and file_size > 0:
            _fail(
                TruncatedFileError,
                path,
                f"file is {file_size} bytes, the header alone is {HEADER_SIZE}",
            )
        _fail(WrongFileKindError, path, foreign_message(file_size))
    fields = _FIXED.unpack_from(raw, 0)
    magic, version, bom, header_size, kind, width = fields[:6]
    if magic != MAGIC:
        _fail(WrongFileKindError, path, foreign_message(file_size))
    if bom != BYTE_ORDER_MARK:
        _fail(
            CorruptFileError,
            path,
            f"byte-order mark is {bom:#010x}, expected {BYTE_ORDER_MARK:#010x}",
        )
    if version != VERSION:
        hint = (
            "; rebuild it (version 1 lacks the constmap's draft flags)" if version < VERSION else ""
        )
        _fail(
            UnsupportedVersionError,
            path,
            f"format version {version}; this ngramdraft reads version {VERSION}{hint}",
        )
    (stored,) = struct.unpack_from("<Q", raw, _CHECKSUM_AT)
    if xxhash.xxh3_64_intdigest(bytes(raw[:_CHECKSUM_AT])) != stored:
        _fail(ChecksumError, path, "header checksum mismatch (the header is damaged)")
    if header_size != HEADER_SIZE:
        _fail(CorruptFileError, path, f"header size {header_size}, expected {HEADER_SIZE}")
    if kind not in KIND_NAMES:
        _fail(CorruptFileError, path, f"unknown cache kind {kind}")
    if width != KEY_WIDTH[kind]:
        _fail(CorruptFileError, path, f"key width {width} for a {KIND_NAMES[kind]} cache")
    n_keys, n_entries, seed, seglen, segs, max_token, n_source, max_count = fields[7:15]
    header = Header(
        kind, n_keys, n_entries, seed, seglen, segs, max_token, n_source, max_count, version=version
    )
    for i, name in enumerate(SECTIONS):
        offset, size, digest, _ = _SECTION.unpack_from(raw, _FIXED.size + i * _SECTION.size)
        header.sections[name] = (offset, size, digest)
    _check_geometry(header, file_size, path)
    return header


def foreign_message(file_size):
    """What a file that is no cache of any kind is told, wherever a cache was expected."""
    return (
        f"not an ngramdraft cache file ({file_size} bytes, no NGRMDRFT magic), nor a llama.cpp "
        "lookup file: build caches with `ngramdraft build-static`; a llama.cpp lookup file "
        "can also be converted with `ngramdraft convert`"
    )


def _check_geometry(h, file_size, path):
    if h.n_keys >= MAX_KEYS:
        _fail(CorruptFileError, path, f"n_keys {h.n_keys} exceeds the constmap's 31-bit range")
    if h.n_entries < h.n_keys:
        _fail(CorruptFileError, path, f"{h.n_entries} entries for {h.n_keys} keys")
    if h.max_token < -1 or h.max_token > 2**31 - 1:
        _fail(CorruptFileError, path, f"max_token {h.max_token} is not a token id")
    if h.max_count > 2**31 - 1 or (h.max_count == 0) != (h.n_keys == 0):
        _fail(CorruptFileError, path, f"max_count {h.max_count} for {h.n_keys} keys")
    if h.n_keys:
        seglen, segs = h.fuse_segment_length, h.fuse_segment_count
        if seglen < 1 or seglen & (seglen - 1) or seglen > MAX_SEGMENT:
            _fail(
                CorruptFileError,
                path,
                f"fuse segment length {seglen} is not a power of two <= {MAX_SEGMENT}",
            )
        if segs < 1 or segs * seglen >= 2**32:
            _fail(CorruptFileError, path, f"fuse segment count {segs} is out of range")
    expected = h.expected_sizes()
    spans = []
    for name in SECTIONS:
        offset, size, _ = h.sections[name]
        if name == "meta":
            if size > MAX_META:
                _fail(CorruptFileError, path, f"meta section of {size} bytes (limit {MAX_META})")
        elif size != expected[name]:
            _fail(
                CorruptFileError,
                path,
                f"{name} section is {size} bytes, the header's counts say {expected[name]}",
            )
        if offset % ALIGN or offset < HEADER_SIZE:
            _fail(
                CorruptFileError,
                path,
                f"{name} section offset {offset} is not {ALIGN}-byte aligned past the header",
            )
        if offset + size > file_size:
            _fail(
                TruncatedFileError,
                path,
                f"{name} section ends at byte {offset + size}, the file has {file_size}",
            )
        spans.append((offset, offset + size, name))
    spans.sort()
    for (_, end, a), (start, _, b) in itertools.pairwise(spans):
        if start < end:
            _fail(CorruptFileError, path, f"sections {a} and {b} overlap")


def read_header(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(HEADER_SIZE)
    return parse_header(raw, size, path)


def populate(buf):
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
    for start in range(0, size, _BLOCK):
        if madvise(base + start, min(_BLOCK, size - start), _MADV_POPULATE_READ):
            return


def map_file(path):
    """(mmap, header) of a cache file, opened read-only."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        raw = f.read(HEADER_SIZE)
        header = parse_header(raw, size, path)
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    return mm, header


def section_array(buf, header, name, dtype, shape):
    offset, size, _ = header.sections[name]
    count = size // np.dtype(dtype).itemsize
    arr = np.frombuffer(buf, dtype=dtype, count=count, offset=offset)
    return arr.reshape(shape)


def read_meta(buf, header, path):
    offset, size, _ = header.sections["meta"]
    try:
        meta = json.loads(bytes(buf[offset : offset + size]).decode("utf-8")) if size else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        _fail(CorruptFileError, path, f"meta section is not UTF-8 JSON ({e})")
    except RecursionError:
        _fail(CorruptFileError, path, "meta section nests JSON too deeply to be ours")
    if not isinstance(meta, dict):
        _fail(CorruptFileError, path, "meta section is not a JSON object")
    tokenizer = meta.get("tokenizer")
    if tokenizer is not None and not (
        isinstance(tokenizer, dict)
        and isinstance(tokenizer.get("name"), str)
        and all(isinstance(tokenizer.get(k, ""), str) for k in ("kind", "fingerprint"))
    ):
        _fail(CorruptFileError, path, "meta's tokenizer is not a tokenizer identity")
    return meta


def verify_sections(buf, header, path):
    """Check every section's checksum; raises ChecksumError naming the first bad one."""
    for name in SECTIONS:
        offset, size, digest = header.sections[name]
        h = xxhash.xxh3_64()
        for start in range(offset, offset + size, _BLOCK):
            h.update(buf[start : min(start + _BLOCK, offset + size)])
        if h.intdigest() != digest:
            _fail(ChecksumError, path, f"{name} section checksum mismatch (the file is damaged)")


def write_file(path, header, sections):
    """Write a cache file atomically.

    ``sections`` maps each name of SECTIONS to bytes, a numpy array or an open
    binary file positioned at its start (streamed in blocks, so spooled data
    never has to fit in memory). Offsets and checksums are filled into header.
    """
    with atomic_output(path) as out:
        out.write(bytes(HEADER_SIZE))
        pos = HEADER_SIZE
        for name in SECTIONS:
            data = sections[name]
            h = xxhash.xxh3_64()
            size = 0
            for block in _blocks(data):
                out.write(block)
                h.update(block)
                size += len(block)
            header.sections[name] = (pos, size, h.intdigest())
            pad = -(pos + size) % ALIGN
            out.write(bytes(pad))
            pos += size + pad
        out.seek(0)
        out.write(header.pack())


def _blocks(data):
    if isinstance(data, np.ndarray):
        view = memoryview(np.ascontiguousarray(data)).cast("B")
        for start in range(0, len(view), _BLOCK):
            yield view[start : start + _BLOCK]
    elif isinstance(data, bytes | bytearray | memoryview):
        yield memoryview(data).cast("B")
    else:
        while block := data.read(_BLOCK):
            yield block
