"""The ``.ngd`` header: the constants of the format, and parsing with every size and offset
checked (``docs/format.md`` specifies the bytes; ``reading`` and ``writing`` use this)."""

import itertools
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import xxhash

from ...errors import (
    ChecksumError,
    CorruptFileError,
    TruncatedFileError,
    UnsupportedVersionError,
    WrongFileKindError,
)
from ...validation import check_file

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
BLOCK = 8 << 20  # bytes read, hashed or written at a time


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


def bad_file(cls: type[Exception], path: object, message: str) -> Any:
    """Raise ``cls`` naming the file: every check of a file's bytes fails through here."""
    raise cls(f"{path}: {message}")


def parse_header(raw: bytes, file_size: int, path: object) -> Header:
    """Header of a file whose first bytes are ``raw``; checks every size and offset."""
    if file_size < HEADER_SIZE:
        if raw[: len(MAGIC)] == MAGIC[: len(raw)] and file_size > 0:
            bad_file(
                TruncatedFileError,
                path,
                f"file is {file_size} bytes, the header alone is {HEADER_SIZE}",
            )
        bad_file(WrongFileKindError, path, foreign_message(file_size))
    fields = _FIXED.unpack_from(raw, 0)
    magic, version, bom, header_size, kind, width = fields[:6]
    if magic != MAGIC:
        bad_file(WrongFileKindError, path, foreign_message(file_size))
    if bom != BYTE_ORDER_MARK:
        bad_file(
            CorruptFileError,
            path,
            f"byte-order mark is {bom:#010x}, expected {BYTE_ORDER_MARK:#010x}",
        )
    if version != VERSION:
        hint = (
            "; rebuild it (version 1 lacks the constmap's draft flags)" if version < VERSION else ""
        )
        bad_file(
            UnsupportedVersionError,
            path,
            f"format version {version}; this ngramdraft reads version {VERSION}{hint}",
        )
    (stored,) = struct.unpack_from("<Q", raw, _CHECKSUM_AT)
    if xxhash.xxh3_64_intdigest(bytes(raw[:_CHECKSUM_AT])) != stored:
        bad_file(ChecksumError, path, "header checksum mismatch (the header is damaged)")
    if header_size != HEADER_SIZE:
        bad_file(CorruptFileError, path, f"header size {header_size}, expected {HEADER_SIZE}")
    if kind not in KIND_NAMES:
        bad_file(CorruptFileError, path, f"unknown cache kind {kind}")
    if width != KEY_WIDTH[kind]:
        bad_file(CorruptFileError, path, f"key width {width} for a {KIND_NAMES[kind]} cache")
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
        bad_file(CorruptFileError, path, f"n_keys {h.n_keys} exceeds the constmap's 31-bit range")
    if h.n_entries < h.n_keys:
        bad_file(CorruptFileError, path, f"{h.n_entries} entries for {h.n_keys} keys")
    if h.max_token < -1 or h.max_token > 2**31 - 1:
        bad_file(CorruptFileError, path, f"max_token {h.max_token} is not a token id")
    if h.max_count > 2**31 - 1 or (h.max_count == 0) != (h.n_keys == 0):
        bad_file(CorruptFileError, path, f"max_count {h.max_count} for {h.n_keys} keys")
    if h.kind in TOKEN_KINDS and (h.n_keys or h.n_entries > MAX_CORPUS):
        bad_file(
            CorruptFileError,
            path,
            f"{h.n_keys} keys, {h.n_entries} tokens in a {KIND_NAMES[h.kind]} file",
        )
    if h.n_keys:
        seglen, segs = h.fuse_segment_length, h.fuse_segment_count
        if seglen < 1 or seglen & (seglen - 1) or seglen > MAX_SEGMENT:
            bad_file(
                CorruptFileError,
                path,
                f"fuse segment length {seglen} is not a power of two <= {MAX_SEGMENT}",
            )
        if segs < 1 or segs * seglen >= 2**32:
            bad_file(CorruptFileError, path, f"fuse segment count {segs} is out of range")
    expected = h.expected_sizes()
    spans = []
    for name in h.sections:
        offset, size, _ = h.sections[name]
        if name == "meta":
            if size > MAX_META:
                bad_file(CorruptFileError, path, f"meta section of {size} bytes (limit {MAX_META})")
        elif name == "grams":  # sized by its n-grams: rows of 16 bytes, a power of two
            rows = size // 16
            if size % 16 or rows & (rows - 1) or rows > 2 * h.n_entries:
                bad_file(
                    CorruptFileError,
                    path,
                    f"grams section is {size} bytes, not a power of two of 16-byte rows "
                    f"up to twice the {h.n_entries} tokens",
                )
        elif size != expected[name]:
            bad_file(
                CorruptFileError,
                path,
                f"{name} section is {size} bytes, the header's counts say {expected[name]}",
            )
        if offset % ALIGN or offset < HEADER_SIZE:
            bad_file(
                CorruptFileError,
                path,
                f"{name} section offset {offset} is not {ALIGN}-byte aligned past the header",
            )
        if offset + size > file_size:
            bad_file(
                TruncatedFileError,
                path,
                f"{name} section ends at byte {offset + size}, the file has {file_size}",
            )
        spans.append((offset, offset + size, name))
    spans.sort()
    for (_, end, a), (start, _, b) in itertools.pairwise(spans):
        if start < end:
            bad_file(CorruptFileError, path, f"sections {a} and {b} overlap")


def read_header(path: str | os.PathLike[str]) -> Header:
    size = os.path.getsize(check_file(path))
    with open(path, "rb") as f:
        raw = f.read(HEADER_SIZE)
    return parse_header(raw, size, path)
