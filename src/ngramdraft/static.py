"""The static cache: 2-grams of a large corpus in one read-only, memory-mapped file."""

import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from . import llamacpp
from .atomic import atomic_output
from .build import SpanSource, TokenSource, build_static, make_constmap
from .cache import Cache, file_format
from .errors import (
    CorruptFileError,
    InvalidParameterError,
    TokenizerMismatchError,
    WrongFileKindError,
)
from .fileformat import (
    KIND_NAMES,
    KIND_STATIC,
    map_file,
    read_meta,
    section_array,
    verify_sections,
)
from .fileformat import prefault as fileformat_prefault
from .kernels.draft import constmap_values
from .kernels.frozen import CORRUPT, Frozen, followers_span, key_hash_of
from .kernels.triples import span_stats
from .tokenfile import TokenFile
from .tokenizer import identity_of
from .validation import as_tokens, check_cache_arrays, check_ngram


class StaticCache(Cache):
    """2-gram -> followers of a corpus, served zero-copy from a mmap'd ``.ngd`` file.

    Open with :meth:`open` (reads one page, whatever the size) or create with
    :meth:`build`, :meth:`from_cache`, :meth:`from_llamacpp` or :meth:`merge`.
    Any number of drafters, threads or processes can share one.
    """

    role = "static"

    def __init__(self, mm, header, meta, path):
        self._mm = mm
        self.header = header
        self.meta = meta
        self.path = Path(path)
        self._prefault = None
        k, n = header.n_keys, header.n_entries

        def arr(name, dtype, shape):
            return section_array(mm, header, name, dtype, shape)

        params = np.array(
            [
                header.fuse_seed,
                header.fuse_segment_length,
                header.fuse_segment_length * header.fuse_segment_count,
                header.max_count,
            ],
            dtype=np.uint64,
        )
        params.flags.writeable = False
        self._frozen = Frozen(
            keys=arr("keys", np.int32, (k, 2)),
            offsets=arr("offsets", np.int64, (k + 1,)),
            stats=arr("stats", np.int32, (k, 3)),
            fuse=arr("fuse", np.uint32, (-1,)),
            tokens=arr("tokens", np.int32, (n,)),
            counts=arr("counts", np.int32, (n,)),
            params=params,
        )
        # Two values, not the whole array: the cheap half of the offsets check.
        if self._frozen.offsets[0] != 0 or self._frozen.offsets[k] != n:
            raise CorruptFileError(f"{path}: offsets do not span the follower arrays")

    # -- creating and opening ------------------------------------------------

    @classmethod
    def open(cls, path, *, verify=False, tokenizer=None):
        """Open a static cache file (memory-mapped, read-only).

        ``verify`` also checks every section's checksum (reads the whole file).
        ``tokenizer`` (a name, or an object with an ``identity`` dict) makes the
        open fail with TokenizerMismatchError if the cache records another one.
        Opening reads one page; :meth:`prefault` maps the rest in the background.
        """
        mm, header = map_file(path)
        if header.kind != KIND_STATIC:
            raise WrongFileKindError(
                f"{path}: a {KIND_NAMES[header.kind]} cache, not a static one "
                "(load it with NgramCache.load)"
            )
        cache = cls(mm, header, read_meta(mm, header, path), path)
        if verify:
            cache.verify()
        if tokenizer is not None:
            cache.check_tokenizer(tokenizer)
        return cache

    @classmethod
    def build(cls, tokens, path, *, memory_limit=None, meta=None, quiet=True):
        """Count the 2-grams of a token sequence into a static cache file and open it.

        ``tokens`` is an integer array or a token file (``.i32``/``.bin``/``.npy``,
        see :class:`ngramdraft.tokenfile.TokenFile`), read in chunks.
        """
        source = tokens if isinstance(tokens, TokenFile) else as_tokens(tokens)
        build_static([TokenSource(source)], path, memory_limit=memory_limit, meta=meta, quiet=quiet)
        return cls.open(path)

    @classmethod
    def from_cache(cls, cache, path=None, *, meta=None):
        """Freeze the 2-grams of any cache into a static cache file.

        Without ``path`` the file is anonymous: created, mapped, then unlinked.
        """
        return cls._from_sources([SpanSource(*cache.arrays())], path, meta=meta)

    @classmethod
    def from_llamacpp(cls, lookup_path, path=None, *, meta=None):
        """Convert a llama.cpp lookup file (its 2-gram records) into a static cache file."""
        meta = {"converted_from": Path(lookup_path).name, **(meta or {})}
        return cls._from_sources([SpanSource(*llamacpp.read(lookup_path))], path, meta=meta)

    @classmethod
    def merge(cls, caches, path, *, memory_limit=None, quiet=True):
        """One static cache counting every 2-gram of several (e.g. built from shards)."""
        caches = [as_static(c, verify=True) for c in caches]
        names = {c.tokenizer_name for c in caches} - {None}
        if len(names) > 1:
            raise TokenizerMismatchError(
                f"cannot merge caches of different tokenizers: {sorted(names)}"
            )
        meta = {"merged_from": [c.path.name for c in caches]}
        if names:
            meta["tokenizer"] = next(c.meta["tokenizer"] for c in caches if c.tokenizer_name)
        sources = [
            SpanSource(*c.arrays(), n_source_tokens=c.header.n_source_tokens) for c in caches
        ]
        return cls._from_sources(sources, path, memory_limit=memory_limit, meta=meta, quiet=quiet)

    @classmethod
    def _from_sources(cls, sources, path, **kwargs):
        if path is not None:
            build_static(sources, path, **kwargs)
            return cls.open(path)
        fd, tmp = tempfile.mkstemp(suffix=".ngd")
        os.close(fd)
        try:
            build_static(sources, tmp, **kwargs)
            return cls.open(tmp)
        finally:
            os.unlink(tmp)

    def prefault(self):
        """Map the file's pages in a background thread, once (Drafter and replay call it).

        Drafting reads at random, so otherwise its first lookups take page
        faults. Not done by open, which stays one page read whatever the size.
        """
        if self._prefault is None:
            self._prefault = fileformat_prefault(self._mm) or False
        return self._prefault

    # -- the Cache interface -------------------------------------------------

    def __len__(self):
        return self.header.n_keys

    @property
    def n_entries(self):
        return self.header.n_entries

    def followers(self, ngram):
        k0, k1, k2, k3 = check_ngram(ngram)
        f = self._frozen
        h = np.uint64(key_hash_of(f.params, k0, k1, k2, k3))
        n_entries = len(f.tokens)
        lo, n = followers_span(f.keys, f.fuse, f.params, f.offsets, n_entries, k0, k1, k2, k3, h)
        if n == CORRUPT:
            raise CorruptFileError(f"{self.path}: offsets of 2-gram {ngram} are impossible")
        return self._frozen.tokens[lo : lo + n].copy(), self._frozen.counts[lo : lo + n].copy()

    @property
    def max_token(self):
        return self.header.max_token

    def arrays(self):
        f = self._frozen
        return f.keys, f.offsets, f.tokens, f.counts

    def _save_native(self, path):
        with atomic_output(path) as out, open(self.path, "rb") as src:
            shutil.copyfileobj(src, out, 8 << 20)

    # -- integrity -------------------------------------------------------------

    def verify(self, deep=False):
        """Check every section checksum (reads the whole file); raises ChecksumError.

        ``deep`` also checks every structural invariant (see :meth:`_check`).
        """
        verify_sections(self._mm, self.header, self.path)
        if deep:
            self._check()

    def _check(self):
        """Verify every invariant of the file's contents; raises CorruptFileError."""
        f = self._frozen
        check_cache_arrays(f.keys, f.offsets, f.tokens, f.counts, where=str(self.path))
        keys = f.keys.astype(np.int64)
        packed = (keys[:, 0] << 32) | keys[:, 1]
        if len(packed) > 1 and np.any(np.diff(packed) <= 0):
            raise CorruptFileError(f"{self.path}: 2-gram keys are not strictly ascending")
        if not np.array_equal(span_stats(f.offsets, f.tokens, f.counts), f.stats):
            raise CorruptFileError(f"{self.path}: per-2-gram statistics disagree with the counts")
        if int(f.counts.max(initial=0)) != self.header.max_count:
            raise CorruptFileError(
                f"{self.path}: max_count is {self.header.max_count}, "
                f"data has {int(f.counts.max(initial=0))}"
            )
        expected = make_constmap(f.keys, constmap_values(f.stats, 0))
        if len(self) and (expected[0], expected[1]) != (
            self.header.fuse_seed,
            self.header.fuse_segment_length,
        ):
            raise CorruptFileError(f"{self.path}: constmap parameters are not the canonical ones")
        if len(self) and not np.array_equal(expected[3], f.fuse):
            raise CorruptFileError(
                f"{self.path}: constmap does not map every key to its index and draft flag"
            )
        top = max(int(f.keys.max(initial=-1)), int(f.tokens.max(initial=-1)))
        if top != self.header.max_token:
            raise CorruptFileError(
                f"{self.path}: max_token is {self.header.max_token}, data has {top}"
            )

    # -- metadata ----------------------------------------------------------

    @property
    def tokenizer_name(self):
        tok = self.meta.get("tokenizer")
        return tok.get("name") if isinstance(tok, dict) else None

    def check_tokenizer(self, tokenizer):
        """Raise TokenizerMismatchError if this cache was built with another tokenizer."""
        mine = self.meta.get("tokenizer")
        if mine is None:
            return
        theirs = identity_of(tokenizer)
        if mine.get("fingerprint") and theirs.get("fingerprint"):
            same = mine["fingerprint"] == theirs["fingerprint"]
        else:
            same = mine.get("name") == theirs.get("name")
        if not same:
            raise TokenizerMismatchError(
                f"{self.path}: built with tokenizer {mine.get('name')!r}, "
                f"drafting with {theirs.get('name')!r}"
            )

    def info(self):
        """Sizes, counts and checksums, as `ngramdraft inspect` prints them."""
        h = self.header
        size = self.path.stat().st_size if self.path.exists() else None
        return {
            "path": str(self.path),
            "kind": KIND_NAMES[h.kind],
            "format_version": h.version,
            "file_bytes": size,
            "n_2grams": h.n_keys,
            "n_entries": h.n_entries,
            "bytes_per_2gram": size / h.n_keys if size and h.n_keys else None,
            "max_token": h.max_token,
            "max_count": h.max_count,
            "n_source_tokens": h.n_source_tokens,
            "sections": {
                name: {"offset": o, "bytes": s, "xxh3_64": f"{d:016x}"}
                for name, (o, s, d) in h.sections.items()
            },
            "meta": self.meta,
        }

    def close(self):
        """Release the mapping. Arrays handed out earlier must not be used afterwards."""
        self._frozen = None
        self._mm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def as_static(cache, *, verify=False):
    """A StaticCache for the static role: the cache itself, an opened path, or a frozen copy."""
    if isinstance(cache, StaticCache):
        if verify:
            cache.verify()
        return cache
    if isinstance(cache, Cache):
        return StaticCache.from_cache(cache)
    if isinstance(cache, str | os.PathLike):
        if file_format(cache) == "llamacpp":
            return StaticCache.from_llamacpp(cache)
        return StaticCache.open(cache, verify=verify)
    raise InvalidParameterError(f"expected a cache or a path, got {type(cache).__name__}")
