"""Corpus sources: what a corpus is, its texts or tokens, and its shards for a cluster.

Every source answers one protocol, :class:`Source`:

* ``identity``: what it is, as a JSON-able dict (the token cache's key and
  what a cache file records of its corpus);
* ``streams(tokenizer, token_cache)``: its tokens on this machine, as token
  files with the positions where documents start (text is tokenized into
  the token cache first, or found there);
* ``shards(shard_tokens, on_workers)``: itself cut, in corpus order, into
  shards of about ``shard_tokens`` tokens for the Dask build, and
  ``shard_tokens_of(shard, tokenizer)``: one shard's tokens, on a worker.

A *document* is a dataset row or a text file; a large text file arrives in
several blocks, only the first starting the document. Texts are cut at
blank lines into pieces for the batch encoder, each piece keeping its blank
line, as the shared parity data was tokenized; the ids of all pieces are
concatenated. Adding a source is one class here (and its command-line
arguments in ``cli/build.py``).

The sources: :class:`TokenFiles` (int32/.npy token files, used as they
are), :class:`TextFiles` (UTF-8 text files) and :class:`DatasetSource`
(Hugging Face ``datasets``: a hub dataset, or local text/json/parquet/csv
files read by the same packaged builders, so the offline path is the online
path's code).
"""

import abc
import functools
import os
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse

import numpy as np

from ..errors import CorpusError, InvalidParameterError
from ..files.folders import cache_dir
from ..files.tokens import TokenFile
from ..progress import Progress
from ..tokenizers import Tokenizer, load_tokenizer, needs_tokenizer
from .tokenize import BATCH_CHARS, TextBatch, encode, tokenize

BUILDERS = {
    ".txt": "text",
    ".text": "text",
    ".json": "json",
    ".jsonl": "json",
    ".parquet": "parquet",
    ".csv": "csv",
}
HUB_TIMEOUT = 3.0
BYTES_PER_TOKEN = 4  # text bytes per token, to size text shards
NO_STARTS = np.zeros(0, dtype=np.int64)

Stream = tuple[TokenFile, np.ndarray | None]  # tokens, and where documents start (None: joined)
OnWorkers = Callable[[Callable[[Any], Any], list[Any]], list[Any]]


@dataclass(frozen=True)
class Shard:
    """One unit of counting on a cluster: a part of one source, in corpus order.

    ``part`` is the source's own description (a token range, byte blocks of
    a file, a row range of a split). ``joins`` is False where a new token
    stream starts (the first shard, each token file): no 2-gram spans that
    edge. ``size`` is in the source's progress ``unit``.
    """

    index: int
    part: tuple[Any, ...]
    joins: bool
    size: int


class Source(Protocol):
    """What every corpus source answers (see the module's doc).

    ``is_text``: its items are texts, tokenized with the corpus's tokenizer,
    with documents; otherwise token ids, used as they are. ``unit``: what a
    shard's size counts, for progress lines.
    """

    is_text: bool
    unit: str

    @property
    def identity(self) -> dict[str, Any]: ...

    def streams(
        self, tokenizer: Tokenizer | None, token_cache: str | None, *, quiet: bool = True
    ) -> list[Stream]: ...

    def shards(self, shard_tokens: int, on_workers: OnWorkers) -> list[Shard]: ...

    def shard_tokens_of(
        self, shard: Shard, tokenizer: str | None
    ) -> tuple[np.ndarray, np.ndarray]: ...


class TokenFiles:
    """Token files (.i32/.bin little-endian int32, .npy): each its own token stream."""

    is_text = False
    unit = " tok"

    def __init__(self, paths: Sequence[str | os.PathLike[str]]) -> None:
        self.files = [TokenFile(p) for p in paths]

    @property
    def identity(self) -> dict[str, Any]:
        return {"token_files": [f.path.name for f in self.files]}

    def streams(
        self, tokenizer: Tokenizer | None, token_cache: str | None, *, quiet: bool = True
    ) -> list[Stream]:
        return [(f, None) for f in self.files]

    def shards(self, shard_tokens: int, on_workers: OnWorkers) -> list[Shard]:
        shards: list[Shard] = []
        for f in self.files:
            for start in range(0, max(len(f), 1), shard_tokens):
                stop = min(len(f), start + shard_tokens)
                part = (str(f.path), start, stop)
                shards.append(Shard(len(shards), part, joins=start > 0, size=stop - start))
        return shards

    def shard_tokens_of(self, shard: Shard, tokenizer: str | None) -> tuple[np.ndarray, np.ndarray]:
        path, start, stop = shard.part
        return TokenFile(path).read(start, stop - start), NO_STARTS


