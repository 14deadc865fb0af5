"""The native cache file (``.ngd``): the one writer, and reading with every size checked.

The byte layout is specified in ``docs/format.md``; this module is its only
implementation, the numba kernels that read the arrays (``kernels/frozen.py``,
``kernels/constmap.py``) aside. A file is a 512-byte header followed by
sections, each aligned to 64 bytes, in any order the header's section table
gives. The 2-gram kinds (static, dynamic) have these seven:

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

The suffix kind (a corpus for ``rules="suffix"``) has meta, tokens
(int32[T]) and suffixes (int32[T]), written by :func:`write_suffix_file`.
Every 2-gram file, static or dynamic, built on one machine or on a cluster,
or saved from memory, is assembled by :class:`NgdWriter`. Reading parses and
checks only the header (one page): opening costs the same at any size.
``verify_sections`` reads everything and checks the checksums.
"""

import contextlib
import ctypes
import itertools
import json
import mmap
import os
import struct
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np
import xxhash

from .._version import __version__
from ..errors import (
    ChecksumError,
    CorruptFileError,
    InternalError,
    InvalidParameterError,
    TruncatedFileError,
    UnsupportedVersionError,
    WrongFileKindError,
)
from ..kernels.constmap import build as build_fuse
from ..kernels.constmap import fuse_shape, key_hashes
from ..kernels.frozen import Frozen, key_values, span_stats
from ..progress import Progress
from .atomic import atomic_output, disk_full_named, spool_directory, write_array

MAGIC = b"NGRMDRFT"
NATIVE_SUFFIX = ".ngd"
VERSION = 2
BYTE_ORDER_MARK = 0x0A0B0C0D
HEADER_SIZE = 512
ALIGN = 64
MAX_META = 1 << 20
KIND_STATIC = 1
KIND_DYNAMIC = 2
KIND_SUFFIX = 3
KIND_REQUESTS = 4
KIND_NAMES = {
    KIND_STATIC: "static",
    KIND_DYNAMIC: "dynamic",
    KIND_SUFFIX: "suffix",
    KIND_REQUESTS: "requests",
}
KEY_WIDTH = {KIND_STATIC: 2, KIND_DYNAMIC: 4, KIND_SUFFIX: 0, KIND_REQUESTS: 0}
TOKEN_KINDS = (KIND_SUFFIX, KIND_REQUESTS)  # a token array, no n-grams
# The header's section table has a row per slot; a kind uses some of them.
SLOTS = (
    "meta", "keys", "offsets", "stats", "tokens", "counts", "fuse", "suffixes", "buckets", "grams"
)  # fmt: skip
SECTIONS = SLOTS[:7]
SECTIONS_OF = {
    KIND_STATIC: SECTIONS,
    KIND_DYNAMIC: SECTIONS,
    KIND_SUFFIX: ("meta", "tokens", "suffixes", "buckets", "grams"),
    KIND_REQUESTS: ("meta", "tokens"),
}
# Sections a kind gained after files of it were written: such a file's row is all
# zeros, and the section is absent (an empty array), not damaged.
OPTIONAL = ("grams",)
MAX_CORPUS = 2**31 - 1  # a suffix file's positions are int32
MAX_BUCKET_IDS = 1 << 24  # a suffix file with larger ids has no buckets (they would be huge)
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
    sections: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # offset, size, xxh3
    version: int = VERSION

    @property
    def key_width(self) -> int:
        return KEY_WIDTH[self.kind]

    def expected_sizes(self) -> dict[str, int]:
        k, n, w = self.n_keys, self.n_entries, self.key_width
        fuse_cells = (self.fuse_segment_count + 2) * self.fuse_segment_length if k else 0
        if self.kind == KIND_SUFFIX:
            return {"tokens": n * 4, "suffixes": n * 4, "buckets": n_buckets(self.max_token) * 8}
        if self.kind == KIND_REQUESTS:
            return {"tokens": n * 4}
        return {
            "keys": k * w * 4,
            "offsets": (k + 1) * 8,
            "stats": k * 12,
            "tokens": n * 4,
            "counts": n * 4,
            "fuse": fuse_cells * 4,
        }

    def pack(self) -> bytes:
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
        table = b"".join(_SECTION.pack(*self.sections.get(name, (0, 0, 0)), 0) for name in SLOTS)
        body = fixed + table
        body += bytes(_CHECKSUM_AT - len(body))
        return body + struct.pack("<Q", xxhash.xxh3_64_intdigest(body))


