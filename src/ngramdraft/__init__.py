"""ngramdraft: prompt-lookup (n-gram) speculative drafting with llama.cpp's exact rules.

>>> from ngramdraft import Drafter

The layers, lowest first (``docs/architecture.md``): ``kernels`` (numba
storage), ``files`` (bytes on disk), ``tokenizers``, ``rules`` (what to
draft), ``build`` (corpora into static files), ``caches`` (the three roles),
``drafting`` (what a decoding loop talks to), ``integrations`` (engines) and
``cli``.
"""

from ._version import __version__
from .caches.base import Cache
from .caches.corpus import SuffixCorpus
from .caches.ngram import NgramCache
from .caches.requests import RequestMemory
from .caches.static import StaticCache
from .drafting.batch import BatchDrafter
from .drafting.drafter import Drafter
from .drafting.policy import AdaptiveLength, CostAwareLength, Learns, Policy
from .drafting.replay import ReplayResult, replay
from .errors import (
    CacheFileError,
    ChecksumError,
    CorpusError,
    CorruptFileError,
    DiskFullError,
    DistributedBuildError,
    EmptyCacheWarning,
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
    "fetch_model",
    "replay",
]
