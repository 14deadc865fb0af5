"""Building static cache files from token streams and other caches, in bounded memory.

Every source yields *triples* (a, b, c, count): "2-gram (a, b) was followed by
c, count times". A token stream yields one triple per position (count 1); a
cache yields its entries. The build runs in passes, one per range of first
tokens ``a``; each range is chosen from a histogram of first tokens so that its
triples fit the memory budget. A pass gathers its triples from every source
(reading token files in chunks), sorts and counts them, and appends the
resulting keys, spans and followers to spool files. Ranges are visited in
ascending order, so the spools are already in file order: no k-way merge and
no second sort are needed, and the output is the same byte for byte whatever
the number of passes. Finally the constmap is built over the keys and the
file is written atomically.

Memory: one pass holds its triples (8 bytes each, sorted in place) plus their
counts; the constmap needs about 60 bytes per distinct 2-gram at the end.
"""

import contextlib
import itertools
import json
from pathlib import Path

import numpy as np

from ._version import __version__
from .atomic import spool_directory
from .errors import InvalidParameterError, InvalidTokensError
from .fileformat import KIND_STATIC, MAX_KEYS, Header, write_file
from .kernels import triples as K
from .kernels.constmap import build as build_fuse
from .kernels.constmap import fuse_shape, key_hashes
from .kernels.draft import constmap_values
from .progress import Progress
from .tokenfile import CHUNK, TokenFile

# Resident bytes per triple of a pass: the packed triple, its share of the
# distinct triples' counts, and the grouped output.
BYTES_PER_TRIPLE = 32
# What the interpreter, numpy and the compiled kernels occupy before any data.
BASELINE_BYTES = 256 << 20
MAX_TOKEN_BITS = 21
_FUSE_TRIES = 64


class TokenSource:
    """Raw triples of one token sequence (an int32 array or a TokenFile).

    ``starts`` (sorted positions where documents begin) keeps documents apart:
    no triple spans a start. Without it the sequence is one joined text.
    """

    def __init__(self, tokens, chunk=CHUNK, starts=None):
        self.tokens = tokens
        self.chunk = chunk
        self.starts = (
            np.zeros(0, dtype=np.int64) if starts is None else np.asarray(starts, np.int64)
        )
        self.n_tokens = len(tokens)
        self.max_token = -1
        self.histogram = np.zeros(0, dtype=np.int64)

    def _chunks(self):
        """(position of the chunk's first token, chunk); chunks overlap by two tokens."""
        if isinstance(self.tokens, TokenFile):
            for i, chunk in enumerate(self.tokens.chunks(self.chunk, overlap=2)):
                yield max(0, i * self.chunk - 2), chunk
            return
        for start in range(0, len(self.tokens), self.chunk):
            yield max(0, start - 2), self.tokens[max(0, start - 2) : start + self.chunk]

    def scan(self, progress):
        # Triples spanning a document start are counted here too: the
        # histogram only sizes the passes, an upper bound is enough.
        for _, chunk in self._chunks():
            if len(chunk):
                self.max_token = check_token_bits(max(self.max_token, int(chunk.max())))
                self.histogram = _add_counts(self.histogram, np.bincount(chunk[:-2]))
            progress.update(len(chunk))

    def triples(self, lo, hi, bits):
        out = np.empty(int(self.histogram[lo:hi].sum()), dtype=np.uint64)
        pos = 0
        for base, chunk in self._chunks():
            pos = K.pack_tokens(chunk, base, lo, hi, bits, out, pos, self.starts)
        return out[:pos], None


class SpanSource:
    """Weighted triples of a cache's 2-grams: keys[i] owns tokens/counts[offsets[i]:offsets[i+1]].

    Keys may be of width 2 or 4 and in any order; keys that are not 2-grams
    are ignored. Works on memory maps: only the first-token column and the
    selected spans are read.
    """

    def __init__(self, keys, offsets, tokens, counts, n_source_tokens=0):
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

    def scan(self, progress):
        progress.update(len(self.index))

    def triples(self, lo, hi, bits):
        sel = self.index[(self.first >= lo) & (self.first < hi)]
        n = int(self.histogram[lo:hi].sum())
        out = np.empty(n, dtype=np.uint64)
        counts = np.empty(n, dtype=np.int64)
        K.pack_spans(self.keys, self.offsets, self.tokens, self.counts, sel, bits, out, counts, 0)
        return out, counts


def check_token_bits(max_token):
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


def _add_counts(acc, more):
    if len(more) > len(acc):
        acc, more = more.astype(np.int64), acc
    acc[: len(more)] += more
    return acc


def plan_ranges(histogram, budget):
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


