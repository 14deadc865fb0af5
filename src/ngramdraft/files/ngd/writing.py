"""Writing ``.ngd`` files: the one writer of the 2-gram kinds (:class:`NgdWriter`), the
token kinds' writers, and the constmap they build; atomic (``files/atomic.py``)."""

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import xxhash

from ..._version import __version__
from ...errors import CorruptFileError, InternalError, InvalidParameterError
from ...kernels.constmap import build as build_fuse
from ...kernels.constmap import fuse_shape, key_hashes
from ...kernels.frozen import key_values, span_stats
from ...progress import Progress
from ...validation import check_path
from ..atomic import atomic_output, disk_full_named, spool_directory, write_array
from .header import (
    ALIGN,
    BLOCK,
    HEADER_SIZE,
    KEY_WIDTH,
    KIND_NAMES,
    KIND_REQUESTS,
    KIND_SUFFIX,
    MAX_CORPUS,
    MAX_KEYS,
    SECTIONS_OF,
    Header,
)

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
        self.path = Path(check_path(path))
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


def buckets_of(counts: np.ndarray | None, separators: int, max_token: int) -> np.ndarray:
    """A suffix file's buckets from each id's count (None: none past MAX_BUCKET_IDS):
    buckets[j] is the number of positions whose token is below j - 1 (``docs/format.md``)."""
    if counts is None:
        return np.zeros(0, dtype=np.int64)
    per_id = np.zeros(max_token + 2, dtype=np.int64)
    per_id[0] = separators
    per_id[1 : len(counts) + 1] = counts
    return np.concatenate([[0], np.cumsum(per_id)]).astype(np.int64)


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
    _write_sections(Path(check_path(path)), header, {**sections, **arrays})
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
            for start in range(0, len(view), BLOCK):
                yield view[start : start + BLOCK]
        elif isinstance(data, bytes):
            yield data
        else:
            while block := data.read(BLOCK):
                yield block