def n_buckets(max_token: int) -> int:
    """Entries of a suffix file's buckets: one per id from -1 to max_token, and the end."""
    return max_token + 3 if max_token < MAX_BUCKET_IDS else 0


def _fail(cls: type[Exception], path: object, message: str) -> Any:
    raise cls(f"{path}: {message}")


def parse_header(raw: bytes, file_size: int, path: object) -> Header:
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
    for name in SECTIONS_OF[kind]:
        row = _FIXED.size + SLOTS.index(name) * _SECTION.size
        offset, size, digest, _ = _SECTION.unpack_from(raw, row)
        if name in OPTIONAL and offset == size == digest == 0:
            continue
        header.sections[name] = (offset, size, digest)
    _check_geometry(header, file_size, path)
    return header


NOT_NGRAMS = {
    KIND_SUFFIX: (
        "a suffix file (a corpus's suffix array, built by `build-static --suffix`), which only "
        "rules='suffix' drafts from: pass it as static= with rules='suffix' (--rules suffix), "
        "or build a 2-gram cache with `build-static` for llama.cpp's rules"
    ),
    KIND_REQUESTS: (
        "a requests file (the earlier requests of rules='suffix', saved by a drafter given it "
        "as dynamic=), which llama.cpp's rules cannot read: pass it as dynamic= with "
        "rules='suffix' (--rules suffix), or give llama.cpp's rules a dynamic file of their own"
    ),
}


def foreign_message(file_size: int) -> str:
    """What a file that is no cache of any kind is told, wherever a cache was expected."""
    return (
        f"not an ngramdraft cache file ({file_size} bytes, no NGRMDRFT magic), nor a llama.cpp "
        "lookup file: build caches with `ngramdraft build-static`; a llama.cpp lookup file "
        "can also be converted with `ngramdraft convert`"
    )


def _check_geometry(h: Header, file_size: int, path: object) -> None:
    if h.n_keys >= MAX_KEYS:
        _fail(CorruptFileError, path, f"n_keys {h.n_keys} exceeds the constmap's 31-bit range")
    if h.n_entries < h.n_keys:
        _fail(CorruptFileError, path, f"{h.n_entries} entries for {h.n_keys} keys")
    if h.max_token < -1 or h.max_token > 2**31 - 1:
        _fail(CorruptFileError, path, f"max_token {h.max_token} is not a token id")
    if h.max_count > 2**31 - 1 or (h.max_count == 0) != (h.n_keys == 0):
        _fail(CorruptFileError, path, f"max_count {h.max_count} for {h.n_keys} keys")
    if h.kind in TOKEN_KINDS and (h.n_keys or h.n_entries > MAX_CORPUS):
        _fail(
            CorruptFileError,
            path,
            f"{h.n_keys} keys, {h.n_entries} tokens in a {KIND_NAMES[h.kind]} file",
        )
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
    for name in h.sections:
        offset, size, _ = h.sections[name]
        if name == "meta":
            if size > MAX_META:
                _fail(CorruptFileError, path, f"meta section of {size} bytes (limit {MAX_META})")
        elif name == "grams":  # sized by its n-grams: rows of 16 bytes, a power of two
            rows = size // 16
            if size % 16 or rows & (rows - 1) or rows > 2 * h.n_entries:
                _fail(
                    CorruptFileError,
                    path,
                    f"grams section is {size} bytes, not a power of two of 16-byte rows "
                    f"up to twice the {h.n_entries} tokens",
                )
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


