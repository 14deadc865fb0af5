"""Benchmark data: the Gutenberg corpus, prefixes of it, their caches, the test streams.

Everything is derived from ``../shared`` (see its corpus README) and kept in
``benchmarks/.data`` so that a second run only measures. The whole training
text is tokenized once (``ngramdraft tokenize``); the "X MB" prefix is its
first floor(total * X / 541) tokens, so each prefix contains the smaller
ones, as in the blog's series. That is how the parity data's train-25M was
cut (6,144,596 tokens), which the scaling benchmark checks. Tokenizer:
llama3 of quicktok-v1, recorded in every cache.

A smoke run (``SMOKE``) takes the "X MB" prefix as the tokens of the text's
first X MB instead, so that it tokenizes only what it uses; its files are
kept apart from the full series'.
"""

import json
import lzma
import os
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ngramdraft import UnsupportedVersionError

if TYPE_CHECKING:  # imported where used: a vLLM worker imports this module before its engine
    from ngramdraft import StaticCache, SuffixCorpus

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("NGRAMDRAFT_SHARED", REPO.parent / "shared"))
DATA = REPO / "benchmarks" / ".data"
# Every benchmark keeps what it builds here, and a fresh clone has no such folder.
DATA.mkdir(parents=True, exist_ok=True)
TRAIN_XZ = SHARED / "corpus" / "gutenberg-train-541M.txt.xz"
TEST_XZ = SHARED / "corpus" / "gutenberg-test.txt.xz"
PARITY = SHARED / "parity"
TOKENIZER = "llama3"
FULL_MB = 541
SMOKE = False


def _text(max_bytes: int) -> Path:
    """The training text's first ``max_bytes`` bytes (cut after a line), decompressed once."""
    path = DATA / ("gutenberg-train.txt" if max_bytes >= 1 << 30 else f"train-{max_bytes}B.txt")
    if not path.exists():
        tmp = path.with_suffix(".part")
        with lzma.open(TRAIN_XZ) as src, open(tmp, "wb") as out:
            left = max_bytes
            while left > 0 and (block := src.read(min(left, 64 << 20))):
                left -= len(block)
                if left <= 0:  # a prefix ends at a line's end
                    block = block[: block.rfind(b"\n") + 1]
                out.write(block)
        tmp.replace(path)
    return path


def _tokens_of(text: Path, out: Path) -> np.ndarray:
    if not out.exists():
        from ngramdraft.cli import main as cli

        status = cli(["tokenize", str(text), "--tokenizer", TOKENIZER, "-o", str(out), "-q"])
        if status:
            raise RuntimeError(f"ngramdraft tokenize {text} failed ({status})")
    return np.fromfile(out, "<i4")


def full_tokens() -> np.ndarray:
    """int32 tokens of the whole training text (tokenized once, kept)."""
    return _tokens_of(_text(1 << 30), DATA / f"train-{FULL_MB}M.{TOKENIZER}.i32")


def prefix_tokens(mb: int) -> np.ndarray:
    """The first floor(total * mb / 541) tokens of the corpus (SMOKE: of its first mb MB)."""
    if SMOKE:
        return _tokens_of(_text(mb << 20), DATA / f"train-{mb}MB-text.{TOKENIZER}.i32")
    full = full_tokens()
    return full[: len(full) * mb // FULL_MB]


def prefix_file(mb: int) -> Path:
    """The mb-MB prefix's tokens as a token file (little-endian int32), written once."""
    path = DATA / (
        f"train-{mb}MB-text.{TOKENIZER}.i32" if SMOKE else f"train-{mb}M.{TOKENIZER}.i32"
    )
    if not path.exists():
        prefix_tokens(mb).astype("<i4").tofile(path)
    return path


def _name(kind: str, mb: int) -> Path:
    return DATA / (f"{kind}-{mb}MB-text.ngd" if SMOKE else f"{kind}-{mb}M.ngd")


def static_cache(mb: int) -> "StaticCache":
    """The static cache of the mb-MB prefix, built once."""
    from ngramdraft import StaticCache, build_static

    path = _name("static", mb)
    try:
        return StaticCache.open(path)
    except (FileNotFoundError, UnsupportedVersionError):  # missing, or an older ngramdraft's
        return build_static(
            prefix_tokens(mb), path, tokenizer=TOKENIZER, meta={"corpus": f"gutenberg {mb}M"}
        )


def suffix_corpus(mb: int) -> "SuffixCorpus":
    """The suffix file of the mb-MB prefix, built once."""
    from ngramdraft import SuffixCorpus, build_suffix_corpus

    path = _name("suffix", mb)
    try:
        return SuffixCorpus.open(path)
    except (FileNotFoundError, UnsupportedVersionError):
        return build_suffix_corpus(prefix_tokens(mb), path, tokenizer=TOKENIZER)


def lookup_file(mb: int) -> Path:
    """The same static cache as a llama.cpp lookup file (what llama-lookup-create writes)."""
    path = _name("static", mb).with_suffix(".lookup.bin")
    if not path.exists():
        static_cache(mb).save(path, "llamacpp")
    return path


def test_stream(n_tokens: int) -> np.ndarray:
    """The held-out test stream of the parity data (its first n tokens of test-200k)."""
    return np.fromfile(PARITY / "test-200k.llama3.i32", "<i4")[:n_tokens]


def test_text(n_chars: int) -> str:
    """The held-out books' first ``n_chars`` characters (or fewer, cut after a line)."""
    with lzma.open(TEST_XZ, "rt", encoding="utf-8") as f:
        text = f.read(n_chars)
    return text[: text.rfind("\n") + 1] or text


def parity_dump(name: str) -> np.ndarray:
    """Recorded drafts of the reference C++ (P1: no static, P2: 25 MB static)."""
    with lzma.open(PARITY / f"{name}.ordered.dump.xz") as f:
        return np.frombuffer(f.read(), "<i4")


def parity_train_25m() -> np.ndarray:
    with lzma.open(PARITY / "train-25M.llama3.i32.xz") as f:
        return np.frombuffer(f.read(), "<i4")


def summary() -> dict:
    return json.loads((PARITY / "summary.json").read_text())


def parity_static() -> "StaticCache":
    """The 25 MB parity corpus's static cache."""
    from ngramdraft import StaticCache, build_static

    path = DATA / "static-parity25M.ngd"
    try:
        return StaticCache.open(path)
    except (FileNotFoundError, UnsupportedVersionError):
        return build_static(parity_train_25m(), path, tokenizer=TOKENIZER)
