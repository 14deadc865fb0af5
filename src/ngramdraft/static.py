"""The static cache: 2-grams of a large corpus in one read-only, memory-mapped file."""

import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from . import llamacpp
from .atomic import atomic_output
from .build import SpanSource, TokenSource, build_static, make_constmap
from .cache import Cache, file_format
from .errors import (
    ChecksumError,
    CorruptFileError,
    InvalidParameterError,
    TokenizerMismatchError,
    WrongFileKindError,
)
from .fileformat import (
    KIND_NAMES,
    KIND_STATIC,
    map_file,
    populate,
    read_meta,
    section_array,
    verify_sections,
)
from .kernels.draft import constmap_values
from .kernels.frozen import CORRUPT, Frozen, followers_span, key_hash_of
from .kernels.triples import span_stats
from .tokenfile import TokenFile
from .tokenizer import same_tokenizer, tokenizer_kind
from .validation import as_tokens, check_cache_arrays, check_ngram

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .corpus import DatasetSource


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
        self._warmup = None
        k, n = header.n_keys, header.n_entries

        def arr(name, dtype, shape):
            return section_array(mm, header, name, dtype, shape)

        params = np.array(
            [
                header.fuse_seed,
                header.fuse_segment_length,
                header.fuse_segment_length * header.fuse_segment_count,
                header.max_count,
                max(header.max_token, 0),  # -1 when empty: then nothing is drafted
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
    def open(
        cls, path: str | os.PathLike, *, verify: bool = False, tokenizer: object = None
    ) -> "StaticCache":
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
    def build(
        cls,
        tokens: "ArrayLike | TokenFile | str | os.PathLike",
        path: str | os.PathLike,
        *,
        memory_limit: int | None = None,
        meta: dict | None = None,
        quiet: bool = True,
    ) -> "StaticCache":
        """Count the 2-grams of a token sequence into a static cache file and open it.

        ``tokens`` is an integer array, or a token file or its path (``.i32``/
        ``.bin``/``.npy``, see :class:`ngramdraft.tokenfile.TokenFile`), read in chunks.
        """
        if isinstance(tokens, str | os.PathLike):
            tokens = TokenFile(tokens)
        source = tokens if isinstance(tokens, TokenFile) else as_tokens(tokens)
        build_static([TokenSource(source)], path, memory_limit=memory_limit, meta=meta, quiet=quiet)
        return cls.open(path)

    @classmethod
    def build_distributed(
        cls,
        inputs: "list[str | os.PathLike] | DatasetSource",
        path: str | os.PathLike,
        client: object,
        *,
        tokenizer: str | None = None,
        separate_documents: bool = False,
        memory_limit: int | None = None,
        quiet: bool = True,
    ) -> "StaticCache":
        """Build on a Dask cluster (``client``: a ``distributed.Client``) and open the file.

        ``inputs`` are token files or text files (text needs ``tokenizer``, a
        name every worker can load), or a :class:`ngramdraft.corpus.DatasetSource`.
        The file is byte for byte the one :meth:`build` or ``ngramdraft
        build-static`` writes for the same corpus; ``memory_limit`` is per
        worker. See :mod:`ngramdraft.distributed`.
        """
        from . import distributed
        from .corpus import Corpus

        corpus = Corpus.of(inputs, tokenizer, separate_documents)
        distributed.build(client, corpus, path, memory_limit=memory_limit, quiet=quiet)
        return cls.open(path)

    @classmethod
    def from_cache(
        cls, cache: Cache, path: "str | os.PathLike | None" = None, *, meta: dict | None = None
    ) -> "StaticCache":
        """Freeze the 2-grams of any cache into a static cache file.

        Without ``path`` the file is anonymous: created, mapped, then unlinked.
        """
        return cls._from_sources([SpanSource(*cache.arrays())], path, meta=meta)

    @classmethod
    def from_llamacpp(
        cls,
        lookup_path: str | os.PathLike,
        path: "str | os.PathLike | None" = None,
        *,
        meta: dict | None = None,
    ) -> "StaticCache":
        """Convert a llama.cpp lookup file (its 2-gram records) into a static cache file."""
        meta = {"converted_from": Path(lookup_path).name, **(meta or {})}
        return cls._from_sources([SpanSource(*llamacpp.read(lookup_path))], path, meta=meta)

    @classmethod
    def merge(
        cls,
        caches: "list[StaticCache | str | os.PathLike]",
        path: str | os.PathLike,
        *,
        memory_limit: int | None = None,
        quiet: bool = True,
    ) -> "StaticCache":
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

    def prefault(self) -> "Warmup":
        """Map the file's pages, then check its checksums, in a background thread, once.

        Drafting reads at random, so otherwise its first lookups take page
        faults; and a damaged file is found within the time it takes to read
        it (about 30 ms per 500 MB once mapped), after which :meth:`check`
        raises ChecksumError. Drafter and replay call this; open does not, so
        that opening stays one page read whatever the size. Returns the
        :class:`Warmup`.
        """
        if self._warmup is None:
            self._warmup = Warmup(self)
        return self._warmup

    # -- the Cache interface -------------------------------------------------

    def __len__(self):
        return self.header.n_keys

    @property
    def n_entries(self) -> int:
        return self.header.n_entries

    def followers(self, ngram: "ArrayLike") -> tuple[np.ndarray, np.ndarray]:
        k0, k1, k2, k3 = check_ngram(ngram)
        f = self._frozen
        h = np.uint64(key_hash_of(f.params, k0, k1, k2, k3))
        n_entries = len(f.tokens)
        lo, n = followers_span(f.keys, f.fuse, f.params, f.offsets, n_entries, k0, k1, k2, k3, h)
        if n == CORRUPT:
            raise CorruptFileError(f"{self.path}: offsets of 2-gram {ngram} are impossible")
        return self._frozen.tokens[lo : lo + n].copy(), self._frozen.counts[lo : lo + n].copy()

    @property
    def max_token(self) -> int:
        return self.header.max_token

    def arrays(self):
        f = self._frozen
        return f.keys, f.offsets, f.tokens, f.counts

    def _save_native(self, path):
        with atomic_output(path) as out, open(self.path, "rb") as src:
            shutil.copyfileobj(src, out, 8 << 20)

    # -- integrity -------------------------------------------------------------

    def verify(self, deep: bool = False) -> None:
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

    def check_tokenizer(self, tokenizer: object) -> None:
        """Raise TokenizerMismatchError if this cache was built with another tokenizer."""
        mine = self.meta.get("tokenizer")
        if mine is None:
            if isinstance(tokenizer, str | os.PathLike):
                tokenizer_kind(tokenizer)  # a misspelled name is an error, recorded or not
            return
        if same_tokenizer(mine, tokenizer):
            return
        theirs = tokenizer.get("name") if isinstance(tokenizer, dict) else None
        theirs = theirs or getattr(tokenizer, "name", None) or str(tokenizer)
        raise TokenizerMismatchError(
            f"{self.path}: built with tokenizer {mine.get('name')!r}, drafting with {theirs!r}"
        )

    def check_tokens(self, tokens: np.ndarray) -> None:
        """Raise TokenizerMismatchError if ``tokens`` holds ids the cache's tokenizer lacks."""
        tok = self.meta.get("tokenizer")
        n_vocab = tok.get("n_vocab") if isinstance(tok, dict) else None
        top = int(tokens.max(initial=-1))
        if isinstance(n_vocab, int) and top >= n_vocab:
            raise TokenizerMismatchError(
                f"the tokens hold id {top}, but {self.path} was built with tokenizer "
                f"{tok.get('name')!r} of {n_vocab} ids: tokenize with the cache's tokenizer"
            )

    def info(self) -> dict:
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

    def close(self) -> None:
        """Release the mapping. Arrays handed out earlier must not be used afterwards."""
        self._frozen = None
        self._mm = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def as_static(cache: "Cache | str | os.PathLike", *, verify: bool = False) -> StaticCache:
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


class Warmup:
    """A static cache's pages mapped, then its checksums checked, in one daemon thread.

    ``mapped`` is set once every page is mapped (what replay waits for before
    its clock starts), ``done`` once the checksums are checked; ``damage`` is
    then None or the ChecksumError to raise.
    """

    def __init__(self, cache):
        self.mapped = threading.Event()
        self.done = threading.Event()
        self.damage = None
        mm, header, path = cache._mm, cache.header, cache.path

        def run():
            try:
                populate(mm)
                self.mapped.set()
                verify_sections(mm, header, path)
            except ChecksumError as e:
                self.damage = e
            finally:
                self.mapped.set()
                self.done.set()

        threading.Thread(target=run, daemon=True, name="ngramdraft-warmup").start()

    def wait(self):
        """Block until the check is done; raise ChecksumError if it found damage."""
        self.done.wait()
        if self.damage is not None:
            raise self.damage
