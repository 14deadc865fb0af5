"""Every error and warning ngramdraft raises on purpose.

Every error derives from :class:`NgramdraftError`, so a caller can catch one
type. The value-shaped errors also derive from ``ValueError`` (and a missing
package from ``ImportError``, an unknown sequence from ``KeyError``) so that
generic handlers keep working. An argument of the wrong type is named too
(:class:`InvalidParameterError`, :class:`InvalidTokensError`), not left to
whatever Python raises deep inside (``tests/test_api_inputs.py`` gives the
public calls odd arguments); a path that names no file raises
``FileNotFoundError``, as ``open()`` does. An invariant of ngramdraft's own
that breaks is :class:`InternalError`, never a bare ``AssertionError``.
"""


class NgramdraftError(Exception):
    """Base class of every error ngramdraft raises on purpose."""


class InvalidTokensError(NgramdraftError, ValueError):
    """Tokens of the wrong type, shape or range (ids must be in 0 .. 2**31-1)."""


class InvalidParameterError(NgramdraftError, ValueError):
    """A parameter outside its documented range (n_draft < 1, sizes outside 1..4, ...)."""


class UnknownSequenceError(InvalidParameterError, KeyError):
    """A BatchDrafter sequence id that is not active (never added, or already finished)."""

    def __str__(self) -> str:
        return str(self.args[0])


class CacheFileError(NgramdraftError):
    """A cache file that cannot be used; the message names the file and the problem."""


class TruncatedFileError(CacheFileError):
    """The file is shorter than its header or its records say it must be."""


class CorruptFileError(CacheFileError):
    """A size, offset or value in the file contradicts the format."""


class ChecksumError(CorruptFileError):
    """A section's xxh3 checksum does not match its bytes."""


class WrongFileKindError(CacheFileError):
    """The file is not a cache of the expected kind (foreign file, static vs dynamic)."""


class UnsupportedVersionError(CacheFileError):
    """The file was written by a newer (or unknown) version of the format."""


class TokenizerMismatchError(NgramdraftError):
    """The cache was built with another tokenizer than the caller drafts with."""


class VocabularyError(TokenizerMismatchError):
    """The cache holds token ids the model's vocabulary does not have."""


class CorpusError(NgramdraftError):
    """A corpus source that cannot be read (missing file, unknown column, offline hub)."""


class DistributedBuildError(NgramdraftError):
    """The cluster could not finish a build (a task kept killing its workers, ...)."""


class MissingDependencyError(NgramdraftError, ImportError):
    """An optional package (engine, tokenizer) is missing; the message names its extra."""


class ModelFileError(NgramdraftError):
    """A model path that does not exist or is not a model file the engine can load."""


class EngineVersionError(NgramdraftError):
    """The engine installed lacks what ngramdraft's adapter was written for; the message
    names what is missing and the version to install."""


class ModelDownloadError(NgramdraftError):
    """A trained model could not be fetched (no registry reachable, or not the published file)."""


class LockTimeoutError(NgramdraftError):
    """A shared file's lock could not be taken in time; nothing was written."""


class DiskFullError(NgramdraftError, OSError):
    """A write ran out of space (or quota); the old file is intact and nothing was left behind."""


class InternalError(NgramdraftError):
    """An invariant of ngramdraft's own broke: a bug, to be reported with the message."""


class NgramdraftWarning(UserWarning):
    """Base class of the warnings ngramdraft gives (the command line prints them as one line)."""


class EmptyCacheWarning(NgramdraftWarning):
    """A build that found no 2-gram: the cache drafts nothing."""


class ShortStreamWarning(NgramdraftWarning):
    """A replayed stream too short to hold one chunk: nothing was measured."""


class UnsavedCountsWarning(NgramdraftWarning):
    """A dynamic file that cannot be written now (read-only, full, damaged, locked): drafting
    goes on from what was read, and the counts wait in memory for a save that can succeed."""
