"""The interface every cache answers, whatever its role or storage."""

import abc
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from ..errors import InvalidParameterError
from ..files import llamacpp

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
        if format == "llamacpp":
            llamacpp.write(path, *self.arrays())
        elif format == "native":
            self._save_native(path)
        else:
            raise InvalidParameterError(f"format must be one of {FORMATS}, got {format!r}")

    def __repr__(self) -> str:
        return (
            f"<{type(self).__name__} role={self.role} ngrams={len(self)} entries={self.n_entries}>"
        )
