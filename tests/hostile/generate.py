"""Write the hostile files of this folder (run from the repo root after a format change).

Each file breaks one promise of a format; test_hostile.py names the error each
must raise. Valid bases are built from a fixed token stream, so the output is
deterministic.
"""

import struct
import sys
from pathlib import Path

import numpy as np
import xxhash
from mutations import forge, rehash, section, set_section

from ngramdraft import (
    NgramCache,
    RequestMemory,
    build_static,
    build_suffix_corpus,
)
from ngramdraft.files.ngd.header import SECTIONS

HERE = Path(__file__).resolve().parent
TOKENS = (np.arange(400) * 7919 % 97).astype(np.int32)


def suffix_files(static):
    """Hostile suffix files (the corpus of rules="suffix"), and a static cache given as one."""
    tmp = HERE / "_valid-suffix.ngd"
    build_suffix_corpus(TOKENS, tmp)
    valid = bytearray(tmp.read_bytes())
    tmp.unlink()
    files = {"static-not-suffix.ngd": static, "suffix-truncated.ngd": valid[:-200]}
    raw = bytearray(valid)
    offset, size = section(raw, "suffixes")
    raw[offset + size // 2] ^= 0x10
    files["suffix-bitflip-suffixes.ngd"] = raw
    raw = bytearray(valid)
    files["suffix-wrong-size.ngd"] = rehash(
        set_section(raw, "suffixes", size=section(raw, "suffixes")[1] - 4)
    )
    raw = bytearray(valid)
    struct.pack_into("<Q", raw, 40, 2**31)  # n_entries: more than int32 positions reach
    files["suffix-too-long.ngd"] = rehash(raw)
    # Damage with every checksum forged: only the deep check can tell.
    for name, fix in (
        ("suffix-unsorted.ngd", lambda sa: sa[::-1]),
        ("suffix-outside.ngd", lambda sa: np.where(sa == sa.max(), 10**6, sa)),
    ):
        raw = bytearray(valid)
        offset, size = section(raw, "suffixes")
        sa = np.frombuffer(raw, dtype="<i4", count=size // 4, offset=offset)
        raw[offset : offset + size] = fix(sa).astype("<i4").tobytes()
        files[name] = forge(raw)
    raw = bytearray(valid)
    offset, size = section(raw, "buckets")
    raw[offset : offset + size] = np.full(size // 8, -(2**40), dtype="<i8").tobytes()
    files["suffix-buckets-lie.ngd"] = forge(raw)
    # An n-gram index needs n-grams at least gramindex.MIN_COUNT times: a repeated phrase.
    build_suffix_corpus(np.tile(np.arange(5, dtype=np.int32), 100), tmp)
    indexed = bytearray(tmp.read_bytes())
    tmp.unlink()
    raw = bytearray(indexed)
    offset, size = section(raw, "grams")
    grams = np.frombuffer(raw, dtype="<i8", count=size // 8, offset=offset).reshape(-1, 2).copy()
    grams[grams[:, 0] != 0, 1] = 2**40 | 7  # a range from 7 to beyond the corpus
    raw[offset : offset + size] = grams.tobytes()
    files["suffix-grams-lie.ngd"] = forge(raw)
    raw = bytearray(indexed)
    files["suffix-grams-size.ngd"] = rehash(set_section(raw, "grams", size=size - 16))
    return files


def requests_files():
    """Hostile requests files (the earlier requests of rules="suffix")."""
    memory = RequestMemory()
    memory.add(TOKENS[:200])
    memory.add(TOKENS[200:])
    memory.save(HERE / "_requests.ngd")
    valid = bytearray((HERE / "_requests.ngd").read_bytes())
    (HERE / "_requests.ngd").unlink()
    offset, size = section(valid, "tokens")
    flipped = bytearray(valid)
    flipped[offset + size // 2] ^= 0x10
    unended = bytearray(valid)
    unended[offset + size - 4 : offset + size] = np.int32(5).tobytes()
    return {"requests-bitflip.ngd": flipped, "requests-unended.ngd": forge(unended)}


def surrogate_meta(valid):
    """The file with its meta replaced by valid JSON naming a lone surrogate (``"\\ud800"``),
    which no UTF-8 output can encode; padded with spaces to the section's size."""
    raw = bytearray(valid)
    offset, size = section(raw, "meta")
    meta = b'{"note": "\\ud800"}'
    assert len(meta) <= size, "the base file's meta is shorter than the replacement"
    raw[offset : offset + size] = meta.ljust(size)
    return forge(raw)


def main():
    tmp = HERE / "_valid.ngd"
    build_static(TOKENS, tmp)
    valid = bytearray(tmp.read_bytes())
    tmp.unlink()
    files = {}
    files["empty.ngd"] = b""
    files["text.ngd"] = b"this is a plain text file, not a cache\n" * 20
    files["truncated-header.ngd"] = valid[:100]
    files["truncated-body.ngd"] = valid[:-1000]
    flipped = bytearray(valid)
    flipped[40] ^= 0x01  # n_entries, without fixing the checksum
    files["header-bitflip.ngd"] = flipped
    for name in ("tokens", "counts", "fuse", "offsets"):
        raw = bytearray(valid)
        offset, size = section(raw, name)
        raw[offset + size // 2] ^= 0x10
        files[f"bitflip-{name}.ngd"] = raw
    raw = bytearray(valid)
    struct.pack_into("<I", raw, 8, 99)
    files["future-version.ngd"] = rehash(raw)
    raw = bytearray(valid)
    struct.pack_into("<I", raw, 8, 1)
    files["old-version.ngd"] = rehash(raw)
    raw = bytearray(valid)
    struct.pack_into("<Q", raw, 88, 2**31)
    files["absurd-max-count.ngd"] = rehash(raw)
    raw = bytearray(valid)
    struct.pack_into("<Q", raw, 88, 1)  # the data's largest count is higher
    files["max-count-lie.ngd"] = rehash(raw)
    raw = bytearray(valid)
    struct.pack_into("<I", raw, 12, 0x0D0C0B0A)
    files["big-endian.ngd"] = rehash(raw)
    raw = bytearray(valid)
    files["wrong-section-size.ngd"] = rehash(
        set_section(raw, "keys", size=section(raw, "keys")[1] - 8)
    )
    raw = bytearray(valid)
    files["overlapping-sections.ngd"] = rehash(
        set_section(raw, "counts", offset=section(raw, "tokens")[0])
    )
    raw = bytearray(valid)
    files["misaligned-section.ngd"] = rehash(
        set_section(raw, "stats", offset=section(raw, "stats")[0] + 4)
    )
    raw = bytearray(valid)
    struct.pack_into("<Q", raw, 32, 10**12)  # n_keys: sizes no longer match
    files["absurd-counts.ngd"] = rehash(raw)
    # Offsets that lie, with every checksum fixed: only the structure check and
    # the kernels' span guard can notice.
    raw = bytearray(valid)
    offset, size = section(raw, "offsets")
    offs = np.frombuffer(raw, dtype="<i8", count=size // 8, offset=offset).copy()
    offs[1:-1] = offs[1:-1][::-1]
    raw[offset : offset + size] = offs.tobytes()
    i = SECTIONS.index("offsets")
    struct.pack_into("<Q", raw, 96 + 32 * i + 16, xxhash.xxh3_64_intdigest(offs.tobytes()))
    files["offsets-lie.ngd"] = rehash(raw)
    dyn = NgramCache()
    dyn.update(TOKENS)
    dyn.save(HERE / "_dyn.ngd")
    files["dynamic-not-static.ngd"] = (HERE / "_dyn.ngd").read_bytes()
    raw = bytearray(files["dynamic-not-static.ngd"])
    offset, size = section(raw, "counts")
    raw[offset + size // 2] ^= 0x01
    files["dynamic-bitflip-counts.ngd"] = raw
    (HERE / "_dyn.ngd").unlink()
    files.update(suffix_files(valid))
    files.update(requests_files())
    # Files that open, whose texts must reach a terminal or a pipe escaped.
    build_suffix_corpus(TOKENS, tmp)
    RequestMemory().save(HERE / "_requests.ngd")
    for kind, base in (
        ("static", valid),
        ("dynamic", files["dynamic-not-static.ngd"]),
        ("suffix", tmp.read_bytes()),
        ("requests", (HERE / "_requests.ngd").read_bytes()),
    ):
        files[f"{kind}-surrogate-meta.ngd"] = surrogate_meta(base)
    tmp.unlink()
    (HERE / "_requests.ngd").unlink()

    def words(*values):
        return np.array(values, dtype="<i4").tobytes()

    record = words(5, 6, -1, -1, 2, 7, 3, 9, 1)
    files["lookup-truncated.bin"] = record + record[:-4]
    files["lookup-odd-size.bin"] = record + b"\x00\x01"
    files["lookup-no-followers.bin"] = words(5, 6, -1, -1, 0)
    files["lookup-zero-count.bin"] = record + words(8, 9, -1, -1, 1, 4, 0)
    files["lookup-negative-token.bin"] = record + words(8, 9, -1, -1, 1, -4, 2)
    files["lookup-duplicate-follower.bin"] = record + words(8, 9, -1, -1, 2, 4, 1, 4, 2)
    files["lookup-bad-padding.bin"] = words(5, -1, 7, -1, 1, 4, 1)
    files["lookup-random.bin"] = np.random.default_rng(3).bytes(4096)
    files["tokens-odd-size.i32"] = words(1, 2, 3) + b"\x07"
    files["tokens-negative.i32"] = words(1, 2, -5, 3)
    np.save(HERE / "tokens-float.npy", np.array([1.0, 2.0, 3.0]))
    np.save(HERE / "tokens-2d.npy", np.zeros((3, 3), dtype=np.int32))
    np.save(HERE / "tokens-too-large.npy", np.array([1, 2, 2**31], dtype=np.int64))
    for name, data in files.items():
        (HERE / name).write_bytes(bytes(data))
    print(f"wrote {len(files) + 3} files to {HERE}", file=sys.stderr)


if __name__ == "__main__":
    main()
