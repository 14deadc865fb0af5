"""The interface every cache answers, whatever its role or storage."""

import abc
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InvalidParameterError, TokenizerMismatchError
from ..files import llamacpp
from ..tokenizers import same_tokenizer, tokenizer_kind
from ..validation import as_tokens

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

FORMATS = ("native", "llamacpp")
Arrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


class Cache(abc.ABC):
    """What every cache answers, whatever its role or storage.

    * ``followers(ngram)``: the followers of an n-gram as (tokens, counts)
      int32 arrays, ascending by token; empty arrays when the n-gram is absent;
    * ``len(cache)``: the number of n-grams; ``cache.n_entries``: the number
      of (n-gram, follower) pairs;
    * ``arrays()``: everything as flat arrays sorted by n-gram;
    * iteration: ``(ngram, tokens, counts)`` in n-gram order;
    * ``save(path, format="native" | "llamacpp")``.
    """

    role = "cache"

    @abc.abstractmethod
    def followers(self, ngram: "ArrayLike") -> tuple[np.ndarray, np.ndarray]: ...

    @abc.abstractmethod
    def arrays(self) -> Arrays:
        """(keys[K, width], offsets[K+1], tokens, counts), keys ascending, padding -1."""

    @abc.abstractmethod
    def __len__(self) -> int: ...

    @property
    @abc.abstractmethod
    def n_entries(self) -> int: ...

    @abc.abstractmethod
    def _save_native(self, path: str | os.PathLike[str]) -> None: ...

    @property
    def max_token(self) -> int:
        """The largest token id in any n-gram or follower (-1 when empty)."""
        keys, _, tokens, _ = self.arrays()
        return int(max(keys.max(initial=-1), tokens.max(initial=-1)))

    def __contains__(self, ngram: object) -> bool:
        return len(self.followers(ngram)[0]) > 0  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[tuple[tuple[int, ...], np.ndarray, np.ndarray]]:
        keys, offsets, tokens, counts = self.arrays()
        for i in range(len(keys)):
            ngram = tuple(int(t) for t in keys[i] if t >= 0)
            yield ngram, tokens[offsets[i] : offsets[i + 1]], counts[offsets[i] : offsets[i + 1]]

    def save(self, path: str | os.PathLike[str], format: str = "native") -> None:
        """Write the cache atomically: ``native`` (.ngd) or ``llamacpp`` (lookup file)."""
        if not isinstance(format, str) or format not in FORMATS:
            raise InvalidParameterError(f"format must be one of {FORMATS}, got {format!r}")
        if format == "llamacpp":
            llamacpp.write(path, *self.arrays())
        else:
            self._save_native(path)

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} role={self.role} ngrams={len(self)} entries={self.n_entries}>"
        )


class RecordedTokenizer:
    """The tokenizer a corpus file records in its meta (``meta``, ``path`` set by the file)."""

    meta: dict[str, Any]
    path: Path

    @property
    def tokenizer_name(self) -> str | None:
        tok = self.meta.get("tokenizer")
        return tok.get("name") if isinstance(tok, dict) else None

    @property
    def _n_vocab(self) -> int | None:
        """The recorded tokenizer's number of ids, if the file records one."""
        tok = self.meta.get("tokenizer")
        n_vocab = tok.get("n_vocab") if isinstance(tok, dict) else None
        return n_vocab if isinstance(n_vocab, int) else None

    def check_tokenizer(self, tokenizer: object) -> None:
        """Raise TokenizerMismatchError if this file was built with another tokenizer."""
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
        """Raise TokenizerMismatchError if ``tokens`` holds ids the file's tokenizer lacks."""
        n_vocab = self._n_vocab
        top = int(as_tokens(tokens).max(initial=-1))
        if n_vocab is not None and top >= n_vocab:
            raise TokenizerMismatchError(
                f"the tokens hold id {top}, but {self.path} was built with tokenizer "
                f"{self.tokenizer_name!r} of {n_vocab} ids: tokenize with the cache's tokenizer"
            )
