"""Hostile files (tests/hostile, made by generate.py): named errors, never a crash."""

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from hostile.mutations import rehash
from ngramdraft import (
    ChecksumError,
    CorruptFileError,
    InvalidTokensError,
    NgramCache,
    RequestMemory,
    StaticCache,
    SuffixCorpus,
    TruncatedFileError,
    UnsupportedVersionError,
    WrongFileKindError,
    build_static,
    merge_static,
    replay,
)
from ngramdraft.files.tokens import TokenFile

HOSTILE = Path(__file__).parent / "hostile"

# file -> (what is done with it, error, words the message must contain)
OPEN = "open"  # StaticCache.open
VERIFY = "verify"  # opens fine, StaticCache.verify() raises
DEEP = "deep"  # checksums are right, StaticCache.verify(deep=True) raises
LOAD = "load"  # NgramCache.load
SUFFIX = "suffix"  # SuffixCorpus.open
SUFFIX_VERIFY = "suffix-verify"  # opens fine, SuffixCorpus.verify() raises
SUFFIX_DEEP = "suffix-deep"  # checksums are right, SuffixCorpus.verify(deep=True) raises
REQUESTS = "requests"  # RequestMemory.load
TOKENS = "tokens"  # TokenFile(...).read
CASES = {
    "empty.ngd": (OPEN, WrongFileKindError, "not an ngramdraft cache"),
    "text.ngd": (OPEN, WrongFileKindError, "not an ngramdraft cache"),
    "truncated-header.ngd": (OPEN, TruncatedFileError, "header alone"),
    "truncated-body.ngd": (OPEN, TruncatedFileError, "section ends at byte"),
    "header-bitflip.ngd": (OPEN, ChecksumError, "header checksum"),
    "bitflip-tokens.ngd": (VERIFY, ChecksumError, "tokens section"),
    "bitflip-counts.ngd": (VERIFY, ChecksumError, "counts section"),
    "bitflip-fuse.ngd": (VERIFY, ChecksumError, "fuse section"),
    "bitflip-offsets.ngd": (VERIFY, ChecksumError, "offsets section"),
    "future-version.ngd": (OPEN, UnsupportedVersionError, "version 99"),
    "old-version.ngd": (OPEN, UnsupportedVersionError, "rebuild it"),
    "absurd-max-count.ngd": (OPEN, CorruptFileError, "max_count 2147483648"),
    "max-count-lie.ngd": (DEEP, CorruptFileError, "max_count is 1"),
    "big-endian.ngd": (OPEN, CorruptFileError, "byte-order mark"),
    "wrong-section-size.ngd": (OPEN, CorruptFileError, "keys section is"),
    "overlapping-sections.ngd": (OPEN, CorruptFileError, "overlap"),
    "misaligned-section.ngd": (OPEN, CorruptFileError, "aligned"),
    "absurd-counts.ngd": (OPEN, CorruptFileError, "n_keys 1000000000000"),
    "dynamic-not-static.ngd": (OPEN, WrongFileKindError, "dynamic cache"),
    "dynamic-bitflip-counts.ngd": (LOAD, ChecksumError, "counts section"),
    "lookup-truncated.bin": (LOAD, TruncatedFileError, "past the end"),
    "lookup-odd-size.bin": (LOAD, WrongFileKindError, "nor a llama.cpp lookup file"),
    "lookup-no-followers.bin": (LOAD, WrongFileKindError, "nor a llama.cpp lookup file"),
    "lookup-zero-count.bin": (LOAD, CorruptFileError, "count is not positive"),
    "lookup-negative-token.bin": (LOAD, CorruptFileError, "token id is negative"),
    "lookup-duplicate-follower.bin": (LOAD, CorruptFileError, "same follower twice"),
    "lookup-bad-padding.bin": (LOAD, WrongFileKindError, "nor a llama.cpp lookup file"),
    "lookup-random.bin": (LOAD, WrongFileKindError, "nor a llama.cpp lookup file"),
    "tokens-odd-size.i32": (TOKENS, InvalidTokensError, "whole number of int32"),
    "tokens-negative.i32": (TOKENS, InvalidTokensError, "= -5 is not a token id"),
    "tokens-float.npy": (TOKENS, InvalidTokensError, "integer dtype"),
    "tokens-2d.npy": (TOKENS, InvalidTokensError, "one-dimensional"),
    "tokens-too-large.npy": (TOKENS, InvalidTokensError, "2147483648 is not a token id"),
    "static-not-suffix.ngd": (SUFFIX, WrongFileKindError, "build-static --suffix"),
    "suffix-truncated.ngd": (SUFFIX, TruncatedFileError, "buckets section ends"),
    "suffix-bitflip-suffixes.ngd": (SUFFIX_VERIFY, ChecksumError, "suffixes section"),
    "suffix-wrong-size.ngd": (SUFFIX, CorruptFileError, "suffixes section is"),
    "suffix-too-long.ngd": (SUFFIX, CorruptFileError, "2147483648 tokens in a suffix file"),
    "suffix-unsorted.ngd": (SUFFIX_DEEP, CorruptFileError, "out of order"),
    "suffix-outside.ngd": (SUFFIX_DEEP, CorruptFileError, "points outside the corpus"),
    "suffix-buckets-lie.ngd": (SUFFIX_DEEP, CorruptFileError, "buckets disagree"),
    "suffix-grams-lie.ngd": (SUFFIX_DEEP, CorruptFileError, "n-gram index disagrees"),
    "suffix-grams-size.ngd": (SUFFIX, CorruptFileError, "grams section is"),
    "requests-bitflip.ngd": (REQUESTS, ChecksumError, "tokens section"),
    "requests-unended.ngd": (REQUESTS, CorruptFileError, "each ended by -1"),
}


