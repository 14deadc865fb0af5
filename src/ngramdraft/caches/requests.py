"""RequestMemory: earlier requests, the suffix rules' dynamic role, within a token budget.

Finished sequences are kept back to back, each followed by a -1 separator,
in one :class:`~ngramdraft.caches.positions.PositionIndex`, so a query finds
the longest match of the current sequence's end in any of them. Past
``max_tokens`` the oldest sequences go first: the index is rebuilt from the
newest that fill half the budget, so a rebuild's cost is spread over at
least half a budget of added tokens. One memory may be shared by any number
of drafters and threads: ``lock`` is held while it changes and while a
drafter's kernel reads it. A rebuild (past the budget, past the arrays'
capacity, or ``hold``) makes its new index without it and swaps the arrays
in under it, so drafters never wait for a reindex; sequences added
meanwhile are carried over.
Saved, it is a requests file (``docs/format.md``, kind 4: the tokens as
held); ``caches/shared.py`` shares one between processes.
"""

import os
import threading
from collections.abc import Sequence

import numpy as np

from ..errors import CorruptFileError, InvalidTokensError, WrongFileKindError
from ..files.ngd.header import KIND_NAMES, KIND_REQUESTS
from ..files.ngd.reading import map_file, section_array, verify_sections
from ..files.ngd.writing import write_requests_file
from ..validation import TOKEN_MAX, as_tokens, check_int, within
from .positions import PositionIndex

MAX_TOKENS = 1 << 20  # the default budget: at most 80 MiB of index (positions.py)


class RequestMemory:
    """Earlier requests' tokens, searchable by the suffix rules (see the module's doc)."""

    role = "dynamic"

    def __init__(self, max_tokens: int = MAX_TOKENS) -> None:
        self.max_tokens = check_int(max_tokens, "max_tokens", 2)
        self.lock = threading.Lock()
        # One rebuild at a time (an eviction, a growth or a hold), made without ``lock``.
        self._rebuilding = threading.Lock()
        self.index = PositionIndex()
        self.max_token = -1

    def __len__(self) -> int:
        """Tokens held, separators included."""
        return self.index.n

    def _ended(self, tokens: "np.ndarray | list[int]") -> np.ndarray:
        """One finished sequence as held: its last max_tokens - 1 tokens, then -1 (or nothing)."""
        seq = as_tokens(tokens, "tokens")[-(self.max_tokens - 1) :]
        return np.append(seq, np.int32(-1)) if len(seq) else seq

    def add(self, tokens: "np.ndarray | list[int]") -> None:
        """Remember one finished sequence (its last max_tokens - 1 tokens)."""
        ended = self._ended(tokens)
        if len(ended) == 0:
            return
        with self.lock:
            if self._append(ended):
                return
        with self._rebuilding:
            with self.lock:
                if self._append(ended):  # the rebuild before this one made room
                    return
                seen = self.index.n
                if seen + len(ended) > self.max_tokens:  # past the budget: the newest half
                    kept = _newest(self.index.tokens, self.max_tokens // 2 - len(ended))
                else:  # past the arrays: all of it, in larger ones
                    kept = self.index.tokens.copy()
            held = np.concatenate([kept, ended])
            fresh, top = self._index_of(held), int(held.max())
            with self.lock:
                added = self.index.tokens[seen:].copy()  # added while it was built
                fresh.append(added)
                top = max(top, int(added.max(initial=-1)))
                if len(fresh.tokens) > self.max_tokens:  # more than the budget meanwhile
                    fresh = self._index_of(_newest(fresh.tokens, self.max_tokens // 2))
                    top = int(fresh.tokens.max(initial=-1))
                self._take(fresh, top)

    def _index_of(self, tokens: np.ndarray) -> PositionIndex:
        """An index of ``tokens`` with room for as many again, up to the budget, so that
        rebuilds to grow it come at doublings, as a list's do."""
        return PositionIndex.of(tokens, min(self.max_tokens, 2 * len(tokens)))

    def _append(self, ended: np.ndarray) -> bool:
        """Append ``ended`` if it fits in the budget and the arrays (``lock`` held): growing
        them would refile every token under ``lock``; whether it did."""
        if self.index.n + len(ended) > min(self.max_tokens, len(self.index.text)):
            return False
        self.index.append(ended)
        self.max_token = max(self.max_token, int(ended.max()))
        return True

    def _take(self, fresh: PositionIndex, top: int) -> None:
        """Hold what ``fresh`` holds, ``top`` its largest token (``lock`` held, which its
        callers do not spend finding that): a swap of arrays, the handle the drafters hold
        staying the same."""
        self.index.take(fresh)
        self.max_token = top

    def hold(self, held: np.ndarray, more: "Sequence[np.ndarray]" = ()) -> None:
        """Hold exactly ``held`` (sequences each ended by -1) and then the finished sequences
        ``more``, the newest that fit half the budget if they are over it."""
        held = np.asarray(held)
        if held.ndim != 1 or held.dtype.kind not in "iu" or not within(held, -1, TOKEN_MAX):
            raise InvalidTokensError(
                "held must be token ids (0 .. 2**31-1), each sequence ended by -1"
            )
        if not isinstance(more, Sequence):  # an array is not one
            raise InvalidTokensError("more must be a list of token sequences, one per sequence")
        tokens = np.concatenate([held, *(self._ended(seq) for seq in more)]).astype(np.int32)
        if len(tokens) > self.max_tokens:
            tokens = _newest(tokens, self.max_tokens // 2)
        with self._rebuilding:
            fresh = self._index_of(tokens)  # without ``lock``: drafters go on meanwhile
            top = int(tokens.max(initial=-1))
            with self.lock:
                self._take(fresh, top)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the sequences held as a requests file, atomically."""
        with self.lock:
            write_requests_file(path, self.index.tokens.copy(), self.max_token)

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], max_tokens: int = MAX_TOKENS, *, missing_ok: bool = False
    ) -> "RequestMemory":
        """A RequestMemory holding a requests file's sequences (every byte checked)."""
        memory = cls(max_tokens)
        if not (missing_ok and not os.path.exists(path)):
            memory.hold(read_requests(path))
        return memory


def read_requests(path: str | os.PathLike[str]) -> np.ndarray:
    """A requests file's tokens, every byte checked (a copy: the file may be replaced)."""
    mm, header = map_file(path)
    if header.kind != KIND_REQUESTS:
        raise WrongFileKindError(
            f"{path}: a {KIND_NAMES[header.kind]} file, not a requests file: rules='suffix' "
            "keeps earlier requests in a file of its own (give dynamic= a new path)"
        )
    verify_sections(mm, header, path)
    tokens = section_array(mm, header, "tokens", np.int32, (header.n_entries,)).copy()
    if len(tokens) and (
        tokens[-1] != -1 or int(tokens.min()) < -1 or int(tokens.max()) != header.max_token
    ):
        raise CorruptFileError(
            f"{path}: not sequences of token ids each ended by -1, or max_token "
            f"{header.max_token} is not their largest id"
        )
    return tokens


def _newest(held: np.ndarray, keep: int) -> np.ndarray:
    """The newest whole sequences of ``held`` (each ended by -1) that fit in ``keep`` tokens."""
    need = len(held) - keep  # tokens to drop, at least
    if need <= 0:
        return held
    ends = np.flatnonzero(held == -1)
    at = np.searchsorted(ends, need - 1)  # the first end at or past need
    cut = int(ends[at]) + 1 if at < len(ends) else len(held)
    return held[cut:].copy()