class _Texts(abc.ABC):
    """What every text source shares: tokenizing itself, and its shards' tokens."""

    is_text = True

    @property
    @abc.abstractmethod
    def identity(self) -> dict[str, Any]: ...

    @abc.abstractmethod
    def batches(self, progress: Progress) -> Iterator[TextBatch]:
        """The texts, in batches, progress told the total and each batch's size."""

    @abc.abstractmethod
    def shard_batches(self, shard: Shard) -> Iterator[TextBatch]:
        """One shard's texts, in batches."""

    def streams(
        self, tokenizer: Tokenizer | None, token_cache: str | None, *, quiet: bool = True
    ) -> list[Stream]:
        if tokenizer is None:
            raise InvalidParameterError(needs_tokenizer("text"))
        tokens, starts = tokenize(self, tokenizer, cache_dir(token_cache), quiet=quiet)
        return [(tokens, starts)]

    def shard_tokens_of(self, shard: Shard, tokenizer: str | None) -> tuple[np.ndarray, np.ndarray]:
        if tokenizer is None:
            raise InvalidParameterError(needs_tokenizer("text"))
        ids, starts, n = [np.zeros(0, dtype=np.int32)], [NO_STARTS], 0
        for part, doc_starts in encode(self.shard_batches(shard), _tokenizer(tokenizer)):
            ids.append(np.asarray(part, dtype=np.int32))
            starts.append(n + doc_starts)
            n += len(part)
        return np.concatenate(ids), np.concatenate(starts)


@functools.lru_cache(maxsize=4)
def _tokenizer(name: str) -> Tokenizer:
    """A worker's tokenizer, loaded once per name."""
    return load_tokenizer(name)