def _do(action, path):
    if action == OPEN:
        StaticCache.open(path)
    elif action == VERIFY:
        StaticCache.open(path).verify()
    elif action == DEEP:
        StaticCache.open(path).verify(deep=True)
    elif action == LOAD:
        NgramCache.load(path)
    elif action == SUFFIX:
        SuffixCorpus.open(path)
    elif action == SUFFIX_VERIFY:
        SuffixCorpus.open(path).verify()
    elif action == SUFFIX_DEEP:
        SuffixCorpus.open(path).verify(deep=True)
    elif action == REQUESTS:
        RequestMemory.load(path)
    else:
        f = TokenFile(path)
        f.read(0, len(f))


# Files that open and work, whose meta names a lone surrogate ("\\ud800": valid JSON, which
# no UTF-8 output encodes): every text the command line prints from them must reach it.
TEXTS = {f"{kind}-surrogate-meta.ngd" for kind in ("static", "dynamic", "suffix", "requests")}


def test_every_hostile_file_has_a_case():
    on_disk = {p.name for p in HOSTILE.iterdir() if p.suffix != ".py"} - {"offsets-lie.ngd"}
    assert on_disk == set(CASES) | TEXTS


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_texts_from_a_file_reach_a_pipe_escaped(tmp_path, name):
    """A real process, its output a pipe, as in `ngramdraft inspect F | less`: a meta value
    and a path UTF-8 cannot encode are printed escaped, with exit status 0 and nothing on
    stderr (an in-process run's StringIO encodes anything, so only a process shows this)."""
    odd = tmp_path / os.fsdecode(b"\xff-" + name.encode())  # a name that is not UTF-8
    shutil.copy(HOSTILE / name, odd)
    for args in (["--verify"], ["--json"], []):
        done = subprocess.run(
            [sys.executable, "-m", "ngramdraft", "inspect", str(odd), *args],
            capture_output=True,
            env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        )
        err = [
            line
            for line in done.stderr.decode().splitlines()
            if not line.startswith("ngramdraft: compiling the kernels")
        ]
        assert done.returncode == 0 and not err, (args, done.stderr.decode())
        out = done.stdout.decode("utf-8")
        assert "\\udcff-" in out  # the path's undecodable byte, escaped
        if name.split("-")[0] in ("static", "suffix"):  # the kinds whose meta inspect prints
            assert "\\ud800" in out


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_file_raises_named_error(name):
    action, error, words = CASES[name]
    with pytest.raises(error, match=words) as info:
        _do(action, HOSTILE / name)
    assert str(HOSTILE / name) in str(info.value) or action == TOKENS


@pytest.mark.parametrize("name", sorted(CASES))
def test_cli_reports_one_line_and_fails(cli, tmp_path, name):
    action, _, words = CASES[name]
    path = HOSTILE / name
    tokens = tmp_path / "t.i32"
    np.arange(50, dtype="<i4").tofile(tokens)
    if action == TOKENS:
        status, _, err = cli("build-static", path, "-o", HOSTILE / "never.ngd", "-q")
    elif action == OPEN:
        status, _, err = cli("replay", tokens, "--static", path, "--n-ctx", 8, "--n-draft", 2)
    elif action == SUFFIX:
        status, _, err = cli(
            "replay", tokens, "--rules", "suffix", "--static", path, "--n-ctx", 8, "--n-draft", 2
        )
    else:
        status, _, err = cli("inspect", path, "--verify")
    assert status == 1
    assert err.startswith("ngramdraft: error: ") and err.count("\n") == 1, err
    assert words in err
    assert not (HOSTILE / "never.ngd").exists()


def test_lying_offsets_are_caught_without_crashing():
    """Checksums all match: only the structure check and the kernels' span guard can tell."""
    path = HOSTILE / "offsets-lie.ngd"
    cache = StaticCache.open(path)
    cache.verify()  # every checksum is right
    with pytest.raises(CorruptFileError, match="follower spans"):
        cache.verify(deep=True)
    # A context n-gram with two followers makes drafting weigh them with the
    # static part of (a, b), so the kernel must read that span's offsets.
    a, b, c, d = (np.arange(7) * 7919 % 97)[[1, 2, 3, 6]]
    tokens = np.array([a, b, c] * 3 + [a, b, d] + [a, b, c] * 30, dtype=np.int32)
    with pytest.raises(CorruptFileError, match="damaged"):
        replay(tokens, 64, 4, static=cache)


def test_merging_sources_that_claim_too_many_tokens(tmp_path):
    """A header's source-token count is never bounded on open; a merge adds them up.

    Two copies of a file claiming 2**63 tokens each overflowed the header's
    field: struct.error, a generic exception, from ``merge-static``.
    """
    path = tmp_path / "claims.ngd"
    build_static(np.arange(200, dtype=np.int32) % 17, path)
    raw = bytearray(path.read_bytes())
    struct.pack_into("<Q", raw, 80, 1 << 63)  # n_source_tokens (docs/format.md)
    path.write_bytes(rehash(raw))
    with pytest.raises(CorruptFileError, match="claim 18446744073709551616 tokens"):
        merge_static([path, path], tmp_path / "merged.ngd")
    assert not (tmp_path / "merged.ngd").exists()
