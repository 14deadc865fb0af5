"""Tokenizing a text source into a token file, kept in a cache directory for reuse.

The token file is stored under a key made of the source's and the
tokenizer's identities: a second build (another memory limit, documents
joined or apart) skips tokenizing. Documents are cut at blank lines into
pieces for the batch encoder, each piece keeping its blank line, as the
shared parity data was tokenized; the ids of all pieces are concatenated.
"""

import json
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import xxhash

from ..files.atomic import atomic_output, write_array
from ..files.tokens import TokenFile
from ..progress import Progress
from ..tokenizers import Tokenizer, identity

BATCH_CHARS = 8 << 20
TextBatch = list[tuple[bool, str]]  # (starts a document?, text)


class Texts(Protocol):
    """What tokenizing needs of a source: what it is, and its texts in batches."""

    @property
    def identity(self) -> dict[str, Any]: ...

    def batches(self, progress: Progress) -> Iterator[TextBatch]: ...


def tokenize(
    source: Texts, tokenizer: Tokenizer, directory: Path, *, quiet: bool = True
) -> tuple[TokenFile, np.ndarray]:
    """(TokenFile, document starts) for a text source, tokenizing only if not cached."""
    ident = {"source": source.identity, "tokenizer": identity(tokenizer)}
    key = xxhash.xxh3_64_hexdigest(json.dumps(ident, sort_keys=True).encode())
    directory.mkdir(parents=True, exist_ok=True)
    tokens_path = directory / f"tokens-{key}.i32"
    starts_path = directory / f"tokens-{key}.starts.npy"
    if tokens_path.exists() and starts_path.exists():
        if not quiet:
            print(f"reusing tokens {tokens_path}", file=sys.stderr)
        return TokenFile(tokens_path), np.load(starts_path)
    starts: list[int] = []
    n = 0
    t0 = time.perf_counter()
    with atomic_output(tokens_path) as out, Progress("tokenizing", quiet=quiet) as progress:
        for ids, doc_starts in encode(source.batches(progress), tokenizer):
            write_array(out, ids.astype("<i4"))
            starts.extend((n + doc_starts).tolist())
            n += len(ids)
    np.save(starts_path, np.asarray(starts, dtype=np.int64))
    if not quiet:
        print(
            f"tokenized {n} tokens in {time.perf_counter() - t0:.2f} s -> {tokens_path}",
            file=sys.stderr,
        )
    return TokenFile(tokens_path), np.asarray(starts, dtype=np.int64)


def encode(
    batches: Iterable[TextBatch], tokenizer: Tokenizer
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(ids, document starts within ids) for each batch of ``(starts_document, text)`` pairs.

    Texts are cut into pieces at blank lines and encoded in batches of about
    BATCH_CHARS characters; the ids of consecutive pieces are concatenated.
    """
    for texts in batches:
        for doc_batch in _piece_batches(texts):
            docs, flat = zip(*doc_batch, strict=True)
            ids, offsets = tokenizer.encode_batch(list(flat))
            yield ids, offsets[:-1][np.array(docs, dtype=bool)]


def pieces(text: str) -> list[str]:
    """A document cut at blank lines, each piece keeping its blank line."""
    parts = text.split("\n\n")
    return [part + "\n\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _piece_batches(texts: TextBatch) -> Iterator[TextBatch]:
    """Batches of (starts a document?, piece) of about BATCH_CHARS characters."""
    batch: list[tuple[bool, str]] = []
    size = 0
    for starts, text in texts:
        for j, piece in enumerate(pieces(text) or [""]):
            batch.append((starts and j == 0, piece))
            size += len(piece)
            if size >= BATCH_CHARS:
                yield batch
                batch, size = [], 0
    if batch:
        yield batch
