"""Benchmark data: Gutenberg corpus prefixes, their static caches, and the test streams.

Everything is derived from ``../shared`` (see its corpus README) and kept in
``benchmarks/.data`` so that a second run only measures. Prefixes are cut at
the last blank line before 25, 50, 100, 200 and 541 MB of text, so each is a
prefix of the next, as in the blog's series; cut there, a prefix's tokens are
exactly the first tokens of the whole corpus (pieces are tokenized
independently), which the driver checks against the parity data's train-25M.
Tokenizer: llama3 of quicktok-v1, recorded in every cache built here.
"""

import json
import lzma
import os
import time
from pathlib import Path

import numpy as np

from ngramdraft import StaticCache
from ngramdraft.build import TokenSource, build_static
from ngramdraft.corpus import TextFileSource, tokenize
from ngramdraft.tokenizer import identity, load_tokenizer

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NGRAMDRAFT_SHARED", REPO.parent / "shared"))
DATA = REPO / "benchmarks" / ".data"
TRAIN_XZ = SHARED / "corpus" / "gutenberg-train-541M.txt.xz"
PARITY = SHARED / "parity"
TOKENIZER = "llama3"
FULL_MB = 541


def _text(max_bytes):
    """The training text's first max_bytes bytes (decompressed once, cached)."""
    DATA.mkdir(parents=True, exist_ok=True)
    path = DATA / "gutenberg-train.txt"
    if not path.exists() or path.stat().st_size < min(max_bytes, 540_913_768):
        tmp = path.with_suffix(".part")
        with lzma.open(TRAIN_XZ) as src, open(tmp, "wb") as out:
            left = max_bytes
            while left > 0 and (block := src.read(min(left, 64 << 20))):
                out.write(block)
                left -= len(block)
        tmp.replace(path)
    return path


def prefix_tokens(mb):
    """int32 tokens of the corpus prefix of ``mb`` MB (cut at a blank line); cached."""
    out = DATA / f"train-{mb}M.{TOKENIZER}.i32"
    if out.exists():
        return np.fromfile(out, "<i4")
    limit = int(mb * 1_000_000)
    text = _text(limit)
    with open(text, "rb") as f:
        raw = f.read(limit)
    cut = raw.rfind(b"\n\n") + 2 if len(raw) >= limit else len(raw)
    piece = DATA / f"train-{mb}M.txt"
    piece.write_bytes(raw[:cut])
    tokens, _ = tokenize(TextFileSource([piece]), load_tokenizer(TOKENIZER), DATA / "tokens")
    piece.unlink()
    arr = tokens.read(0, len(tokens))
    arr.tofile(out)
    return arr


def static_cache(mb):
    """(StaticCache of the mb-MB prefix, build seconds or None if it was cached)."""
    path = DATA / f"static-{mb}M.ngd"
    built = None
    if not path.exists():
        tokens = prefix_tokens(mb)
        meta = {"tokenizer": identity(load_tokenizer(TOKENIZER)), "corpus": f"gutenberg {mb}M"}
        t0 = time.perf_counter()
        build_static([TokenSource(tokens)], path, meta=meta)
        built = time.perf_counter() - t0
    return StaticCache.open(path), built


def lookup_file(mb):
    """The same static cache as a llama.cpp lookup file (what llama-lookup-create writes)."""
    path = DATA / f"static-{mb}M.lookup.bin"
    if not path.exists():
        static_cache(mb)[0].save(path, "llamacpp")
    return path


def test_stream(n_tokens):
    """The held-out test stream of the parity data (first n tokens of test-200k)."""
    return np.fromfile(PARITY / "test-200k.llama3.i32", "<i4")[:n_tokens]


def parity_dump(name):
    """Recorded drafts of the reference C++ (P1: no static, P2: 25 MB static)."""
    path = PARITY / f"{name}.ordered.dump.xz"
    with lzma.open(path) as f:
        return np.frombuffer(f.read(), "<i4")


def summary():
    return json.loads((PARITY / "summary.json").read_text())
