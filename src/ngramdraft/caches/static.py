"""The static cache: 2-grams of a large corpus in one read-only, memory-mapped file."""

import mmap
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..build import distributed
from ..build.corpus import Corpus
from ..build.counting import CacheTriples, TokenTriples
from ..build.local import build_static
from ..errors import (
    CorruptFileError,
    InvalidParameterError,
    TokenizerMismatchError,
    WrongFileKindError,
)
from ..files import llamacpp
from ..files.atomic import atomic_output
from ..files.kinds import file_format
from ..files.ngd.header import KIND_NAMES, KIND_STATIC, KIND_SUFFIX, NOT_NGRAMS, Header
from ..files.ngd.reading import frozen_view, map_file, read_meta
from ..files.ngd.writing import make_constmap
from ..files.tokens import TokenFile
from ..kernels.frozen import CORRUPT, followers_span, key_hash_of, key_values, span_stats
from ..kernels.handles import frozen_handle
from ..tokenizers import identity, load_tokenizer
from ..validation import as_tokens, check_cache_arrays, check_ngram, check_path
from .base import Arrays, Cache, RecordedTokenizer
from .mapped import MappedFile
from .suffix_corpus import SuffixCorpus
from .warmup import Warmup

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from ..build.sources import DatasetSource


class StaticCache(MappedFile, RecordedTokenizer, Cache):
    """2-gram -> followers of a corpus, served zero-copy from a mmap'd ``.ngd`` file.

    Open with :meth:`open` (reads one page, whatever the size) or create with
    :meth:`build`, :meth:`from_cache`, :meth:`from_llamacpp` or :meth:`merge`
    (each writes the file through the build layer, ``ngramdraft.build``, and
    opens it). Any number of drafters, threads or processes can share one.

    For kernels: ``frozen`` is the file's arrays (``kernels.frozen.Frozen``,
    views of the mapping) and ``handle`` their handle.
    """

    role = "static"

    def __init__(self, mm: mmap.mmap, header: Header, meta: dict[str, Any], path: object) -> None:
        self._mm: mmap.mmap | None = mm
        self.header = header
        self.meta = meta
        self.path = Path(str(path))
        self._warmup: Warmup | None = None
        self._arrays_checked = False
        self.frozen = frozen_view(mm, header, path)
        self.handle = frozen_handle(self.frozen)

    # -- creating and opening ------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        verify: bool = False,
        tokenizer: object = None,
    ) -> "StaticCache":
        """Open a static cache file (memory-mapped, read-only).

        ``verify`` also checks every section's checksum (reads the whole file).
        ``tokenizer`` (a name, or an object with an ``identity`` dict) makes the
        open fail with TokenizerMismatchError if the cache records another one.
        Opening reads one page; :meth:`prefault` maps the rest in the background.
        """
        mm, header = map_file(path)
        if header.kind in NOT_NGRAMS:
            raise WrongFileKindError(f"{path}: {NOT_NGRAMS[header.kind]}")
        if header.kind != KIND_STATIC:
            raise WrongFileKindError(
                f"{path}: a {KIND_NAMES[header.kind]} cache, not a static one "
                "(load it with NgramCache.load)"
            )
        return cls(mm, header, read_meta(mm, header, path), path)._opened(verify, tokenizer)

    @classmethod
    def build(
        cls,
        tokens: "ArrayLike | TokenFile | str | os.PathLike[str]",
        path: str | os.PathLike[str],
        *,
        memory_limit: int | None = None,
        meta: dict[str, Any] | None = None,
        tokenizer: str | None = None,
        quiet: bool = True,
    ) -> "StaticCache":
        """Count the 2-grams of a token sequence into a static cache file and open it.

        ``tokens`` is an integer array, or a token file or its path (``.i32``/
        ``.bin``/``.npy``, see :class:`ngramdraft.files.tokens.TokenFile`), read
        in chunks. ``tokenizer`` (a name) is recorded, to be checked when drafting.
        """
        if isinstance(tokens, str | os.PathLike):
            tokens = TokenFile(tokens)
        source = tokens if isinstance(tokens, TokenFile) else as_tokens(tokens)
        if tokenizer is not None:
            meta = {"tokenizer": identity(load_tokenizer(tokenizer)), **(meta or {})}
        build_static(
            [TokenTriples(source)], path, memory_limit=memory_limit, meta=meta, quiet=quiet
        )
        return cls.open(path)

    @classmethod
    def build_distributed(
        cls,
        inputs: "list[str | os.PathLike[str]] | DatasetSource",
        path: str | os.PathLike[str],
        client: object,
        *,
        tokenizer: str | None = None,
        separate_documents: bool = False,
        memory_limit: int | None = None,
        quiet: bool = True,
    ) -> "StaticCache":
        """Build on a Dask cluster (``client``: a ``distributed.Client``) and open the file.

        ``inputs`` are token files or text files (text needs ``tokenizer``, a
        name every worker can load), or a :class:`ngramdraft.build.sources.DatasetSource`.
        The file is byte for byte the one :meth:`build` or ``ngramdraft
        build-static`` writes for the same corpus; ``memory_limit`` is per
        worker. See :mod:`ngramdraft.build.distributed`.
        """
        corpus = Corpus.of(inputs, tokenizer, separate_documents)
        distributed.build(client, corpus, path, memory_limit=memory_limit, quiet=quiet)
        return cls.open(path)

    @classmethod
    def from_cache(
        cls,
        cache: Cache,
        path: "str | os.PathLike[str] | None" = None,
        *,
        meta: dict[str, Any] | None = None,
    ) -> "StaticCache":
        """Freeze the 2-grams of any cache into a static cache file.

        Without ``path`` the file is anonymous: created, mapped, then unlinked.
        """
        if not isinstance(cache, Cache):
            raise InvalidParameterError(f"expected a cache, got {type(cache).__name__}")
        return cls._from_sources([CacheTriples(*cache.arrays())], path, meta=meta)

    @classmethod
    def from_llamacpp(
        cls,
        lookup_path: str | os.PathLike[str],
        path: "str | os.PathLike[str] | None" = None,
        *,
        meta: dict[str, Any] | None = None,
    ) -> "StaticCache":
        """Convert a llama.cpp lookup file (its 2-gram records) into a static cache file."""
        meta = {"converted_from": Path(check_path(lookup_path, "lookup_path")).name, **(meta or {})}
        return cls._from_sources([CacheTriples(*llamacpp.read(lookup_path))], path, meta=meta)

    @classmethod
    def merge(
        cls,
        caches: "list[StaticCache | str | os.PathLike[str]]",
        path: str | os.PathLike[str],
        *,
        memory_limit: int | None = None,
        quiet: bool = True,
    ) -> "StaticCache":
        """One static cache counting every 2-gram of several (e.g. built from shards)."""
        if not isinstance(caches, list | tuple):
            raise InvalidParameterError(
                f"caches must be a list of static caches or paths, got {type(caches).__name__}"
            )
        opened = [as_static(c) for c in caches]  # arrays() verifies each before reading
        names = {name for c in opened if (name := c.tokenizer_name) is not None}
        if len(names) > 1:
            raise TokenizerMismatchError(
                f"cannot merge caches of different tokenizers: {sorted(names)}"
            )
        meta: dict[str, Any] = {"merged_from": [c.path.name for c in opened]}
        if names:
            meta["tokenizer"] = next(c.meta["tokenizer"] for c in opened if c.tokenizer_name)
        sources = [
            CacheTriples(*c.arrays(), n_source_tokens=c.header.n_source_tokens) for c in opened
        ]
        return cls._from_sources(sources, path, memory_limit=memory_limit, meta=meta, quiet=quiet)

    @classmethod
    def _from_sources(
        cls, sources: list[CacheTriples], path: "str | os.PathLike[str] | None", **kwargs: Any
    ) -> "StaticCache":
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

    # -- the Cache interface -------------------------------------------------

    def __len__(self) -> int:
        return self.header.n_keys

    @property
    def n_entries(self) -> int:
        return self.header.n_entries

    def followers(self, ngram: "ArrayLike") -> tuple[np.ndarray, np.ndarray]:
        key = check_ngram(ngram)
        f = self.frozen
        lo, n = followers_span(f, key, np.uint64(key_hash_of(f, key)))
        if n == CORRUPT:
            raise CorruptFileError(f"{self.path}: offsets of 2-gram {key[:2]} are impossible")
        return f.tokens[lo : lo + n].copy(), f.counts[lo : lo + n].copy()

    @property
    def max_token(self) -> int:
        return self.header.max_token

    def arrays(self) -> Arrays:
        """The file's arrays, checked: every path that copies or converts the cache reads here.

        Opening checks no array, so that it stays one page read; drafting bounds
        every span it reads. A copy hands every offset to numpy and the build
        kernels, so the first call checks the checksums (through the warm-up, so
        that they are read once whoever asks first) and the arrays' structure
        (the copy reads the whole file anyway) and raises a named error on damage.
        """
        if not self._arrays_checked:
            self.prefault().wait()
            self._check_arrays()
            self._arrays_checked = True
        f = self.frozen
        return f.keys, f.offsets, f.tokens, f.counts

    def _save_native(self, path: str | os.PathLike[str]) -> None:
        # From the mapping, not the path: another writer may have replaced the file since.
        mm, block = self._mapping(), 8 << 20
        with atomic_output(path, len(mm)) as out:
            for start in range(0, len(mm), block):
                out.write(mm[start : start + block])

    # -- integrity -------------------------------------------------------------

    def _check_arrays(self) -> None:
        """The invariants a copy relies on: spans, ids in range, keys ascending, counts."""
        f = self.frozen
        check_cache_arrays(f.keys, f.offsets, f.tokens, f.counts, where=str(self.path))
        keys = f.keys.astype(np.int64)
        packed = (keys[:, 0] << 32) | keys[:, 1]
        if len(packed) > 1 and np.any(np.diff(packed) <= 0):
            raise CorruptFileError(f"{self.path}: 2-gram keys are not strictly ascending")
        top = max(int(f.keys.max(initial=-1)), int(f.tokens.max(initial=-1)))
        if top != self.header.max_token:
            raise CorruptFileError(
                f"{self.path}: max_token is {self.header.max_token}, data has {top}"
            )
        n_vocab = self._n_vocab
        if n_vocab is not None and top >= n_vocab:
            raise CorruptFileError(
                f"{self.path}: holds id {top}, but its tokenizer has {n_vocab} ids"
            )

    def _check(self) -> None:
        """Verify every invariant of the file's contents; raises CorruptFileError."""
        self._check_arrays()
        f = self.frozen
        if not np.array_equal(span_stats(f.offsets, f.tokens, f.counts), f.stats):
            raise CorruptFileError(f"{self.path}: per-2-gram statistics disagree with the counts")
        if int(f.counts.max(initial=0)) != self.header.max_count:
            raise CorruptFileError(
                f"{self.path}: max_count is {self.header.max_count}, "
                f"data has {int(f.counts.max(initial=0))}"
            )
        seed, seglen, _, fuse = make_constmap(f.keys, key_values(f.offsets, f.counts, 0))
        if len(self) and (seed, seglen) != (self.header.fuse_seed, self.header.fuse_segment_length):
            raise CorruptFileError(f"{self.path}: constmap parameters are not the canonical ones")
        if len(self) and not np.array_equal(fuse, f.fuse):
            raise CorruptFileError(
                f"{self.path}: constmap does not map every key to its index and draft flag"
            )

    # -- metadata ----------------------------------------------------------


def as_static(
    cache: "Cache | SuffixCorpus | str | os.PathLike[str]", *, tokenizer: object = None
) -> StaticCache:
    """A StaticCache for the static role: the cache itself, an opened path, or a frozen copy.

    A frozen copy (of an in-memory cache, or of a llama.cpp lookup file) is
    written to an anonymous temporary file, mapped, then unlinked: it takes
    disk space in the temporary folder while mapped, and the build layer's
    time. With ``tokenizer``, a cache that records another tokenizer is
    refused.
    """
    if isinstance(cache, StaticCache):
        static = cache
    elif isinstance(cache, Cache):
        static = StaticCache.from_cache(cache)
    elif isinstance(cache, str | os.PathLike):
        if file_format(cache) == "llamacpp":
            static = StaticCache.from_llamacpp(cache)
        else:
            static = StaticCache.open(cache)
    elif isinstance(cache, SuffixCorpus):
        raise WrongFileKindError(f"{cache.path}: {NOT_NGRAMS[KIND_SUFFIX]}")
    else:
        raise InvalidParameterError(f"expected a cache or a path, got {type(cache).__name__}")
    if tokenizer is not None:
        static.check_tokenizer(tokenizer)
    return static
