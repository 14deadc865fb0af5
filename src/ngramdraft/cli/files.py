"""convert, inspect and merge-dynamic: cache files read, described, converted, added up."""

import argparse
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..build.static import static_from_llamacpp
from ..caches.base import Cache
from ..caches.ngram import NgramCache
from ..caches.requests import RequestMemory, read_requests
from ..caches.shared import format_for
from ..caches.static import StaticCache
from ..caches.suffix_corpus import SuffixCorpus
from ..errors import InvalidParameterError, WrongFileKindError
from ..files.kinds import file_format, file_kind
from ..files.ngd.header import KIND_NAMES, Header
from .args import subcommand


def register(sub: Any) -> None:
    c = subcommand(
        sub,
        "convert",
        "llama.cpp lookup file <-> native static cache",
        "Convert a llama.cpp lookup file (llama-lookup-create's -lcs output) into a native "
        "static cache, or, with --to-llamacpp, any native cache into a lookup file that "
        "llama.cpp's llama-lookup and llama-server read.",
        [
            "ngramdraft convert lookup.bin -o lookup.ngd",
            "ngramdraft convert wiki.ngd --to-llamacpp -o wiki.bin",
        ],
    )
    c.add_argument("input", metavar="FILE", help="the cache to convert")
    c.add_argument("-o", "--output", required=True, metavar="FILE", help="the file to write")
    c.add_argument(
        "--to-llamacpp",
        action="store_true",
        help="write a llama.cpp lookup file from a native cache",
    )
    c.set_defaults(run=convert_command)

    i = subcommand(
        sub,
        "inspect",
        "sizes, counts and checksums of a cache file",
        "Print a cache file's kind, sizes, counts, sections and recorded metadata.",
        ["ngramdraft inspect wiki.ngd --verify", "ngramdraft inspect seen.bin --json"],
    )
    i.add_argument("cache", metavar="CACHE", help="a native cache or llama.cpp lookup file")
    i.add_argument("--verify", action="store_true", help="also check every checksum and invariant")
    i.add_argument("--json", action="store_true", help="one JSON object on stdout")
    i.set_defaults(run=inspect_command)

    md = subcommand(
        sub,
        "merge-dynamic",
        "add up dynamic caches (llama.cpp's llama-lookup-merge), or join requests files",
        "Add up the counts of dynamic caches (native .ngd or llama.cpp lookup files) into "
        "one, as llama.cpp's llama-lookup-merge does. The output's format follows its "
        "suffix: .bin is a llama.cpp lookup file, anything else native. Requests files "
        "(--rules suffix's earlier requests) are joined instead, in the order given, the last "
        "as the newest: a drafter past its budget forgets the first ones first.",
        [
            "ngramdraft merge-dynamic a.bin b.bin -o merged.bin",
            "ngramdraft merge-dynamic server-*.ngd -o all.ngd",
            "ngramdraft merge-dynamic requests-*.ngd -o requests.ngd",
        ],
    )
    md.add_argument(
        "inputs", nargs="+", metavar="CACHE", help="dynamic caches to add up, or requests files"
    )
    md.add_argument("-o", "--output", required=True, metavar="CACHE", help="the cache to write")
    md.set_defaults(run=merge_dynamic_command)


def convert_command(args: argparse.Namespace) -> None:
    if args.to_llamacpp:
        cache = _open_any(args.input)
        cache.save(args.output, "llamacpp")
        print(f"{args.output}: {len(cache)} n-grams, {cache.n_entries} entries (llama.cpp)")
    else:
        if file_format(args.input) == "native":
            raise InvalidParameterError(
                f"{args.input} is already a native cache (use --to-llamacpp to convert it back)"
            )
        static = static_from_llamacpp(args.input, args.output)
        print(f"{args.output}: {len(static)} 2-grams, {static.n_entries} entries")


def _open_any(path: str | os.PathLike[str]) -> Cache:
    """A native static cache opened, anything else loaded into memory."""
    return StaticCache.open(path) if file_kind(path) == "static" else NgramCache.load(path)


def inspect_command(args: argparse.Namespace) -> None:
    kind = file_kind(args.cache)
    if kind == "static":
        info = _static_info(args.cache, args.verify)
    elif kind == "suffix":
        info = _suffix_info(args.cache, args.verify)
    elif kind == "requests":
        info = _requests_info(args.cache)
    else:
        info = _dynamic_info(args.cache, args.verify)
    if args.verify:
        info["verified"] = True
    if args.json:
        print(json.dumps(info, indent=2))
        return
    for name, value in info.items():
        if isinstance(value, dict):
            print(f"{name}:")
            for k, v in value.items():
                print(f"  {k}: {v}")
        else:
            print(f"{name}: {value}")


