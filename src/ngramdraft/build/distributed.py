"""Static caches built on a Dask cluster: the single-machine build's file, byte for byte.

(A suffix file's build, ``build/suffixes.py``, sorts its shards here too:
:func:`sort_shards_on`; the rest of this module is the 2-gram build.)

The corpus is cut into *shards* in its own order: runs of a text file's
blocks (the blocks the single-machine tokenizer reads, so every piece is
tokenized whole and alike), contiguous row ranges of a ``datasets`` split
(``Dataset.shard(..., contiguous=True)``), or token ranges of token files.

1. **Count** (one task per shard, on the workers): tokenize the shard and
   count its triples (2-gram, follower): sorted distinct packed triples with
   their counts, which stay on the worker (Dask spills them to the worker's
   disk under memory pressure). Only a summary reaches the client: the
   shard's first and last two tokens, its size, largest id and a histogram
   of first tokens (in buckets of 64 ids). From the edges the client counts
   the few triples that span two shards, so that documents are joined
   exactly as the single-machine build joins them.
2. **Plan**: the client sums the histograms and cuts the first-token range
   into partitions whose triples fit one worker's memory budget.
3. **Reduce** (one task per partition): gather the partition's slice of every
   shard (sorted, so a slice is two binary searches; Dask moves it between
   workers), add the counts up and group them into keys, offsets, followers
   and counts. Counts saturate at 2**31 - 1 as in the single-machine build.
4. **Write**: the client receives the partitions in ascending order and
   writes them through :class:`~ngramdraft.files.ngd.NgdWriter`, the
   single-machine build's writer: constmap, header, one atomic file.

Storage: workers read the inputs (every worker must see them at the same
path: a shared filesystem, or the same files on each) and nothing else is
written but the output, by the client. Intermediate counts travel through
Dask's worker-to-worker transfers, not a shared directory: a partition's
slices are a few hundred MB at most, which Dask moves and spills well, and
the reduce needs them in memory anyway.

Faults: tasks are pure functions of their inputs, so Dask recomputes what a
lost worker held and reruns its tasks; the output is the same. An error
inside a task (a file that is not UTF-8, an id too large) is raised as it
is; a task that keeps killing its workers ends in DistributedBuildError. The
output is only ever written whole, at the end.
"""

import collections
import functools
import itertools
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import DistributedBuildError, InvalidParameterError
from ..files.ngd.header import KIND_STATIC, Header
from ..files.ngd.writing import NgdWriter
from ..kernels import triples as triple_kernels
from ..kernels.suffixsort import sort_shard
from ..optional import require
from ..progress import Progress
from .corpus import Corpus
from .counting import (
    BASELINE_BYTES,
    MAX_TOKEN_BITS,
    add_counts,
    check_token_bits,
    count_pass,
    plan_ranges,
)
from .sources import NO_STARTS, Shard, Source
from .suffixes import SortShards, build_suffixes

BITS = MAX_TOKEN_BITS  # shards pack triples before the largest id is known
COARSE = 6  # the summaries' histograms count first tokens in buckets of 2**COARSE ids
SHARD_TOKENS = 1 << 24  # tokens per shard without a memory limit (about 130 MB of triples)
# Peak bytes of a task per unit of its input: counting a shard holds its
# tokens, their packed triples and the distinct ones' counts; a reduce holds
# its slices, their concatenation, the sort order and the sorted copy.
SHARD_BYTES_PER_TOKEN = 48
REDUCE_BYTES_PER_TRIPLE = 96


