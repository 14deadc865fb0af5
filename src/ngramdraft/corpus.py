"""Corpus sources and their tokenization into token files.

A source yields batches of ``(starts_document, text)`` pairs, a *document*
being a dataset row or a text file (a large file arrives in several blocks,
only the first starting the document), and has an ``identity`` (what it is,
for caching). Three kinds:

* :class:`DatasetSource`: Hugging Face ``datasets.load_dataset``, either a hub
  dataset (``Salesforce/wikitext``, config ``wikitext-103-raw-v1``) or local
  files through the same packaged builders (``text``, ``json``, ``parquet``,
  ``csv``), so the offline path is the online path's code;
* :class:`TextFileSource`: plain UTF-8 text files, one document each;
* pre-tokenized int32/.npy files, which need no source at all.

Tokenizing streams a source through a tokenizer into a token file (and, for
separate documents, the positions where documents start), stored in a cache
directory under a key made of the source's and the tokenizer's identities:
a second build (another memory limit, documents joined or apart) skips
tokenizing. Documents are split at blank lines into pieces for the batch
encoder, each piece keeping its blank line, as the shared parity data was
tokenized; the ids of all pieces are concatenated.

A :class:`Corpus` is one build's input, checked (token files, text files or
a dataset split; the tokenizer; documents joined or apart): what it records
in the file's meta, and its sources for a build on this machine. The
command line's arguments for it live in ``cli``, the distributed build in
``distributed``.
"""

import functools
import json
import os
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import xxhash

from .atomic import atomic_output
from .build import TokenSource
from .errors import CorpusError, InvalidParameterError
from .progress import Progress
from .tokenfile import RAW_SUFFIXES, TokenFile
from .tokenizer import identity, load_tokenizer

BUILDERS = {
    ".txt": "text",
    ".text": "text",
    ".json": "json",
    ".jsonl": "json",
    ".parquet": "parquet",
    ".csv": "csv",
}
HUB_TIMEOUT = 3.0
BATCH_CHARS = 8 << 20


class DatasetSource:
    """Texts of a ``datasets`` split: hub dataset or local ``data_files``."""

    def __init__(
        self, dataset=None, config=None, split="train", data_files=None, text_column="text"
    ):
        if (dataset is None) == (data_files is None):
            raise InvalidParameterError("give either a dataset name or data files")
        self.dataset, self.config, self.split = dataset, config, split
        self.data_files = [str(Path(f)) for f in data_files] if data_files else None
        self.text_column = text_column
        if self.data_files:
            missing = [f for f in self.data_files if not Path(f).is_file()]
            if missing:
                raise CorpusError(f"data files not found: {', '.join(missing)}")
            kinds = {BUILDERS.get(Path(f).suffix.lower()) for f in self.data_files}
            if None in kinds or len(kinds) != 1:
                raise CorpusError(
                    f"data files must all be one of {sorted(BUILDERS)}, got {self.data_files}"
                )
            self.builder = kinds.pop()

    @property
    def identity(self):
        if self.data_files:
            files = [
                {
                    "path": str(Path(f).resolve()),
                    "bytes": Path(f).stat().st_size,
                    "mtime_ns": Path(f).stat().st_mtime_ns,
                }
                for f in self.data_files
            ]
            return {"builder": self.builder, "files": files, "column": self.text_column}
        return {
            "dataset": self.dataset,
            "config": self.config,
            "split": self.split,
            "column": self.text_column,
        }

    def load(self):
        import datasets

        kwargs = {"split": self.split}
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

    def batches(self, progress, shard=None):
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


def _load_hub(datasets, name, config, kwargs):
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


def _hub_reachable():
    """Whether a TCP connection to the hub endpoint opens within HUB_TIMEOUT seconds."""
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1":
        return False
    endpoint = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        with socket.create_connection((endpoint.hostname, port), timeout=HUB_TIMEOUT):
            return True
    except OSError:
        return False


def _offline_message(name, config):
    cfg = f" {config}" if config else ""
    return (
        f"the Hugging Face hub is unreachable and {name}{cfg} is not in the local datasets cache. "
        f'On a machine with network, run `python -c "import datasets; '
        f"datasets.load_dataset('{name}'{', ' + repr(config) if config else ''})\"` "
        "and copy ~/.cache/huggingface, or export the split to files and pass them with "
        "--data-files FILE... (text, jsonl, parquet or csv; --text-column names the column)"
    )


class TextFileSource:
    """Plain UTF-8 text files, each one document."""

    def __init__(self, paths):
        self.paths = [Path(p) for p in paths]
        missing = [str(p) for p in self.paths if not p.is_file()]
        if missing:
            raise CorpusError(f"text files not found: {', '.join(missing)}")

    @property
    def identity(self):
        return {
            "text_files": [
                {
                    "path": str(p.resolve()),
                    "bytes": p.stat().st_size,
                    "mtime_ns": p.stat().st_mtime_ns,
                }
                for p in self.paths
            ]
        }

    def batches(self, progress):
        """Each file in blocks of about BATCH_CHARS, cut after a blank line."""
        progress.total = sum(p.stat().st_size for p in self.paths)
        progress.unit = "B"
        for p in self.paths:
            yield from block_texts(p, text_blocks(p), progress)


def block_texts(path, blocks, progress=None):
    """Batches of one ``(starts_document, text)`` each, from (offset, bytes) blocks of a file."""
    for start, raw in blocks:
        yield [(start == 0, _decode(raw, path))]
        if progress is not None:
            progress.update(len(raw))