def read_header(path: str | os.PathLike[str]) -> Header:
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        raw = f.read(HEADER_SIZE)
    return parse_header(raw, size, path)


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
    for start in range(0, size, _BLOCK):
        if madvise(base + start, min(_BLOCK, size - start), _MADV_POPULATE_READ):
            return


def map_file(path: str | os.PathLike[str]) -> tuple[mmap.mmap, Header]:
    """(mmap, header) of a cache file, opened read-only."""
    with open(path, "rb") as f:
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


def verify_sections(buf: mmap.mmap, header: Header, path: object) -> None:
    """Check every section's checksum; raises ChecksumError naming the first bad one."""
    for name in header.sections:
        offset, size, digest = header.sections[name]
        h = xxhash.xxh3_64()
        for start in range(offset, offset + size, _BLOCK):
            h.update(buf[start : min(start + _BLOCK, offset + size)])
        if h.intdigest() != digest:
            _fail(ChecksumError, path, f"{name} section checksum mismatch (the file is damaged)")


def frozen_view(buf: mmap.mmap, header: Header, path: object) -> Frozen:
    """The file's arrays as a Frozen cache (views of the mapping, nothing copied).

    Only the offsets' two ends are read: the cheap half of their check, the
    kernels bound every span they use (``kernels/frozen.py``).
    """
    if header.kind in TOKEN_KINDS:
        _fail(WrongFileKindError, path, NOT_NGRAMS[header.kind])
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
        _fail(CorruptFileError, path, "offsets do not span the follower arrays")
    return frozen


_FUSE_TRIES = 64


