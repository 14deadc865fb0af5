"""Static caches built on a Dask cluster: the single-machine build's file, byte for byte.

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
   writes them through :class:`~ngramdraft.build.StaticWriter`, the
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

import functools
import itertools
import sys
import uuid
from dataclasses import dataclass, field

import numpy as np

from .build import (
    BASELINE_BYTES,
    MAX_TOKEN_BITS,
    StaticWriter,
    _add_counts,
    _count_pass,
    check_token_bits,
)
from .build import plan_ranges as _plan_ranges
from .corpus import BATCH_CHARS, block_texts, encode, text_blocks
from .errors import InvalidParameterError, NgramdraftError
from .kernels import triples as K
from .optional import require
from .progress import Progress
from .tokenfile import TokenFile
from .tokenizer import load_tokenizer

BITS = MAX_TOKEN_BITS  # shards pack triples before the largest id is known
COARSE = 6  # the summaries' histograms count first tokens in buckets of 2**COARSE ids
SHARD_TOKENS = 1 << 24  # tokens per shard without a memory limit (about 130 MB of triples)
BYTES_PER_TOKEN = 4  # text bytes per token, to size text shards
NO_STARTS = np.zeros(0, dtype=np.int64)
# Peak bytes of a task per unit of its input: counting a shard holds its
# tokens, their packed triples and the distinct ones' counts; a reduce holds
# its slices, their concatenation, the sort order and the sorted copy.
SHARD_BYTES_PER_TOKEN = 48
REDUCE_BYTES_PER_TRIPLE = 96


def budgets(memory_limit):
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


class DistributedBuildError(NgramdraftError):
    """The cluster could not finish the build (a task kept killing its workers, ...)."""


@dataclass(frozen=True)
class Shard:
    """One unit of counting: where its tokens come from, and how it meets the one before.

    ``kind`` is "text" (``blocks``: byte ranges of ``path``), "rows"
    (``rows``: (count, index) of a contiguous Dataset.shard) or "tokens"
    (``span``: a token range of ``path``). ``joins`` is False where a new
    token stream starts (the first shard, each token file): no triple spans
    that edge. ``size`` is in the progress unit of its kind.
    """

    index: int
    kind: str
    path: str | None = None
    blocks: tuple = ()
    rows: tuple = ()
    span: tuple = ()
    joins: bool = True
    size: int = 0


@dataclass
class Summary:
    """What the client learns of a counted shard: its edges, size, largest id, histogram."""

    head: list
    tail: list
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


@functools.lru_cache(maxsize=4)
def _tokenizer(name):
    return load_tokenizer(name)


def _read_blocks(path, blocks):
    with open(path, "rb") as f:
        for start, end in blocks:
            f.seek(start)
            yield start, f.read(end - start)


def tokens_of_shard(shard, source=None, tokenizer=None):
    """(tokens, document starts within them) of one shard."""
    if shard.kind == "tokens":
        start, stop = shard.span
        return TokenFile(shard.path).read(start, stop - start), NO_STARTS
    if shard.kind == "text":
        batches = block_texts(shard.path, _read_blocks(shard.path, shard.blocks))
    else:
        batches = source.batches(Progress("", quiet=True), shard=shard.rows)
    ids, starts, n = [np.zeros(0, dtype=np.int32)], [NO_STARTS], 0
    for part, doc_starts in encode(batches, _tokenizer(tokenizer)):
        ids.append(np.asarray(part, dtype=np.int32))
        starts.append(n + doc_starts)
        n += len(part)
    return np.concatenate(ids), np.concatenate(starts)


def count_shard(shard, source=None, tokenizer=None, separate=False):
    """Tokenize and count one shard (a task): its Counted."""
    tokens, starts = tokens_of_shard(shard, source, tokenizer)
    max_token = check_token_bits(int(tokens.max(initial=-1)))
    packed = np.empty(max(len(tokens) - 2, 0), dtype=np.uint64)
    n = K.pack_tokens(tokens, 0, 0, 1 << BITS, BITS, packed, 0, starts if separate else NO_STARTS)
    packed, counts = _count_pass([(packed[:n], None)])
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


def _histogram(packed):
    """Packed triples per bucket of 2**COARSE first tokens."""
    return np.bincount((packed >> np.uint64(2 * BITS + COARSE)).astype(np.int64))


def summary_of(counted):
    return counted.summary


def take_range(counted, lo, hi):
    """The (packed, counts) of a shard's triples whose first token is in [lo, hi)."""
    packed, counts = _first_tokens_in(counted.packed, counted.counts, lo, hi)
    return packed.copy(), counts.copy()


def _first_tokens_in(packed, counts, lo, hi):
    """Views of sorted packed triples (and counts) whose first token is in [lo, hi)."""
    i, j = np.searchsorted(packed, np.array([lo, hi], dtype=np.uint64) << np.uint64(2 * BITS))
    return packed[i:j], counts[i:j]


def reduce_partition(parts):
    """Add up one partition's slices: (keys, offsets, tokens, counts) for StaticWriter.add."""
    packed, counts = _count_pass(parts)
    return K.group(packed, counts, BITS)


