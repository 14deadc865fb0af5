"""Counting 2-gram triples in bounded memory: what every static build shares.

A *triple* (a, b, c, count) says "2-gram (a, b) was followed by c, count
times". :class:`TokenTriples` yields those of a token stream (one per
position, count 1), :class:`CacheTriples` those of a cache's 2-grams (its
entries). Both are read by ranges of first tokens ``a``, which a histogram
of first tokens sizes to a memory budget (:func:`plan_ranges`), and a
range's triples from every source are sorted and added up by
:func:`count_pass`. The single-machine build (``local.py``) and the Dask
build (``distributed.py``) both count through these functions.
"""

from collections.abc import Iterator, Sequence

import numpy as np

from ..errors import InvalidTokensError
from ..files.tokens import CHUNK, TokenFile
from ..kernels import triples as triple_kernels
from ..progress import Progress
from ..validation import check_int

# Resident bytes per triple of a pass: the packed triple, its share of the
# distinct triples' counts, and the grouped output.
BYTES_PER_TRIPLE = 32
# What the interpreter, numpy and the compiled kernels occupy before any data.
BASELINE_BYTES = 256 << 20
MAX_TOKEN_BITS = 21


class TokenTriples:
    """The triples of one token sequence (an int32 array or a TokenFile).

    ``starts`` (sorted positions where documents begin) keeps documents apart:
    no triple spans a start. Without it the sequence is one joined text.
    """

    def __init__(
        self,
        tokens: np.ndarray | TokenFile,
        chunk: int = CHUNK,
        starts: np.ndarray | None = None,
    ) -> None:
        self.tokens = tokens
        self.chunk = chunk
        self.starts = (
            np.zeros(0, dtype=np.int64) if starts is None else np.asarray(starts, np.int64)
        )
        self.n_tokens = len(tokens)
        self.max_token = -1
        self.histogram = np.zeros(0, dtype=np.int64)

    def _chunks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(position of the chunk's first token, chunk); chunks overlap by two tokens."""
        if isinstance(self.tokens, TokenFile):
            for i, chunk in enumerate(self.tokens.chunks(self.chunk, overlap=2)):
                yield max(0, i * self.chunk - 2), chunk
            return
        for start in range(0, len(self.tokens), self.chunk):
            yield max(0, start - 2), self.tokens[max(0, start - 2) : start + self.chunk]

    def scan(self, progress: Progress) -> None:
        # Triples spanning a document start are counted here too: the
        # histogram only sizes the passes, an upper bound is enough.
        for _, chunk in self._chunks():
            if len(chunk):
                self.max_token = check_token_bits(max(self.max_token, int(chunk.max())))
                self.histogram = add_counts(self.histogram, np.bincount(chunk[:-2]))
            progress.update(len(chunk))

    def triples(self, lo: int, hi: int, bits: int) -> tuple[np.ndarray, np.ndarray | None]:
        out = np.empty(int(self.histogram[lo:hi].sum()), dtype=np.uint64)
        pos = 0
        for base, chunk in self._chunks():
            pos = triple_kernels.pack_tokens(chunk, base, lo, hi, bits, out, pos, self.starts)
        return out[:pos], None


class CacheTriples:
    """A cache's weighted 2-gram triples: keys[i] owns tokens/counts[offsets[i]:offsets[i+1]].

    Keys may be of width 2 or 4 and in any order; keys that are not 2-grams
    are ignored. Works on memory maps: only the first-token column and the
    selected spans are read.
    """

    def __init__(
        self,
        keys: np.ndarray,
        offsets: np.ndarray,
        tokens: np.ndarray,
        counts: np.ndarray,
        n_source_tokens: int = 0,
    ) -> None:
        if keys.shape[1] == 4:
            is_bigram = (keys[:, 1] >= 0) & (keys[:, 2] < 0)
            self.index = np.flatnonzero(is_bigram)
        else:
            self.index = np.arange(keys.shape[0])
        self.keys, self.offsets, self.tokens, self.counts = keys, offsets, tokens, counts
        self.n_tokens = n_source_tokens
        first = np.asarray(keys[self.index, 0])
        sizes = np.asarray(offsets[self.index + 1] - offsets[self.index])
        self.first = first
        # Bounded before the histogram, which is as long as the largest first token.
        self.max_token = check_token_bits(
            max(
                int(keys[self.index].max()) if len(self.index) else -1,
                int(tokens.max()) if len(tokens) else -1,
            )
        )
        self.histogram = (
            np.bincount(first, weights=sizes).astype(np.int64)
            if len(first)
            else (np.zeros(0, dtype=np.int64))
        )

    def scan(self, progress: Progress) -> None:
        progress.update(len(self.index))

    def triples(self, lo: int, hi: int, bits: int) -> tuple[np.ndarray, np.ndarray | None]:
        sel = self.index[(self.first >= lo) & (self.first < hi)]
        n = int(self.histogram[lo:hi].sum())
        out = np.empty(n, dtype=np.uint64)
        counts = np.empty(n, dtype=np.int64)
        triple_kernels.pack_spans(
            self.keys, self.offsets, self.tokens, self.counts, sel, bits, out, counts, 0
        )
        return out, counts


def check_token_bits(max_token: int) -> int:
    """max_token, if a static cache can hold it; InvalidTokensError otherwise.

    Checked before anything is sized by a token id (the first-token
    histogram), so a stray huge id costs an error, not gigabytes.
    """
    if max_token >= 2**MAX_TOKEN_BITS:
        raise InvalidTokensError(
            f"static caches pack a 2-gram and its follower into 64 bits: token ids up to "
            f"{2**MAX_TOKEN_BITS - 1} are supported, the input has {max_token} "
            "(is it a token file of this tokenizer, and little-endian int32?)"
        )
    return max_token


def add_counts(acc: np.ndarray, more: np.ndarray) -> np.ndarray:
    if len(more) > len(acc):
        acc, more = more.astype(np.int64), acc
    acc[: len(more)] += more
    return acc


def plan_ranges(histogram: np.ndarray, budget: int) -> list[int]:
    """Bounds b0=0 < b1 < ... = len(histogram): each range's triples <= budget if possible.

    A single first token with more triples than the budget gets a range of its
    own: the budget is a target, not a guarantee.
    """
    cum = np.cumsum(histogram)
    bounds = [0]
    while bounds[-1] < len(histogram):
        before = cum[bounds[-1] - 1] if bounds[-1] else 0
        nxt = int(np.searchsorted(cum, before + budget, side="right"))
        bounds.append(min(max(nxt, bounds[-1] + 1), len(histogram)))
    return bounds


def pass_budget(memory_limit: int | None) -> int:
    """Triples per pass for a memory limit in bytes (None: everything in one pass)."""
    if memory_limit is None:
        return np.iinfo(np.int64).max
    memory_limit = check_int(memory_limit, "memory_limit", 1)
    return max(1, (memory_limit - BASELINE_BYTES) // BYTES_PER_TRIPLE, memory_limit // 64)


def count_pass(
    parts: Sequence[tuple[np.ndarray, np.ndarray | None]],
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct packed triples and their counts from one pass's parts."""
    raw = [p for p, c in parts if c is None]
    weighted = [(p, c) for p, c in parts if c is not None]
    result = []
    if raw:
        packed = raw[0] if len(raw) == 1 else np.concatenate(raw)
        packed.sort()
        m, counts = triple_kernels.reduce_sorted(packed, np.zeros(0, dtype=np.int64), len(packed))
        result.append((packed[:m], counts))
    if weighted:
        result.extend(weighted)
    if len(result) == 1 and not weighted:
        return result[0]
    packed = np.concatenate([p for p, _ in result])
    counts = np.concatenate([c for _, c in result])
    order = np.argsort(packed, kind="stable")
    packed, counts = packed[order], counts[order]
    m, counts = triple_kernels.reduce_sorted(packed, counts, len(packed))
    return packed[:m], counts