def pass_budget(memory_limit):
    """Triples per pass for a memory limit in bytes (None: everything in one pass)."""
    if memory_limit is None:
        return np.iinfo(np.int64).max
    if memory_limit <= 0:
        raise InvalidParameterError(f"memory limit must be positive, got {memory_limit}")
    return max(1, (memory_limit - BASELINE_BYTES) // BYTES_PER_TRIPLE, memory_limit // 64)


def _count_pass(parts):
    """Sorted distinct packed triples and their counts from one pass's parts."""
    raw = [p for p, c in parts if c is None]
    weighted = [(p, c) for p, c in parts if c is not None]
    result = []
    if raw:
        packed = raw[0] if len(raw) == 1 else np.concatenate(raw)
        packed.sort()
        m, counts = K.reduce_sorted(packed, np.zeros(0, dtype=np.int64), len(packed))
        result.append((packed[:m], counts))
    if weighted:
        result.extend(weighted)
    if len(result) == 1 and not weighted:
        return result[0]
    packed = np.concatenate([p for p, _ in result])
    counts = np.concatenate([c for _, c in result])
    order = np.argsort(packed, kind="stable")
    packed, counts = packed[order], counts[order]
    m, counts = K.reduce_sorted(packed, counts, len(packed))
    return packed[:m], counts


def build_static(sources, path, *, memory_limit=None, meta=None, quiet=True):
    """Count the 2-gram triples of ``sources`` and write a static cache file at ``path``.

    Returns the file's Header.
    """
    total_tokens = sum(s.n_tokens for s in sources if isinstance(s, TokenSource))
    with Progress("scanning", total_tokens or None, " tok", quiet=quiet) as p:
        for s in sources:
            s.scan(p)
    max_token = max((s.max_token for s in sources), default=-1)
    bits = max(1, max_token.bit_length())
    histogram = np.zeros(0, dtype=np.int64)
    for s in sources:
        histogram = _add_counts(histogram, s.histogram)
    bounds = plan_ranges(histogram, pass_budget(memory_limit))
    with StaticWriter(path, quiet=quiet) as out:
        with Progress("counting", int(histogram.sum()), " triples", quiet=quiet) as progress:
            for lo, hi in itertools.pairwise(bounds):
                packed, counts = _count_pass([s.triples(lo, hi, bits) for s in sources])
                out.add(*K.group(packed, counts, bits))
                progress.update(int(histogram[lo:hi].sum()))
        return out.finish(sum(s.n_tokens for s in sources), meta)


_SPOOLED = ("keys", "offsets", "stats", "tokens", "counts")


class StaticWriter:
    """Writes a static cache from its triples, given in ascending ranges of first tokens.

    ``add(keys, offsets, tokens, counts)`` takes one range's 2-grams as
    ``kernels.triples.group`` makes them (offsets from 0) and appends the
    range's sections to spool files beside the output; ``finish()`` builds
    the constmap over every key and writes the file atomically. The
    single-machine build and the distributed one (``ngramdraft.distributed``)
    both write through it: same triples, same bytes.
    """

    def __init__(self, path, *, quiet=True):
        self.path = Path(path)
        self.quiet = quiet
        self.n_keys = self.n_entries = self.max_count = 0
        self.top = -1

    def __enter__(self):
        self._stack = contextlib.ExitStack()
        self._tmp = Path(self._stack.enter_context(spool_directory(self.path)))
        self._spool = {name: self._open(name) for name in _SPOOLED}
        self._values = self._open("values")
        return self

    def __exit__(self, *exc):
        return self._stack.__exit__(*exc)

    def _open(self, name):
        return self._stack.enter_context(open(self._tmp / name, "w+b"))

    def add(self, keys, offsets, tok, cnt):
        stats = K.span_stats(offsets, tok, cnt)
        parts = {
            "keys": keys,
            "offsets": offsets[:-1] + self.n_entries,
            "stats": stats,
            "tokens": tok,
            "counts": cnt,
        }
        for name in _SPOOLED:
            parts[name].tofile(self._spool[name])
        constmap_values(stats, self.n_keys).tofile(self._values)
        self.n_keys += len(keys)
        self.n_entries += len(tok)
        if len(keys):
            self.top = max(self.top, int(keys.max()), int(tok.max()))
            self.max_count = max(self.max_count, int(stats[:, 1].max()))

    def finish(self, n_source_tokens, meta):
        """Build the constmap, write the file; returns its Header."""
        np.array([self.n_entries], dtype=np.int64).tofile(self._spool["offsets"])
        for f in (*self._spool.values(), self._values):
            f.flush()
        if self.n_keys >= MAX_KEYS:
            raise InvalidParameterError(
                f"{self.n_keys} distinct 2-grams: a static cache holds fewer than {MAX_KEYS}"
            )
        keys = np.fromfile(self._tmp / "keys", dtype=np.int32).reshape(-1, 2)
        values = np.fromfile(self._tmp / "values", dtype=np.uint32)
        with Progress("constmap", quiet=self.quiet):
            seed, seglen, segs, fuse = make_constmap(keys, values)
        del keys, values  # the constmap build was the peak; writing needs none of it
        header = Header(
            kind=KIND_STATIC,
            n_keys=self.n_keys,
            n_entries=self.n_entries,
            fuse_seed=seed,
            fuse_segment_length=seglen,
            fuse_segment_count=segs,
            max_token=self.top,
            n_source_tokens=n_source_tokens,
            max_count=self.max_count,
        )
        meta = {"created_by": f"ngramdraft {__version__}", **(meta or {})}
        for f in self._spool.values():
            f.seek(0)
        with Progress("writing", quiet=self.quiet):
            sections = {"meta": json.dumps(meta, sort_keys=True).encode(), "fuse": fuse}
            write_file(self.path, header, {**sections, **self._spool})
        return header


def make_constmap(keys, values):
    """(seed, segment_length, segment_count, fuse) mapping keys[i] to values[i].

    Peeling fails with small probability (or when two keys' 64-bit hashes
    collide); each retry takes another seed, and repeated failures widen the
    array, which tiny key sets need.
    """
    if len(keys) == 0:
        return 0, 0, 0, np.zeros(0, dtype=np.uint32)
    for attempt in range(_FUSE_TRIES):
        seglen, segs = fuse_shape(len(keys), slack=0.1 * (attempt // 8))
        seed = np.uint64(attempt + 1)
        fuse = build_fuse(key_hashes(keys, seed), values, seglen, segs)
        if len(fuse):
            return int(seed), seglen, segs, fuse
    raise RuntimeError(f"constmap construction failed {_FUSE_TRIES} times for {len(keys)} keys")