def _static_info(path: str, verify: bool) -> dict[str, Any]:
    """A static cache's header, sizes and meta (everything checked, with ``verify``)."""
    return _mapped_info(
        StaticCache.open(path),
        verify,
        lambda h, size: {
            "n_2grams": h.n_keys,
            "n_entries": h.n_entries,
            "bytes_per_2gram": size / h.n_keys if h.n_keys else None,
            "max_count": h.max_count,
            "n_source_tokens": h.n_source_tokens,
        },
    )


def _suffix_info(path: str, verify: bool) -> dict[str, Any]:
    """A suffix file's header, sizes and meta (the order checked too, with ``verify``)."""
    return _mapped_info(
        SuffixCorpus.open(path),
        verify,
        lambda h, size: {
            "n_tokens": h.n_source_tokens,
            "n_separators": h.n_entries - h.n_source_tokens,
            "bytes_per_token": size / h.n_entries if h.n_entries else None,
            # 0: written before the index, or nothing frequent enough (docs/format.md)
            "ngram_index_bytes": h.sections.get("grams", (0, 0, 0))[1],
        },
    )


def _mapped_info(
    opened: StaticCache | SuffixCorpus,
    verify: bool,
    counts: Callable[[Header, int], dict[str, Any]],
) -> dict[str, Any]:
    """What inspect prints of a mapped file: the header's, the kind's ``counts``, the meta."""
    if verify:
        opened.verify(deep=True)
    h = opened.header
    size = opened.path.stat().st_size
    return {
        "path": str(opened.path),
        "kind": KIND_NAMES[h.kind],
        "format_version": h.version,
        "file_bytes": size,
        **counts(h, size),
        "max_token": h.max_token,
        "sections": {
            name: {"offset": o, "bytes": s, "xxh3_64": f"{d:016x}"}
            for name, (o, s, d) in h.sections.items()
        },
        "meta": opened.meta,
    }


def _requests_info(path: str) -> dict[str, Any]:
    """A requests file's sequences (loading checks its checksums and every token)."""
    return {
        "path": path,
        "kind": "requests",
        "file_bytes": Path(path).stat().st_size,
        **_sequence_counts(read_requests(path)),
    }


def _sequence_counts(tokens: np.ndarray) -> dict[str, int]:
    """Requests' sequences and tokens, held as sequences each ended by -1."""
    return {"n_sequences": int((tokens == -1).sum()), "n_tokens": int((tokens >= 0).sum())}


def _dynamic_info(path: str, verify: bool) -> dict[str, Any]:
    """A dynamic cache's (or lookup file's) counts; loading checks checksums and every record."""
    cache = NgramCache.load(path)
    if verify:
        cache.verify()
    keys = cache.arrays()[0]
    sizes = (keys >= 0).sum(axis=1)
    return {
        "path": path,
        "kind": file_kind(path),
        "file_bytes": Path(path).stat().st_size,
        "n_ngrams": len(cache),
        "n_entries": cache.n_entries,
        "ngrams_by_size": {int(n): int((sizes == n).sum()) for n in range(1, 5)},
    }


def merge_dynamic_command(args: argparse.Namespace) -> None:
    kinds = [file_kind(path) for path in args.inputs]
    if "requests" in kinds:
        _join_requests(args.inputs, kinds, args.output)
        return
    merged = NgramCache()
    for path in args.inputs:
        merged.merge(NgramCache.load(path))
    merged.save(args.output, format_for(args.output))
    print(f"{args.output}: {len(merged)} n-grams, {merged.n_entries} entries")


def _join_requests(inputs: list[str], kinds: list[str], output: str) -> None:
    """merge-dynamic for requests files: their sequences, in the order given, in one."""
    for path, kind in zip(inputs, kinds, strict=True):
        if kind != "requests":
            raise WrongFileKindError(
                f"{path}: a {kind} file among requests files: merge-dynamic joins requests "
                "files (rules='suffix') with requests files only, and adds up n-gram caches "
                "with n-gram caches"
            )
    if format_for(output) == "llamacpp":
        raise InvalidParameterError(
            f"{output}: a requests file has no llama.cpp form (lookup files hold n-gram "
            "counts): name the output .ngd"
        )
    memory = RequestMemory()
    memory.hold(np.concatenate([read_requests(path) for path in inputs]))
    memory.save(output)
    counts = _sequence_counts(memory.index.tokens)
    print(f"{output}: {counts['n_sequences']} sequences, {counts['n_tokens']} tokens")
