"""ngramdraft: prompt-lookup (n-gram) speculative drafting with llama.cpp's exact rules.

>>> from ngramdraft import Drafter
"""

from ._version import __version__
from .batch import BatchDrafter, UnknownSequenceError
from .cache import Cache, NgramCache
from .drafter import Drafter
from .errors import (
    CacheFileError,
    ChecksumError,
    CorpusError,
    CorruptFileError,
    InvalidParameterError,
    InvalidTokensError,
    NgramdraftError,
    TokenizerMismatchError,
    TruncatedFileError,
    UnsupportedVersionError,
    WrongFileKindError,
)
from .policy import AdaptiveLength, CostAwareLength
from .replay import ReplayResult, replay
from .static import StaticCache

__all__ = [
    "AdaptiveLength",
    "BatchDrafter",
    "Cache",
    "CacheFileError",
    "ChecksumError",
    "CorpusError",
    "CorruptFileError",
    "CostAwareLength",
    "Drafter",
    "InvalidParameterError",
    "InvalidTokensError",
    "NgramCache",
    "NgramdraftError",
    "ReplayResult",
    "StaticCache",
    "TokenizerMismatchError",
    "TruncatedFileError",
    "UnknownSequenceError",
    "UnsupportedVersionError",
    "WrongFileKindError",
    "__version__",
    "replay",
]