def text_blocks(path):
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


def _decode(raw, path):
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(f"{path}: not UTF-8 text ({e})") from e


def pieces(text):
    """A document cut at blank lines, each piece keeping its blank line."""
    parts = text.split("\n\n")
    return [part + "\n\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def cache_dir(explicit=None):
    return Path(
        explicit or os.environ.get("NGRAMDRAFT_CACHE") or Path.home() / ".cache" / "ngramdraft"
    )


def tokenize(source, tokenizer, directory, *, quiet=True):
    """(TokenFile, document starts) for a source, tokenizing only if not cached."""
    ident = {"source": source.identity, "tokenizer": identity(tokenizer)}
    key = xxhash.xxh3_64_hexdigest(json.dumps(ident, sort_keys=True).encode())
    directory.mkdir(parents=True, exist_ok=True)
    tokens_path = directory / f"tokens-{key}.i32"
    starts_path = directory / f"tokens-{key}.starts.npy"
    if tokens_path.exists() and starts_path.exists():
        if not quiet:
            print(f"reusing tokens {tokens_path}", file=sys.stderr)
        return TokenFile(tokens_path), np.load(starts_path)
    starts = []
    n = 0
    t0 = time.perf_counter()
    with atomic_output(tokens_path) as out, Progress("tokenizing", quiet=quiet) as progress:
        for ids, doc_starts in encode(source.batches(progress), tokenizer):
            ids.astype("<i4").tofile(out)
            starts.extend((n + doc_starts).tolist())
            n += len(ids)
    np.save(starts_path, np.asarray(starts, dtype=np.int64))
    if not quiet:
        print(
            f"tokenized {n} tokens in {time.perf_counter() - t0:.2f} s -> {tokens_path}",
            file=sys.stderr,
        )
    return TokenFile(tokens_path), np.asarray(starts, dtype=np.int64)


def encode(batches, tokenizer):
    """(ids, document starts within ids) for each batch of ``(starts_document, text)`` pairs.

    Texts are cut into pieces at blank lines and encoded in batches of about
    BATCH_CHARS characters; the ids of consecutive pieces are concatenated.
    """
    for texts in batches:
        for doc_batch in _piece_batches(texts):
            docs, flat = zip(*doc_batch, strict=True)
            ids, offsets = tokenizer.encode_batch(list(flat))
            yield ids, offsets[:-1][np.array(docs, dtype=bool)]


def _piece_batches(texts):
    """Batches of (starts a document?, piece) of about BATCH_CHARS characters."""
    batch, size = [], 0
    for starts, text in texts:
        for j, piece in enumerate(pieces(text) or [""]):
            batch.append((starts and j == 0, piece))
            size += len(piece)
            if size >= BATCH_CHARS:
                yield batch
                batch, size = [], 0
    if batch:
        yield batch


@dataclass
class Corpus:
    """One corpus for a build, checked: token files, text files, or a dataset split.

    ``tokenizer`` is a name load_tokenizer knows (text needs one; for token
    files it is only recorded). ``separate``: no 2-gram crosses a document
    boundary; token files carry no documents.
    """

    token_files: list = field(default_factory=list)
    text_files: list = field(default_factory=list)
    dataset: DatasetSource | None = None
    tokenizer: str | None = None
    separate: bool = False

    def __post_init__(self):
        kinds = sum(bool(x) for x in (self.token_files, self.text_files, self.dataset))
        if kinds != 1:
            raise InvalidParameterError(
                "give exactly one corpus: token files, text files, --dataset or --data-files"
            )
        if self.token_files and self.separate:
            raise InvalidParameterError(
                "--separate-documents needs text: token files carry no documents"
            )
        if not self.token_files and not self.tokenizer:
            raise InvalidParameterError("text needs --tokenizer NAME")
        self.token_files = [TokenFile(p) for p in self.token_files]
        self.source = TextFileSource(self.text_files) if self.text_files else self.dataset

    @classmethod
    def of(cls, inputs, tokenizer=None, separate=False):
        """A corpus of files (token files by their suffix, text otherwise) or a DatasetSource."""
        if isinstance(inputs, DatasetSource):
            return cls(dataset=inputs, tokenizer=tokenizer, separate=separate)
        files = [str(p) for p in inputs]
        tokens = [p for p in files if Path(p).suffix in (*RAW_SUFFIXES, ".npy")]
        texts = [p for p in files if p not in tokens]
        return cls(tokens, texts, tokenizer=tokenizer, separate=separate)

    @functools.cached_property
    def _loaded_tokenizer(self):
        return load_tokenizer(self.tokenizer)

    def meta(self):
        """What the cache file records of its corpus and tokenizer."""
        meta = {"documents": "separate" if self.separate else "joined"}
        if self.token_files:
            meta["corpus"] = {"token_files": [f.path.name for f in self.token_files]}
        else:
            meta["corpus"] = self.source.identity
        if self.tokenizer:
            meta["tokenizer"] = identity(self._loaded_tokenizer)
        return meta

    def sources(self, token_cache=None, *, quiet=True):
        """The build's sources on this machine (text is tokenized first, or found cached)."""
        if self.token_files:
            return [TokenSource(f) for f in self.token_files]
        tokens, starts = tokenize(
            self.source, self._loaded_tokenizer, cache_dir(token_cache), quiet=quiet
        )
        return [TokenSource(tokens, starts=starts if self.separate else None)]
