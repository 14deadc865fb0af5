"""The suffix rules' corpus: a corpus's tokens and suffix array in one read-only, mmap'd file."""

import mmap
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CorruptFileError, InvalidParameterError, WrongFileKindError
from ..files.kinds import file_format
from ..files.ngd.header import KIND_NAMES, KIND_REQUESTS, KIND_SUFFIX, Header
from ..files.ngd.reading import map_file, read_meta, section_array
from ..files.ngd.writing import buckets_of
from ..files.tokens import CHUNK
from ..kernels import gramindex, suffixsearch
from ..kernels.suffixsort import DEPTH, first_out_of_order
from ..validation import as_tokens
from .base import Cache, RecordedTokenizer
from .mapped import MappedFile
from .warmup import Warmup

if TYPE_CHECKING:
    from numpy.typing import ArrayLike


class SuffixCorpus(MappedFile, RecordedTokenizer):
    """A corpus for ``rules="suffix"``: its tokens, and their suffixes in order.

    Open with :meth:`open` (reads one page, whatever the size); build with
    :func:`ngramdraft.build_suffix_corpus` or ``ngramdraft build-static --suffix``.
    Any number of drafters, threads or processes can share one. ``text`` and
    ``sa`` are int32 views of the mapping, ``buckets`` int64 and ``grams``
    int64 rows of two (``docs/format.md``, the suffix kind; a file written
    before the index has none, and is searched as before, more slowly).
    """

    role = "static"

    def __init__(self, mm: mmap.mmap, header: Header, meta: dict[str, Any], path: object) -> None:
        self._mm: mmap.mmap | None = mm
        self._warmup: Warmup | None = None
        self.header = header
        self.meta = meta
        self.path = Path(str(path))
        n = header.n_entries
        self.text = section_array(mm, header, "tokens", np.int32, (n,))
        self.sa = section_array(mm, header, "suffixes", np.int32, (n,))
        self.buckets = section_array(mm, header, "buckets", np.int64, (-1,))
        self.grams = section_array(mm, header, "grams", np.int64, (-1, 2))

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, verify: bool = False, tokenizer: object = None
    ) -> "SuffixCorpus":
        """Open a suffix file; ``verify`` reads it all and checks the checksums."""
        if file_format(path) != "native":
            raise WrongFileKindError(
                f"{path}: a llama.cpp lookup file (2-grams), not a suffix file: rules='suffix' "
                "drafts from a corpus built by `ngramdraft build-static --suffix`"
            )
        mm, header = map_file(path)
        if header.kind != KIND_SUFFIX:
            what = (
                "earlier requests (rules='suffix' takes them as dynamic=)"
                if header.kind == KIND_REQUESTS
                else "a 2-gram cache, which only llama.cpp's rules draft from"
            )
            raise WrongFileKindError(
                f"{path}: a {KIND_NAMES[header.kind]} file, {what}: rules='suffix' takes as "
                "static= a corpus built by `ngramdraft build-static --suffix` (or use "
                "rules='llamacpp')"
            )
        return cls(mm, header, read_meta(mm, header, path), path)._opened(verify, tokenizer)

    def __len__(self) -> int:
        """Tokens in the corpus, separators included."""
        return int(self.header.n_entries)

    @property
    def max_token(self) -> int:
        return int(self.header.max_token)

    def longest_match(self, context: "ArrayLike") -> tuple[int, int]:
        """(length, occurrences) of the longest suffix of ``context`` that the corpus holds.

        The search the suffix rules' corpus drafts start from, bounded by the
        depth the suffix array is sorted to (64 tokens); (0, 0) if not even its
        last token occurs.
        """
        tokens = as_tokens(context, "context")
        if not len(tokens):
            return 0, 0
        length, lo, hi = suffixsearch.longest(
            self.text, self.sa, self.buckets, self.grams, tokens, len(tokens), 1, DEPTH
        )
        return int(length), int(hi - lo) if length else 0

    def _check(self) -> None:
        """``verify(deep=True)``: ``sa`` is a permutation in suffix order, no token exceeds
        the recorded largest id, and the buckets and the n-gram index are the ones the
        tokens and ``sa`` give; raises CorruptFileError."""
        top = int(self.text.max(initial=-1))
        if top != self.max_token or int(self.text.min(initial=0)) < -1:
            raise CorruptFileError(
                f"{self.path}: max_token is {self.max_token}, the tokens hold ids up to {top} "
                "(or below the separator -1)"
            )
        n = len(self)
        seen = np.zeros(n, dtype=np.bool_)
        sa = self.sa
        if len(sa) and (int(sa.min()) < 0 or int(sa.max()) >= n):
            raise CorruptFileError(f"{self.path}: the suffix array points outside the corpus")
        seen[sa] = True
        if not seen.all():
            raise CorruptFileError(f"{self.path}: the suffix array misses some positions")
        if (bad := first_out_of_order(self.text, sa)) >= 0:
            raise CorruptFileError(f"{self.path}: suffixes {bad} and {bad + 1} are out of order")
        if len(self.buckets) and not np.array_equal(self.buckets, self._counted_buckets()):
            raise CorruptFileError(f"{self.path}: the buckets disagree with the tokens")
        if len(self.grams) and not np.array_equal(
            self.grams, gramindex.build(self.text, sa, self.max_token)
        ):
            raise CorruptFileError(f"{self.path}: the n-gram index disagrees with the suffixes")

    def _counted_buckets(self) -> np.ndarray:
        # After the check of max_token: no id in the text is larger.
        counts = np.zeros(self.max_token + 1, dtype=np.int64)
        for start in range(0, len(self), CHUNK):
            chunk = self.text[start : start + CHUNK]
            counts += np.bincount(chunk[chunk >= 0], minlength=len(counts))
        return buckets_of(counts, len(self) - int(counts.sum()), self.max_token)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # Another process maps the same file rather than receiving a copy of it.
        return (SuffixCorpus.open, (str(self.path),))

    def __repr__(self) -> str:
        return f"<SuffixCorpus {self.path} tokens={len(self)}>"


def as_corpus(value: object, tokenizer: object = None) -> SuffixCorpus | None:
    """The suffix rules' ``static``: None, a SuffixCorpus, or a suffix file's path, opened."""
    if value is None:
        return None
    if isinstance(value, str | os.PathLike):
        corpus = SuffixCorpus.open(value)
    elif isinstance(value, SuffixCorpus):
        corpus = value
    elif isinstance(value, Cache):
        raise WrongFileKindError(
            f"static= for rules='suffix' is a corpus's suffix file, got a {type(value).__name__} "
            "(an n-gram cache belongs to llama.cpp's rules): pass the path of a file built by "
            "`ngramdraft build-static --suffix`, or use rules='llamacpp'"
        )
    else:
        raise InvalidParameterError(
            f"static= for rules='suffix' is a corpus's suffix file, got {type(value).__name__}: "
            "pass a SuffixCorpus or the path of a file built by `ngramdraft build-static --suffix`"
        )
    if tokenizer is not None:
        corpus.check_tokenizer(tokenizer)
    return corpus
