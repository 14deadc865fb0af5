"""Benchmark data: Gutenberg corpus prefixes, their static caches, and the test streams.

Everything is derived from ``../shared`` (see its corpus README) and kept in
``benchmarks/.data`` so that a second run only measures. The whole training
text is tokenized once; the "X MB" prefix is its first floor(total * X / 541)
tokens, so each prefix contains the smaller ones, as in the blog's series.
That is how the parity data's train-25M was cut (6,144,596 tokens), which
the driver checks. Tokenizer: llama3 of quicktok-v1, recorded in every cache.
"""

import json
import lzma
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from ngramdraft import StaticCache, UnsupportedVersionError
from ngramdraft.build.counting import TokenTriples
from ngramdraft.build.local import build_static
from ngramdraft.build.sources import TextFiles
from ngramdraft.build.tokenize import tokenize
from ngramdraft.files.ngd import read_header
from ngramdraft.tokenizers import identity, load_tokenizer

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("NGRAMDRAFT_SHARED", REPO.parent / "shared"))
DATA = REPO / "benchmarks" / ".data"
TRAIN_XZ = SHARED / "corpus" / "gutenberg-train-541M.txt.xz"
PARITY = SHARED / "parity"
TOKENIZER = "llama3"
FULL_MB = 541
# Set by a --quick run: the "X MB" prefix is then the tokens of the text's
# first X MB, so that a smoke check tokenizes only what it uses instead of the
# whole corpus; its caches are kept apart from the full series'.
QUICK = False


def _text(max_bytes):
    """The training text, decompressed once (its first max_bytes bytes at least)."""
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


def full_tokens():
    """int32 tokens of the whole training text (tokenized once, cached)."""
    out = DATA / f"train-{FULL_MB}M.{TOKENIZER}.i32"
    if not out.exists():
        text = _text(1 << 30)
        tokens, _ = tokenize(TextFiles([text]), load_tokenizer(TOKENIZER), DATA / "tokens")
        tokens.read(0, len(tokens)).tofile(out)
    return np.fromfile(out, "<i4")


def prefix_tokens(mb):
    """The first floor(total * mb / 541) tokens of the corpus (QUICK: of its first mb MB)."""
    if QUICK:
        return _text_prefix_tokens(mb)
    full = full_tokens()
    return full[: len(full) * mb // FULL_MB]


def _text_prefix_tokens(mb):
    out = DATA / f"train-{mb}MB-text.{TOKENIZER}.i32"
    if not out.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        with lzma.open(TRAIN_XZ) as src:
            data = src.read(mb << 20)
        text = DATA / f"train-{mb}MB.txt"
        text.write_bytes(data[: data.rfind(b"\n") + 1])
        tokens, _ = tokenize(TextFiles([text]), load_tokenizer(TOKENIZER), DATA / "tokens")
        tokens.read(0, len(tokens)).tofile(out)
    return np.fromfile(out, "<i4")


def results_dir():
    """Where a run writes its results: the tracked folder, or (QUICK) an ignored one."""
    path = DATA / "results" if QUICK else REPO / "benchmarks" / "results"
    path.mkdir(parents=True, exist_ok=True)
    return path


def static_cache(mb):
    """(StaticCache of the mb-MB prefix, build seconds or None if it was cached)."""
    path = DATA / (f"static-{mb}MB-text.ngd" if QUICK else f"static-{mb}M.ngd")
    built = None
    if not _readable(path):
        tokens = prefix_tokens(mb)
        meta = {"tokenizer": identity(load_tokenizer(TOKENIZER)), "corpus": f"gutenberg {mb}M"}
        t0 = time.perf_counter()
        build_static([TokenTriples(tokens)], path, meta=meta)
        built = time.perf_counter() - t0
    return StaticCache.open(path), built


def suffix_corpus(mb):
    """(path of the mb-MB prefix's suffix file, build seconds or None if it was cached)."""
    from ngramdraft.build.corpus import Corpus
    from ngramdraft.build.suffixes import build_suffixes

    path = DATA / (f"suffix-{mb}MB-text.ngd" if QUICK else f"suffix-{mb}M.ngd")
    built = None
    if not _readable(path):
        tokens = DATA / f"suffix-{mb}M.{TOKENIZER}.i32"
        prefix_tokens(mb).tofile(tokens)
        t0 = time.perf_counter()
        build_suffixes(Corpus.of([tokens], TOKENIZER), path)
        built = time.perf_counter() - t0
        tokens.unlink()
    return path, built


def _readable(path):
    """False for a missing file or one an older ngramdraft wrote (rebuilt, not failed on)."""
    try:
        read_header(path)
    except (FileNotFoundError, UnsupportedVersionError):
        return False
    return True


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


def parity_train_25m():
    with lzma.open(PARITY / "train-25M.llama3.i32.xz") as f:
        return np.frombuffer(f.read(), "<i4")


def summary():
    return json.loads((PARITY / "summary.json").read_text())


def parity_static():
    """The 25 MB parity corpus's static cache (what --quick runs draft with)."""
    path = DATA / "static-parity25M.ngd"
    if not path.exists():
        DATA.mkdir(parents=True, exist_ok=True)
        StaticCache.build(parity_train_25m(), path)
    return StaticCache.open(path)


def save_results(name, result, markdown, as_json=False):
    """Write results_dir()/<stamp>-<name>.{json,md}, print the table (or the JSON); the stem."""
    out = results_dir() / f"{time.strftime('%Y-%m-%d-%H%M')}-{name}"
    out.with_suffix(".json").write_text(json.dumps(result, indent=2) + "\n")
    md = markdown(result)
    out.with_suffix(".md").write_text(md)
    print(json.dumps(result, indent=2) if as_json else md)
    seconds = f" ({result['seconds']:.0f} s)" if "seconds" in result else ""
    print(f"results: {out}.{{json,md}}{seconds}", file=sys.stderr)
    return out


def worker(script, spec):
    """Run ``script --worker SPEC`` in a fresh process; its last stdout line, as JSON."""
    out = subprocess.run(
        [sys.executable, str(script), "--worker", json.dumps(spec)],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])
