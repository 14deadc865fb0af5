"""ngramdraft: prompt-lookup (n-gram) speculative drafting with llama.cpp's exact rules.

>>> from ngramdraft import Drafter

The layers, lowest first (``docs/architecture.md``): ``kernels`` (numba
storage), ``files`` (bytes on disk), ``tokenizers``, ``caches`` (the three
roles, opened), ``build`` (corpora and caches into static files, returned
opened), ``drafting`` (what a decoding loop talks to, whatever the rules),
``rulesets`` (the rules, one package each, found by name), ``integrations``
(engines) and ``cli``.
"""

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import (
    CacheFileError,
    ChecksumError,
    CorpusError,
    CorruptFileError,
    DiskFullError,
    DistributedBuildError,
    EmptyCacheWarning,
    EngineVersionError,
    InternalError,
    InvalidParameterError,
    InvalidTokensError,
    LockTimeoutError,
    MissingDependencyError,
    ModelDownloadError,
    ModelFileError,
    NgramdraftError,
    NgramdraftWarning,
    ShortStreamWarning,
    TokenizerMismatchError,
    TruncatedFileError,
    UnknownSequenceError,
    UnsavedCountsWarning,
    UnsupportedVersionError,
    VocabularyError,
    WrongFileKindError,
)
from .files.models import fetch_model

# The public names that live in modules with kernels, each imported at its first use: a
# process that only imports ngramdraft (a vLLM worker before its engine starts, a
# command's --help) loads no numba, which takes a third of a second.
_LAZY = {
    "Cache": "caches.base",
    "SuffixCorpus": "caches.suffix_corpus",
    "NgramCache": "caches.ngram",
    "RequestMemory": "caches.requests",
    "StaticCache": "caches.static",
    "BatchDrafter": "drafting.batch",
    "Drafter": "drafting.drafter",
    "AdaptiveLength": "drafting.policy",
    "CostAwareLength": "drafting.policy",
    "Learns": "drafting.policy",
    "Policy": "drafting.policy",
    "ReplayResult": "drafting.replay",
    "replay": "drafting.replay",
    "fetch_model": "files.models",
    "build_static": "build.static",
    "build_static_distributed": "build.static",
    "merge_static": "build.static",
    "static_from_cache": "build.static",
    "static_from_llamacpp": "build.static",
    "build_suffix_corpus": "build.suffixes",
}

if TYPE_CHECKING:
    from .build.static import (
        build_static,
        build_static_distributed,
        merge_static,
        static_from_cache,
        static_from_llamacpp,
    )
    from .build.suffixes import build_suffix_corpus
    from .caches.base import Cache
    from .caches.ngram import NgramCache
    from .caches.requests import RequestMemory
    from .caches.static import StaticCache
    from .caches.suffix_corpus import SuffixCorpus
    from .drafting.batch import BatchDrafter
    from .drafting.drafter import Drafter
    from .drafting.policy import AdaptiveLength, CostAwareLength, Learns, Policy
    from .drafting.replay import ReplayResult, replay
    from .files.models import fetch_model


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ngramdraft' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "AdaptiveLength",
    "BatchDrafter",
    "Cache",
    "CacheFileError",
    "ChecksumError",
    "CorpusError",
    "CorruptFileError",
    "CostAwareLength",
    "DiskFullError",
    "DistributedBuildError",
    "Drafter",
    "EmptyCacheWarning",
    "EngineVersionError",
    "InternalError",
    "InvalidParameterError",
    "InvalidTokensError",
    "Learns",
    "LockTimeoutError",
    "MissingDependencyError",
    "ModelDownloadError",
    "ModelFileError",
    "NgramCache",
    "NgramdraftError",
    "NgramdraftWarning",
    "Policy",
    "ReplayResult",
    "RequestMemory",
    "ShortStreamWarning",
    "StaticCache",
    "SuffixCorpus",
    "TokenizerMismatchError",
    "TruncatedFileError",
    "UnknownSequenceError",
    "UnsavedCountsWarning",
    "UnsupportedVersionError",
    "VocabularyError",
    "WrongFileKindError",
    "__version__",
    "build_static",
    "build_static_distributed",
    "build_suffix_corpus",
    "fetch_model",
    "merge_static",
    "replay",
    "static_from_cache",
    "static_from_llamacpp",
]