def budgets(memory_limit: int | None) -> tuple[int, int]:
    """(tokens per shard, triples per partition) for a worker of ``memory_limit`` bytes.

    Half of what the interpreter leaves goes to the running task; the other
    half to the shards' counts the worker keeps for the reduces (Dask spills
    them to disk past its own thresholds).
    """
    if memory_limit is None:
        return SHARD_TOKENS, np.iinfo(np.int64).max
    usable = max(memory_limit - BASELINE_BYTES, memory_limit // 4) // 2
    shard = max(1, min(SHARD_TOKENS, usable // SHARD_BYTES_PER_TOKEN))
    return shard, max(1, usable // REDUCE_BYTES_PER_TRIPLE)


@dataclass
class Summary:
    """What the client learns of a counted shard: its edges, size, largest id, histogram."""

    head: list[int]
    tail: list[int]
    n_tokens: int
    max_token: int
    histogram: np.ndarray
    starts_document: bool
    shard: Shard = field(repr=False)


@dataclass
class Counted:
    """A shard's sorted distinct packed triples and their counts, and its summary."""

    packed: np.ndarray
    counts: np.ndarray
    summary: Summary


# -- on the workers ---------------------------------------------------------------


def count_shard(shard: Shard, source: Source, tokenizer: str | None, separate: bool) -> "Counted":
    """Tokenize and count one shard (a task): its Counted."""
    tokens, starts = source.shard_tokens_of(shard, tokenizer)
    max_token = check_token_bits(int(tokens.max(initial=-1)))
    packed = np.empty(max(len(tokens) - 2, 0), dtype=np.uint64)
    n = triple_kernels.pack_tokens(
        tokens, 0, 0, 1 << BITS, BITS, packed, 0, starts if separate else NO_STARTS
    )
    packed, counts = count_pass([(packed[:n], None)])
    summary = Summary(
        head=tokens[:2].tolist(),
        tail=tokens[-2:].tolist(),
        n_tokens=len(tokens),
        max_token=max_token,
        histogram=_histogram(packed),
        starts_document=bool(len(starts) and starts[0] == 0),
        shard=shard,
    )
    return Counted(packed, counts, summary)


def _histogram(packed: np.ndarray) -> np.ndarray:
    """Packed triples per bucket of 2**COARSE first tokens."""
    return np.bincount((packed >> np.uint64(2 * BITS + COARSE)).astype(np.int64))


def summary_of(counted: "Counted") -> "Summary":
    return counted.summary


def take_range(counted: "Counted", lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """The (packed, counts) of a shard's triples whose first token is in [lo, hi)."""
    packed, counts = _first_tokens_in(counted.packed, counted.counts, lo, hi)
    return packed.copy(), counts.copy()


def _first_tokens_in(
    packed: np.ndarray, counts: np.ndarray, lo: int, hi: int
) -> tuple[np.ndarray, np.ndarray]:
    """Views of sorted packed triples (and counts) whose first token is in [lo, hi)."""
    i, j = np.searchsorted(packed, np.array([lo, hi], dtype=np.uint64) << np.uint64(2 * BITS))
    return packed[i:j], counts[i:j]


def reduce_partition(
    parts: list[tuple[np.ndarray, np.ndarray]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Add up one partition's slices: (keys, offsets, tokens, counts) for NgdWriter.add."""
    packed, counts = count_pass(parts)
    return triple_kernels.group(packed, counts, BITS)


# -- on the client ----------------------------------------------------------------


def edge_triples(summaries: list["Summary"], separate: bool) -> tuple[np.ndarray, np.ndarray]:
    """(packed, counts) of the triples spanning shard edges, from the shards' edge tokens."""
    found: list[tuple[int, int, int]] = []
    tail: list[int] = []
    for s in summaries:
        if not s.shard.joins or (separate and s.starts_document):
            tail = []
        seq = tail + s.head
        for j in range(max(2, len(tail)), min(len(seq), len(tail) + 2)):
            found.append((seq[j - 2], seq[j - 1], seq[j]))
        tail = (tail + s.tail)[-2:] if s.n_tokens < 2 else s.tail
    packed = np.array([(a << 2 * BITS) | (b << BITS) | c for a, b, c in found], dtype=np.uint64)
    packed.sort()
    return count_pass([(packed, None)]) if len(packed) else (packed, np.zeros(0, np.int64))


def plan_shards(client: Any, corpus: Corpus, shard_tokens: int = SHARD_TOKENS) -> list[Shard]:
    """The shards of a corpus, in its order, each about ``shard_tokens`` tokens.

    A source may need to look at its files to cut them; it does so on the
    workers, which are the ones that must see them.
    """

    def on_workers(fn: Any, items: list[Any]) -> list[Any]:
        return list(client.gather(client.map(fn, items, pure=False)))

    return corpus.source.shards(shard_tokens, on_workers)


def build(
    client: Any,
    corpus: Corpus,
    path: str | os.PathLike[str],
    *,
    memory_limit: int | None = None,
    shard_tokens: int | None = None,
    quiet: bool = True,
) -> Header:
    """Build ``corpus`` (a corpus.Corpus) into a static cache at ``path`` on ``client``'s cluster.

    Returns the file's Header. ``memory_limit`` is bytes per worker; without
    it the workers' own limits size the work. ``shard_tokens`` overrides the
    tokens per shard that the budget gives (at most SHARD_TOKENS).
    """
    distributed = require("distributed", "dask", "a distributed build")
    tokens_per_shard, budget = budgets(memory_limit or _worker_memory(client))
    shard_tokens = shard_tokens or tokens_per_shard
    shards = plan_shards(client, corpus, shard_tokens)
    source, tokenizer, separate = corpus.source, corpus.tokenizer, corpus.separate
    run = uuid.uuid4().hex[:8]
    try:
        counted = [
            client.submit(
                count_shard,
                s,
                source,
                tokenizer,
                separate,
                key=f"ngramdraft-count-{run}-{s.index}",
            )
            for s in shards
        ]
        futures = [
            client.submit(summary_of, c, key=f"ngramdraft-summary-{run}-{i}")
            for i, c in enumerate(counted)
        ]
        total = sum(s.size for s in shards)
        with Progress("counting", total, source.unit, quiet=quiet) as progress:
            for future in distributed.as_completed(futures):
                progress.update(future.result().shard.size)
        summaries = client.gather(futures)
        edges = edge_triples(summaries, separate)
        histograms = [s.histogram for s in summaries] + [_histogram(edges[0])]
        histogram = functools.reduce(add_counts, histograms, np.zeros(1, np.int64))
        check_token_bits(max(s.max_token for s in summaries))
        # At least two partitions per worker, so that every worker reduces.
        workers = max(1, len(client.scheduler_info()["workers"]))
        target = min(budget, -(-int(histogram.sum()) // (2 * workers)))
        bounds = [b << COARSE for b in plan_ranges(histogram, max(1, target))]
        reduced = []
        for p, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            parts = [
                client.submit(take_range, c, lo, hi, key=f"ngramdraft-slice-{run}-{p}-{i}")
                for i, c in enumerate(counted)
            ]
            edge = _first_tokens_in(*edges, lo, hi)
            reduced.append(
                client.submit(reduce_partition, [*parts, edge], key=f"ngramdraft-reduce-{run}-{p}")
            )
        del counted, parts  # the slices hold what the reduces need
        with NgdWriter(path, KIND_STATIC, quiet=quiet) as out:
            with Progress("reducing", len(reduced), " partitions", quiet=quiet) as progress:
                for future in reduced:
                    out.add(*future.result())
                    future.release()
                    progress.update()
            return out.finish(sum(s.n_tokens for s in summaries), corpus.meta())
    except distributed.KilledWorker as e:
        raise DistributedBuildError(
            f"a build task killed its worker again and again ({e}): give the workers more "
            "memory, or pass a smaller --memory-limit so that shards and partitions shrink"
        ) from None


def _worker_memory(client: Any) -> int | None:
    """The smallest memory limit of the cluster's workers (None: unlimited)."""
    limits = [w.get("memory_limit") or 0 for w in client.scheduler_info()["workers"].values()]
    limits = [x for x in limits if x > 0]
    return min(limits) if limits else None


def connect(
    cluster: str, *, memory_limit: int | None = None, quiet: bool = True
) -> tuple[Any, Any]:
    """(client, cluster to close or None) for ``local:N`` or a scheduler address."""
    distributed = require("distributed", "dask", "a distributed build")
    if cluster.startswith("local:"):
        n = cluster.removeprefix("local:")
        if not n.isdigit() or int(n) < 1:
            raise InvalidParameterError(
                f"--cluster local:N needs a number of workers >= 1, got {cluster!r}"
            )
        local = distributed.LocalCluster(
            n_workers=int(n),
            threads_per_worker=1,
            processes=True,
            memory_limit=memory_limit or "auto",
            dashboard_address=":0",
        )
        client = distributed.Client(local)
        if not quiet:
            print(f"dashboard: {client.dashboard_link}", file=sys.stderr)
        return client, local
    if "://" not in cluster:
        raise InvalidParameterError(
            "--cluster takes local:N or a scheduler address such as tcp://host:8786, "
            f"got {cluster!r}"
        )
    try:
        return distributed.Client(cluster, timeout=30), None
    except OSError as e:
        raise DistributedBuildError(f"{cluster}: cannot reach the Dask scheduler ({e})") from None


def sort_shards_on(client: Any) -> SortShards:
    """The suffix build's shard sorting (``build/suffixes.py``) as tasks on ``client``'s workers.

    The client sends each shard's tokens and writes the sorted runs in order;
    at most two shards per worker are in flight, so the client holds a few.
    """
    workers = max(1, len(client.scheduler_info()["workers"]))

    def sort(shards: Iterator[tuple[np.ndarray, int]]) -> Iterator[np.ndarray]:
        pending: collections.deque[Any] = collections.deque()
        for tokens, count in shards:
            pending.append(client.submit(sort_shard, tokens, count, pure=False))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()

    return sort


def build_on(
    cluster: str,
    corpus: Corpus,
    path: str | os.PathLike[str],
    *,
    memory_limit: int | None = None,
    suffix: bool = False,
    token_cache: str | None = None,
    quiet: bool = True,
) -> Header:
    """build() on ``cluster``: ``local:N`` (started here, N worker processes) or an address.

    ``suffix`` builds the suffix file instead, its shards sorted on the workers
    (the corpus is tokenized here).
    """
    client, local = connect(cluster, memory_limit=memory_limit, quiet=quiet)
    try:
        if suffix:
            return build_suffixes(
                corpus,
                path,
                memory_limit=memory_limit or _worker_memory(client),
                token_cache=token_cache,
                sort_shards=sort_shards_on(client),
                quiet=quiet,
            )
        return build(client, corpus, path, memory_limit=memory_limit, quiet=quiet)
    finally:
        client.close()
        if local is not None:
            local.close()
