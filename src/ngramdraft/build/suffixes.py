"""The suffix build: a corpus's tokens and their suffix array, in bounded memory, one file.

1. The corpus's token streams are joined into a spool beside the output, a
   separator (-1) between streams (and between documents with
   ``separate``), so that no match crosses one.
2. The joined tokens are cut into shards that fit the memory budget; each
   shard's suffixes are sorted with ``DEPTH`` tokens of the next shard in
   view (``kernels/suffixsort.py``), here or on Dask workers.
3. The shards' sorted runs are merged, streaming, into the suffix array.
4. One pass over the suffix array finds the frequent 2- and 3-grams' ranges
   for the search's index (``kernels/gramindex.py``).

The order stops at a fixed depth and breaks ties by position, so the file
is the same byte for byte whatever the shards and wherever they were sorted.
Memory: a shard's sort holds about ``BYTES_PER_TOKEN`` bytes per token; the
spools and the merge are read through the page cache; the index holds 16
bytes per n-gram it finds (at most half a byte per token).
"""

import itertools
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..caches.suffix_corpus import SuffixCorpus
from ..errors import InvalidParameterError
from ..files.atomic import disk_full_named, spool_directory, write_array
from ..files.ngd.header import MAX_BUCKET_IDS, MAX_CORPUS, Header
from ..files.ngd.writing import buckets_of, write_suffix_file
from ..kernels import gramindex
from ..kernels.suffixsort import DEPTH, merge_block, sort_shard
from ..progress import Progress
from ..validation import as_tokens, check_int
from .corpus import Corpus
from .counting import BASELINE_BYTES, add_counts

if TYPE_CHECKING:
    from numpy.typing import ArrayLike

# A shard's peak per token: libdivsufsort's ids as bytes and suffix array of four
# entries per token, its filtered copy, ours (46 measured whole, benchmarks/corpus_index.py).
BYTES_PER_TOKEN = 48
# Without a memory limit: the most tokens whose byte suffix array stays int32.
MAX_SHARD = 1 << 28
MERGE_BLOCK = 1 << 20
SEPARATOR = np.array([-1], dtype=np.int32)

# Sorts shards: given (tokens with DEPTH of the next shard, count) for each, yields each sorted
# run, in order. Locally a generator; on Dask, tasks on the workers.
SortShards = Callable[[Iterator[tuple[np.ndarray, int]]], Iterator[np.ndarray]]