def file_blocks(path):
    """The (start, end) byte ranges of a text file's blocks (corpus.text_blocks)."""
    return [(start, start + len(raw)) for start, raw in text_blocks(path)]


# -- on the client ----------------------------------------------------------------


def edge_triples(summaries, separate):
    """(packed, counts) of the triples spanning shard edges, from the shards' edge tokens."""
    found, tail = [], []
    for s in summaries:
        if not s.shard.joins or (separate and s.starts_document):
            tail = []
        seq = tail + s.head
        for j in range(max(2, len(tail)), min(len(seq), len(tail) + 2)):
            found.append((seq[j - 2], seq[j - 1], seq[j]))
        tail = (tail + s.tail)[-2:] if s.n_tokens < 2 else s.tail
    packed = np.array([(a << 2 * BITS) | (b << BITS) | c for a, b, c in found], dtype=np.uint64)
    packed.sort()
    return _count_pass([(packed, None)]) if len(packed) else (packed, np.zeros(0, np.int64))


def plan_shards(client, corpus, shard_tokens=SHARD_TOKENS):
    """The shards of a corpus.Corpus, in its order, each about ``shard_tokens`` tokens."""
    shards = []

    def add(**kwargs):
        shards.append(Shard(index=len(shards), **kwargs))

    for file in corpus.token_files:
        path, n = file.path, len(file)
        for start in range(0, max(n, 1), shard_tokens):
            stop = min(n, start + shard_tokens)
            add(
                kind="tokens",
                path=str(path),
                span=(start, stop),
                joins=start > 0,
                size=stop - start,
            )
    text_files = [str(p) for p in corpus.text_files]
    limit = max(BATCH_CHARS, shard_tokens * BYTES_PER_TOKEN)
    blocks_of = client.gather(client.map(file_blocks, text_files, pure=False))
    for path, blocks in zip(text_files, blocks_of, strict=True):
        # Runs of consecutive blocks, each run at most `limit` bytes (or one block).
        runs = [[]]
        for block in blocks:
            if runs[-1] and block[1] - runs[-1][0][0] > limit:
                runs.append([])
            runs[-1].append(block)
        for run in runs:
            size = run[-1][1] - run[0][0]
            add(kind="text", path=path, blocks=tuple(run), joins=bool(shards), size=size)
    if corpus.dataset is not None:
        ds = corpus.dataset.load()
        count = max(1, min(len(ds), -(-ds.data.nbytes // (shard_tokens * BYTES_PER_TOKEN))))
        for index in range(count):
            add(kind="rows", rows=(count, index), joins=index > 0, size=1)
    return shards


def build(client, corpus, path, *, memory_limit=None, shard_tokens=None, quiet=True):
    """Build ``corpus`` (a corpus.Corpus) into a static cache at ``path`` on ``client``'s cluster.

    Returns the file's Header. ``memory_limit`` is bytes per worker; without
    it the workers' own limits size the work. ``shard_tokens`` overrides the
    tokens per shard that the budget gives (at most SHARD_TOKENS).
    """
    distributed = require("distributed", "dask", "a distributed build")
    tokens_per_shard, budget = budgets(memory_limit or _worker_memory(client))
    shard_tokens = shard_tokens or tokens_per_shard
    shards = plan_shards(client, corpus, shard_tokens)
    dataset, tokenizer, separate = corpus.dataset, corpus.tokenizer, corpus.separate
    run = uuid.uuid4().hex[:8]
    try:
        counted = [
            client.submit(
                count_shard,
                s,
                dataset,
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
        unit = {"tokens": " tok", "text": "B", "rows": " shards"}[shards[0].kind]
        with Progress("counting", sum(s.size for s in shards), unit, quiet=quiet) as progress:
            for future in distributed.as_completed(futures):
                progress.update(future.result().shard.size)
        summaries = client.gather(futures)
        edges = edge_triples(summaries, separate)
        histograms = [s.histogram for s in summaries] + [_histogram(edges[0])]
        histogram = functools.reduce(_add_counts, histograms, np.zeros(1, np.int64))
        check_token_bits(max(s.max_token for s in summaries))
        # At least two partitions per worker, so that every worker reduces.
        workers = max(1, len(client.scheduler_info()["workers"]))
        target = min(budget, -(-int(histogram.sum()) // (2 * workers)))
        bounds = [b << COARSE for b in _plan_ranges(histogram, max(1, target))]
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
        with StaticWriter(path, quiet=quiet) as out:
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


def _worker_memory(client):
    """The smallest memory limit of the cluster's workers (None: unlimited)."""
    limits = [w.get("memory_limit") or 0 for w in client.scheduler_info()["workers"].values()]
    limits = [x for x in limits if x > 0]
    return min(limits) if limits else None


def connect(cluster, *, memory_limit=None, quiet=True):
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


def build_on(cluster, corpus, path, *, memory_limit=None, quiet=True):
    """build() on ``cluster``: ``local:N`` (started here, N worker processes) or an address."""
    client, local = connect(cluster, memory_limit=memory_limit, quiet=quiet)
    try:
        return build(client, corpus, path, memory_limit=memory_limit, quiet=quiet)
    finally:
        client.close()
        if local is not None:
            local.close()
