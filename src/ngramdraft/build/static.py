"""Making static caches: each function writes a static file and returns it opened.

The caches layer only opens files (``caches/static.py``); what creates one is
here: from tokens (:func:`build_static`, or :func:`build_static_distributed`
on Dask), from other caches (:func:`merge_static`, :func:`static_from_cache`)
or from a llama.cpp lookup file (:func:`static_from_llamacpp`). Each writes
through :func:`ngramdraft.build.local.write_static`, so the same 2-grams
give the same file byte for byte whichever way they came.
"""

import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..caches.base import Cache
from ..caches.static import StaticCache
from ..caches.suffix_corpus import SuffixCorpus
from ..errors import InvalidParameterError, TokenizerMismatchError, WrongFileKindError
from ..files import llamacpp
from ..files.kinds import file_format
from ..files.ngd.header import KIND_SUFFIX, NOT_NGRAMS
from ..files.tokens import TokenFile
from ..tokenizers import identity, load_tokenizer
from ..validation import as_tokens, check_path
from . import distributed
from .corpus import Corpus
from .counting import CacheTriples, TokenTriples
from .local import write_static

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

    from .sources import DatasetSource


def build_static(
    tokens: "ArrayLike | TokenFile | str | os.PathLike[str]",
    path: str | os.PathLike[str],
    *,
    memory_limit: int | None = None,
    meta: dict[str, Any] | None = None,
    tokenizer: str | None = None,
    quiet: bool = True,
) -> StaticCache:
    """Count the 2-grams of a token sequence into a static cache file and open it.

    ``tokens`` is an integer array, or a token file or its path (``.i32``/
    ``.bin``/``.npy``, see :class:`ngramdraft.files.tokens.TokenFile`), read
    in chunks. ``tokenizer`` (a name) is recorded, to be checked when drafting.
    For text files and datasets, use ``ngramdraft build-static``.
    """
    if isinstance(tokens, str | os.PathLike):
        tokens = TokenFile(tokens)
    source = tokens if isinstance(tokens, TokenFile) else as_tokens(tokens)
    if tokenizer is not None:
        meta = {"tokenizer": identity(load_tokenizer(tokenizer)), **(meta or {})}
    write_static([TokenTriples(source)], path, memory_limit=memory_limit, meta=meta, quiet=quiet)
    return StaticCache.open(path)


def build_static_distributed(
    inputs: "list[str | os.PathLike[str]] | DatasetSource",
    path: str | os.PathLike[str],
    client: object,
    *,
    tokenizer: str | None = None,
    separate_documents: bool = False,
    memory_limit: int | None = None,
    quiet: bool = True,
) -> StaticCache:
    """Build on a Dask cluster (``client``: a ``distributed.Client``) and open the file.

    ``inputs`` are token files or text files (text needs ``tokenizer``, a
    name every worker can load), or a :class:`ngramdraft.build.sources.DatasetSource`.
    The file is byte for byte the one :func:`build_static` or ``ngramdraft
    build-static`` writes for the same corpus; ``memory_limit`` is per
    worker. See :mod:`ngramdraft.build.distributed`.
    """
    corpus = Corpus.of(inputs, tokenizer, separate_documents)
    distributed.build(client, corpus, path, memory_limit=memory_limit, quiet=quiet)
    return StaticCache.open(path)


def static_from_cache(
    cache: Cache,
    path: "str | os.PathLike[str] | None" = None,
    *,
    meta: dict[str, Any] | None = None,
) -> StaticCache:
    """Freeze the 2-grams of any cache into a static cache file.

    Without ``path`` the file is anonymous: created, mapped, then unlinked.
    """
    if not isinstance(cache, Cache):
        raise InvalidParameterError(f"expected a cache, got {type(cache).__name__}")
    return _from_sources([CacheTriples(*cache.arrays())], path, meta=meta)


def static_from_llamacpp(
    lookup_path: str | os.PathLike[str],
    path: "str | os.PathLike[str] | None" = None,
    *,
    meta: dict[str, Any] | None = None,
) -> StaticCache:
    """Convert a llama.cpp lookup file (its 2-gram records) into a static cache file.

    Without ``path`` the file is anonymous, as for :func:`static_from_cache`.
    """
    meta = {"converted_from": Path(check_path(lookup_path, "lookup_path")).name, **(meta or {})}
    return _from_sources([CacheTriples(*llamacpp.read(lookup_path))], path, meta=meta)


def merge_static(
    caches: "list[StaticCache | str | os.PathLike[str]]",
    path: str | os.PathLike[str],
    *,
    memory_limit: int | None = None,
    quiet: bool = True,
) -> StaticCache:
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
    sources = [CacheTriples(*c.arrays(), n_source_tokens=c.header.n_source_tokens) for c in opened]
    return _from_sources(sources, path, memory_limit=memory_limit, meta=meta, quiet=quiet)


def as_static(
    cache: "Cache | SuffixCorpus | str | os.PathLike[str]", *, tokenizer: object = None
) -> StaticCache:
    """A StaticCache for the static role: the cache itself, an opened path, or a frozen copy.

    A frozen copy (of an in-memory cache, or of a llama.cpp lookup file) is
    written to an anonymous temporary file, mapped, then unlinked: it takes
    disk space in the temporary folder while mapped, and a build's time.
    With ``tokenizer``, a cache that records another tokenizer is refused.
    """
    if isinstance(cache, StaticCache):
        static = cache
    elif isinstance(cache, Cache):
        static = static_from_cache(cache)
    elif isinstance(cache, str | os.PathLike):
        if file_format(cache) == "llamacpp":
            static = static_from_llamacpp(cache)
        else:
            static = StaticCache.open(cache)
    elif isinstance(cache, SuffixCorpus):
        raise WrongFileKindError(f"{cache.path}: {NOT_NGRAMS[KIND_SUFFIX]}")
    else:
        raise InvalidParameterError(f"expected a cache or a path, got {type(cache).__name__}")
    if tokenizer is not None:
        static.check_tokenizer(tokenizer)
    return static


def _from_sources(
    sources: list[CacheTriples], path: "str | os.PathLike[str] | None", **kwargs: Any
) -> StaticCache:
    if path is not None:
        write_static(sources, path, **kwargs)
        return StaticCache.open(path)
    fd, tmp = tempfile.mkstemp(suffix=".ngd")
    os.close(fd)
    try:
        write_static(sources, tmp, **kwargs)
        return StaticCache.open(tmp)
    finally:
        os.unlink(tmp)