def make_constmap(keys: np.ndarray, values: np.ndarray) -> tuple[int, int, int, np.ndarray]:
    """(seed, segment_length, segment_count, fuse) mapping keys[i] to values[i].

    Peeling fails with small probability (or when two keys' 64-bit hashes
    collide); each retry takes another seed, and repeated failures widen the
    array, which tiny key sets need. Keys are distinct in every file, so 64
    failures in a row mean a bug.
    """
    if len(keys) == 0:
        return 0, 0, 0, np.zeros(0, dtype=np.uint32)
    for attempt in range(_FUSE_TRIES):
        seglen, segs = fuse_shape(len(keys), slack=0.1 * (attempt // 8))
        seed = np.uint64(attempt + 1)
        fuse = build_fuse(key_hashes(keys, seed), values, seglen, segs)
        if len(fuse):
            return int(seed), seglen, segs, fuse
    raise InternalError(f"constmap construction failed {_FUSE_TRIES} times for {len(keys)} keys")


_SPOOLED = ("keys", "offsets", "stats", "tokens", "counts", "values")
Part = bytes | np.ndarray | IO[bytes]


class NgdWriter:
    """Assembles one ``.ngd`` file of either kind from its keys, given in ascending ranges.

    ``add(keys, offsets, tokens, counts)`` takes one range of keys (ascending,
    after every key added before) with their spans, offsets from 0;
    ``finish()`` builds the constmap over every key and writes the file
    atomically, returning its Header. Per key, the stats row and the
    constmap value (its index and draft flag, ``kernels/frozen.py``) are
    computed here from the counts, so no caller knows how.

    With ``spool`` the ranges go to temporary files beside the output (a
    build larger than memory); without, they stay in memory (a cache saved
    from memory, where they already are). Use as a context manager: leaving
    it removes the spools, and a failure leaves the old file untouched.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        kind: int,
        *,
        spool: bool = True,
        quiet: bool = True,
    ) -> None:
        self.path = Path(path)
        self.kind = kind
        self.quiet = quiet
        self.spool = spool
        self.n_keys = self.n_entries = self.max_count = 0
        self.max_token = -1
        self._stack = contextlib.ExitStack()
        self._spools: dict[str, IO[bytes]] = {}
        self._kept: dict[str, list[np.ndarray]] = {name: [] for name in _SPOOLED}

    def __enter__(self) -> "NgdWriter":
        if self.spool:
            directory = Path(self._stack.enter_context(spool_directory(self.path)))
            for name in _SPOOLED:
                self._spools[name] = self._stack.enter_context(open(directory / name, "w+b"))
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def add(
        self, keys: np.ndarray, offsets: np.ndarray, tokens: np.ndarray, counts: np.ndarray
    ) -> None:
        """Append one ascending range of keys and their followers (offsets from 0)."""
        if keys.shape[1] != KEY_WIDTH[self.kind]:
            raise InternalError(f"keys of width {keys.shape[1]} for a {KIND_NAMES[self.kind]} file")
        stats = span_stats(offsets, tokens, counts)
        parts = {
            "keys": keys,
            "offsets": offsets[:-1] + self.n_entries,
            "stats": stats,
            "tokens": tokens,
            "counts": counts,
            "values": key_values(offsets, counts, self.n_keys),
        }
        for name, array in parts.items():
            if self.spool:
                with disk_full_named(self.path):
                    write_array(self._spools[name], array)
            else:
                self._kept[name].append(array)
        self.n_keys += len(keys)
        self.n_entries += len(tokens)
        if len(keys):
            self.max_token = max(self.max_token, int(keys.max()), int(tokens.max()))
            self.max_count = max(self.max_count, int(stats[:, 1].max()))

    def _section(self, name: str) -> list[Part]:
        """A section's parts: its spool file, rewound, or the arrays kept."""
        if not self.spool:
            return list(self._kept[name])
        f = self._spools[name]
        f.flush()
        f.seek(0)
        return [f]

    def _whole(self, name: str, dtype: Any) -> np.ndarray:
        """A section in memory whole (the constmap needs every key and value at once)."""
        if self.spool:
            self._spools[name].flush()
            return np.fromfile(self._spools[name].name, dtype=dtype)
        return np.concatenate([a.reshape(-1) for a in self._kept[name]] or [np.zeros(0, dtype)])

    def finish(self, n_source_tokens: int = 0, meta: dict[str, Any] | None = None) -> Header:
        """Build the constmap, write the file atomically; returns its Header."""
        if self.n_keys >= MAX_KEYS:
            raise InvalidParameterError(
                f"{self.n_keys} distinct n-grams: a cache file holds fewer than {MAX_KEYS}"
            )
        if not 0 <= n_source_tokens < 1 << 64:
            # Merging adds the sources' own counts, which a damaged header can set to anything.
            raise CorruptFileError(
                f"{self.path}: the sources claim {n_source_tokens} tokens together, more than a "
                "file can record: one of them is damaged; check each with "
                "`ngramdraft inspect --verify`"
            )
        keys = self._whole("keys", np.int32).reshape(-1, KEY_WIDTH[self.kind])
        values = self._whole("values", np.uint32)
        with Progress("constmap", quiet=self.quiet):
            seed, seglen, segs, fuse = make_constmap(keys, values)
        del keys, values  # the constmap build was the peak; writing needs none of it
        header = Header(
            kind=self.kind,
            n_keys=self.n_keys,
            n_entries=self.n_entries,
            fuse_seed=seed,
            fuse_segment_length=seglen,
            fuse_segment_count=segs,
            max_token=self.max_token,
            n_source_tokens=n_source_tokens,
            max_count=self.max_count,
        )
        meta = {"created_by": f"ngramdraft {__version__}", **(meta or {})}
        end = np.array([self.n_entries], dtype=np.int64)
        sections: dict[str, list[Part]] = {
            "meta": [json.dumps(meta, sort_keys=True).encode()],
            **{name: self._section(name) for name in ("keys", "stats", "tokens", "counts")},
            "offsets": [*self._section("offsets"), end],
            "fuse": [fuse],
        }
        with Progress("writing", quiet=self.quiet):
            _write_sections(self.path, header, sections)
        return header


def write_cache(
    path: str | os.PathLike[str],
    kind: int,
    arrays: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    *,
    n_source_tokens: int = 0,
    meta: dict[str, Any] | None = None,
) -> Header:
    """Write (keys, offsets, tokens, counts), already in memory, as a file of ``kind``."""
    with NgdWriter(path, kind, spool=False) as out:
        out.add(*arrays)
        return out.finish(n_source_tokens, meta)


def write_suffix_file(
    path: str | os.PathLike[str],
    tokens: list[Part],
    suffixes: list[Part],
    buckets: np.ndarray,
    grams: np.ndarray,
    *,
    n_tokens: int,
    max_token: int,
    n_source_tokens: int,
    meta: dict[str, Any] | None = None,
) -> Header:
    """Write a corpus's tokens, their suffix array (parts in order), buckets and n-gram index
    as a suffix file."""
    arrays: dict[str, list[Part]] = {
        "tokens": tokens,
        "suffixes": suffixes,
        "buckets": [buckets],
        "grams": [grams],
    }
    return _write_token_kind(path, KIND_SUFFIX, arrays, n_tokens, max_token, n_source_tokens, meta)


def write_requests_file(path: str | os.PathLike[str], tokens: np.ndarray, max_token: int) -> Header:
    """Write earlier requests (int32 tokens, each sequence ended by -1) as a requests file."""
    n_source = int((tokens >= 0).sum())
    return _write_token_kind(
        path, KIND_REQUESTS, {"tokens": [tokens]}, len(tokens), max_token, n_source, None
    )


def _write_token_kind(
    path: str | os.PathLike[str],
    kind: int,
    arrays: dict[str, list[Part]],
    n_tokens: int,
    max_token: int,
    n_source_tokens: int,
    meta: dict[str, Any] | None,
) -> Header:
    if n_tokens > MAX_CORPUS:
        raise InvalidParameterError(
            f"{n_tokens} tokens: a {KIND_NAMES[kind]} file holds at most {MAX_CORPUS}"
        )
    header = Header(kind, 0, n_tokens, 0, 0, 0, max_token, n_source_tokens, 0)
    meta = {"created_by": f"ngramdraft {__version__}", **(meta or {})}
    sections: dict[str, list[Part]] = {"meta": [json.dumps(meta, sort_keys=True).encode()]}
    _write_sections(Path(path), header, {**sections, **arrays})
    return header


def _write_sections(path: Path, header: Header, sections: dict[str, list[Part]]) -> None:
    """Write the header and sections atomically, filling offsets and checksums into header.

    Each section is a list of parts: bytes, numpy arrays, or open binary
    files positioned at their start (streamed in blocks, so spooled data
    never has to fit in memory).
    """
    size = HEADER_SIZE + sum(_size(p) + ALIGN for parts in sections.values() for p in parts)
    with atomic_output(path, size) as out:
        out.write(bytes(HEADER_SIZE))
        pos = HEADER_SIZE
        for name in SECTIONS_OF[header.kind]:
            h = xxhash.xxh3_64()
            size = 0
            for block in _blocks(sections[name]):
                out.write(block)
                h.update(block)
                size += len(block)
            header.sections[name] = (pos, size, h.intdigest())
            pad = -(pos + size) % ALIGN
            out.write(bytes(pad))
            pos += size + pad
        out.seek(0)
        out.write(header.pack())


def _size(part: Part) -> int:
    if isinstance(part, np.ndarray):
        return part.nbytes
    if isinstance(part, bytes):
        return len(part)
    return os.fstat(part.fileno()).st_size


def _blocks(parts: Iterable[Part]) -> Iterator[bytes | memoryview]:
    for data in parts:
        if isinstance(data, np.ndarray):
            if data.size == 0:
                continue
            view = np.ascontiguousarray(data).view(np.uint8).reshape(-1).data
            for start in range(0, len(view), _BLOCK):
                yield view[start : start + _BLOCK]
        elif isinstance(data, bytes):
            yield data
        else:
            while block := data.read(_BLOCK):
                yield block