def shard_budget(memory_limit: int | None) -> int:
    """Tokens per shard for a memory limit in bytes (None: the whole corpus at once)."""
    if memory_limit is None:
        return MAX_SHARD
    memory_limit = check_int(memory_limit, "memory_limit", 1)
    return max(1 << 16, (memory_limit - BASELINE_BYTES) // BYTES_PER_TOKEN)


def sort_locally(shards: Iterator[tuple[np.ndarray, int]]) -> Iterator[np.ndarray]:
    for tokens, count in shards:
        yield sort_shard(tokens, count)


def build_suffixes(
    corpus: Corpus,
    path: str | os.PathLike[str],
    *,
    memory_limit: int | None = None,
    shard_tokens: int | None = None,
    token_cache: str | None = None,
    sort_shards: SortShards = sort_locally,
    quiet: bool = True,
) -> Header:
    """Write the suffix file of ``corpus`` at ``path``; returns its Header."""
    tokenizer = corpus.loaded_tokenizer if corpus.source.is_text else None
    streams = corpus.source.streams(tokenizer, token_cache, quiet=quiet)
    shard = shard_tokens or shard_budget(memory_limit)
    with spool_directory(path) as spools:
        joined = Path(spools) / "tokens"
        n, n_source, max_token, counts = _join(streams, corpus.separate, joined, path)
        text = np.memmap(joined, dtype=np.int32, mode="r") if n else np.zeros(0, np.int32)
        bounds = [*range(0, n, shard), n] if n else [0]
        runs = Path(spools) / "runs"
        with open(runs, "wb") as out, Progress("sorting", n, " tok", quiet=quiet) as progress:
            spans = list(itertools.pairwise(bounds))
            pieces = ((np.array(text[a : b + DEPTH]), b - a) for a, b in spans)
            for (a, _), run in zip(spans, sort_shards(pieces), strict=True):
                with disk_full_named(path):
                    write_array(out, (run + a).astype(np.int32))
                progress.update(len(run))
        order = runs
        if len(bounds) > 2:
            order = Path(spools) / "suffixes"
            _merge(text, runs, bounds, order, path, quiet)
        sa = np.memmap(order, dtype=np.int32, mode="r") if n else np.zeros(0, np.int32)
        grams = gramindex.build(text, sa, max_token)
        del sa
        with open(joined, "rb") as t, open(order, "rb") as s:
            return write_suffix_file(
                path,
                [t],
                [s],
                buckets_of(counts, n - n_source, max_token),
                grams,
                n_tokens=n,
                max_token=max_token,
                n_source_tokens=n_source,
                meta=corpus.meta(),
            )


def build_suffix_corpus(
    tokens: "ArrayLike | str | os.PathLike[str]",
    path: str | os.PathLike[str],
    *,
    memory_limit: int | None = None,
    tokenizer: str | None = None,
    quiet: bool = True,
) -> SuffixCorpus:
    """Build the suffix file of a token array or token file at ``path``, and open it.

    ``tokenizer`` (a name) is recorded, to be checked when drafting. For
    text files, datasets and Dask, use ``ngramdraft build-static --suffix``.
    """
    with tempfile.TemporaryDirectory(dir=Path(path).parent) as tmp:
        if not isinstance(tokens, str | os.PathLike):
            tokens_path = Path(tmp) / "tokens.i32"
            as_tokens(tokens).astype("<i4").tofile(tokens_path)
            tokens = tokens_path
        build_suffixes(Corpus.of([tokens], tokenizer), path, memory_limit=memory_limit, quiet=quiet)
    return SuffixCorpus.open(path)


def _join(
    streams: list[Any], separate: bool, spool: Path, path: str | os.PathLike[str]
) -> tuple[int, int, int, np.ndarray | None]:
    """Join the streams into ``spool``; (tokens written, corpus tokens, largest id, each
    id's count, or None past MAX_BUCKET_IDS)."""
    n = n_source = 0
    max_token = -1
    counts: np.ndarray | None = np.zeros(0, dtype=np.int64)
    with open(spool, "wb") as out, disk_full_named(path):
        for tokens, starts in streams:
            cuts = starts if separate and starts is not None else np.zeros(0, np.int64)
            base = 0
            for chunk in tokens.chunks():
                for i, piece in enumerate(_documents(chunk, base, cuts)):
                    if n and (i or base == 0):  # a document (or a stream) starts
                        write_array(out, SEPARATOR)
                        n += 1
                    write_array(out, piece)
                    n += len(piece)
                    n_source += len(piece)
                    max_token = max(max_token, int(piece.max(initial=-1)))
                    if counts is not None and max_token < MAX_BUCKET_IDS:
                        counts = add_counts(counts, np.bincount(piece))
                    else:
                        counts = None
                base += len(chunk)
            if n > MAX_CORPUS:
                raise InvalidParameterError(
                    f"the corpus has more than {MAX_CORPUS} tokens, the most a suffix file "
                    "holds: build one file per part of it"
                )
    return n, n_source, max_token, counts


def _documents(chunk: np.ndarray, base: int, starts: np.ndarray) -> list[np.ndarray]:
    """The chunk (tokens from ``base`` on) cut where documents start: the first piece
    continues the document before it."""
    inside = starts[(starts >= max(base, 1)) & (starts < base + len(chunk))] - base
    return np.split(chunk, inside)


def _merge(
    text: np.ndarray,
    runs: Path,
    bounds: list[int],
    out_path: Path,
    path: str | os.PathLike[str],
    quiet: bool,
) -> None:
    """Merge the sorted runs (one per shard, in ``runs``) into ``out_path``."""
    sa = np.memmap(runs, dtype=np.int32, mode="r")
    cursor = np.array(bounds[:-1], dtype=np.int64)
    ends = np.array(bounds[1:], dtype=np.int64)
    heap = np.zeros(len(cursor), dtype=np.int64)
    state = np.zeros(2, dtype=np.int64)
    block = np.empty(MERGE_BLOCK, dtype=np.int32)
    with open(out_path, "wb") as out, Progress("merging", len(sa), " tok", quiet=quiet) as p:
        while filled := merge_block(text, sa, cursor, ends, heap, state, block):
            with disk_full_named(path):
                write_array(out, block[:filled])
            p.update(filled)