class TextFiles(_Texts):
    """Plain UTF-8 text files, each one document."""

    unit = "B"

    def __init__(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        self.paths = [Path(p) for p in paths]
        missing = [str(p) for p in self.paths if not p.is_file()]
        if missing:
            raise CorpusError(f"text files not found: {', '.join(missing)}")

    @property
    def identity(self) -> dict[str, Any]:
        return {"text_files": [_file_identity(p) for p in self.paths]}

    def batches(self, progress: Progress) -> Iterator[TextBatch]:
        """Each file in blocks of about BATCH_CHARS, cut after a blank line."""
        progress.total = sum(p.stat().st_size for p in self.paths)
        progress.unit = "B"
        for p in self.paths:
            yield from block_texts(p, text_blocks(p), progress)

    def shards(self, shard_tokens: int, on_workers: OnWorkers) -> list[Shard]:
        """Runs of consecutive blocks of each file, each run at most a shard's bytes."""
        limit = max(BATCH_CHARS, shard_tokens * BYTES_PER_TOKEN)
        names = [str(p) for p in self.paths]
        shards: list[Shard] = []
        for path, blocks in zip(names, on_workers(file_blocks, names), strict=True):
            runs: list[list[tuple[int, int]]] = [[]]
            for block in blocks:
                if runs[-1] and block[1] - runs[-1][0][0] > limit:
                    runs.append([])
                runs[-1].append(block)
            for run in runs:
                size = run[-1][1] - run[0][0]
                shards.append(Shard(len(shards), (path, tuple(run)), bool(shards), size))
        return shards

    def shard_batches(self, shard: Shard) -> Iterator[TextBatch]:
        path, blocks = shard.part
        return block_texts(path, _read_blocks(path, blocks))


def _file_identity(p: Path) -> dict[str, Any]:
    return {"path": str(p.resolve()), "bytes": p.stat().st_size, "mtime_ns": p.stat().st_mtime_ns}


def _read_blocks(path: str, blocks: tuple[tuple[int, int], ...]) -> Iterator[tuple[int, bytes]]:
    with open(path, "rb") as f:
        for start, end in blocks:
            f.seek(start)
            yield start, f.read(end - start)


def file_blocks(path: str) -> list[tuple[int, int]]:
    """The (start, end) byte ranges of a text file's blocks (see text_blocks)."""
    return [(start, start + len(raw)) for start, raw in text_blocks(path)]


def block_texts(
    path: str | os.PathLike[str],
    blocks: Iterable[tuple[int, bytes]],
    progress: Progress | None = None,
) -> Iterator[TextBatch]:
    """Batches of one ``(starts_document, text)`` each, from (offset, bytes) blocks of a file."""
    for start, raw in blocks:
        yield [(start == 0, _decode(raw, path))]
        if progress is not None:
            progress.update(len(raw))


def text_blocks(path: str | os.PathLike[str]) -> Iterator[tuple[int, bytes]]:
    """(byte offset, bytes) of a text file's blocks, in order, covering it whole.

    A block is what reads of BATCH_CHARS bytes hold up to their last blank
    line (the rest opens the next block), so that no piece (text between
    blank lines) is cut. An empty file is one empty block. Tokenizing per
    block gives the same ids wherever the blocks are tokenized, which the
    distributed build relies on.
    """
    with open(path, "rb") as f:
        start, carry = 0, b""
        while block := f.read(BATCH_CHARS):
            block = carry + block
            cut = block.rfind(b"\n\n") + 2  # cut after the last blank line
            if cut == 1:
                carry = block  # no blank line yet: keep reading
                continue
            carry = block[cut:]
            yield start, block[:cut]
            start += cut
        if carry or start == 0:
            yield start, carry


def _decode(raw: bytes, path: object) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not UTF-8 text ({e})") from e


class DatasetSource(_Texts):
    """Texts of a ``datasets`` split, one document per row: a hub dataset or local files."""

    unit = " shards"

    def __init__(
        self,
        dataset: str | None = None,
        config: str | None = None,
        split: str = "train",
        data_files: Sequence[str | os.PathLike[str]] | None = None,
        text_column: str = "text",
    ) -> None:
        if (dataset is None) == (data_files is None):
            raise InvalidParameterError("give either a dataset name or data files")
        self.dataset, self.config, self.split = dataset, config, split
        self.data_files = [str(Path(f)) for f in data_files] if data_files else None
        self.text_column = text_column
        self.builder = ""
        if self.data_files:
            missing = [f for f in self.data_files if not Path(f).is_file()]
            if missing:
                raise CorpusError(f"data files not found: {', '.join(missing)}")
            kinds = {BUILDERS.get(Path(f).suffix.lower()) for f in self.data_files}
            if None in kinds or len(kinds) != 1:
                raise CorpusError(
                    f"data files must all be one of {sorted(BUILDERS)}, got {self.data_files}"
                )
            self.builder = str(kinds.pop())

    @property
    def identity(self) -> dict[str, Any]:
        if self.data_files:
            files = [_file_identity(Path(f)) for f in self.data_files]
            return {"builder": self.builder, "files": files, "column": self.text_column}
        return {
            "dataset": self.dataset,
            "config": self.config,
            "split": self.split,
            "column": self.text_column,
        }

    def load(self) -> Any:
        """The split, as a ``datasets.Dataset``."""
        import datasets

        kwargs: dict[str, Any] = {"split": self.split}
        if self.data_files:
            # The text builder would split at every line; a file is one document.
            extra = {"sample_by": "document"} if self.builder == "text" else {}
            ds = datasets.load_dataset(self.builder, data_files=self.data_files, **kwargs, **extra)
        else:
            ds = _load_hub(datasets, self.dataset, self.config, kwargs)
        if self.text_column not in ds.column_names:
            raise CorpusError(
                f"no column {self.text_column!r} (columns: {', '.join(ds.column_names)}); "
                "choose one with --text-column"
            )
        return ds

    def batches(self, progress: Progress) -> Iterator[TextBatch]:
        return self._rows(progress, None)

    def shards(self, shard_tokens: int, on_workers: OnWorkers) -> list[Shard]:
        """Contiguous row ranges (``Dataset.shard(..., contiguous=True)``), a shard's bytes each."""
        ds = self.load()
        count = max(1, min(len(ds), -(-ds.data.nbytes // (shard_tokens * BYTES_PER_TOKEN))))
        return [Shard(i, (count, i), joins=i > 0, size=1) for i in range(count)]

    def shard_batches(self, shard: Shard) -> Iterator[TextBatch]:
        return self._rows(Progress("", quiet=True), shard.part)

    def _rows(self, progress: Progress, shard: tuple[int, int] | None) -> Iterator[TextBatch]:
        """Rows as documents, 1,024 a batch; ``shard=(count, index)``: one contiguous shard."""
        ds = self.load()
        if shard is not None:
            ds = ds.shard(num_shards=shard[0], index=shard[1], contiguous=True)
        progress.total = len(ds)
        progress.unit = " docs"
        for start in range(0, len(ds), 1024):
            texts = ds[start : start + 1024][self.text_column]
            progress.update(len(texts))
            yield [(True, t or "") for t in texts]


def _load_hub(datasets: Any, name: str | None, config: str | None, kwargs: dict[str, Any]) -> Any:
    """load_dataset from the hub, failing within seconds when the hub is unreachable.

    Offline, a dataset already in the local Hugging Face cache still loads:
    the libraries' offline switches are set for this one call, then restored.
    """
    if _hub_reachable():
        return datasets.load_dataset(name, config, **kwargs)
    import huggingface_hub.constants as hub

    saved = datasets.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE = True
    try:
        return datasets.load_dataset(name, config, **kwargs)
    except Exception as e:  # datasets raises several kinds here
        raise CorpusError(_offline_message(name, config)) from e
    finally:
        datasets.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE = saved


def _hub_reachable() -> bool:
    """Whether a TCP connection to the hub endpoint opens within HUB_TIMEOUT seconds."""
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        return False
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((str(endpoint.hostname), port), timeout=HUB_TIMEOUT):
            return True
    except OSError:
        return False


def _offline_message(name: str | None, config: str | None) -> str:
    cfg = f" {config}" if config else ""
    return (
        f"the Hugging Face hub is unreachable and {name}{cfg} is not in the local datasets cache. "
        f'On a machine with network, run `python -c "import datasets; '
        f"datasets.load_dataset('{name}'{', ' + repr(config) if config else ''})\"` "
        "and copy ~/.cache/huggingface, or export the split to files and pass them with "
        "--data-files FILE... (text, jsonl, parquet or csv; --text-column names the column)"
    )
