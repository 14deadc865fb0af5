"""The ``ngramdraft`` command line (also ``python -m ngramdraft``).

Every failure the library can name becomes one line on stderr,
``ngramdraft: error: ...``, and exit status 1 (2 for usage errors).
"""

import argparse
import json
import sys
import time
from pathlib import Path

from ._version import __version__
from .atomic import atomic_output
from .cache import NgramCache, file_format, file_kind
from .corpus import TextFileSource, add_corpus_arguments, build_from_args, cache_dir, tokenize
from .errors import InvalidParameterError, NgramdraftError
from .replay import replay
from .static import StaticCache, as_static
from .tokenfile import RAW_SUFFIXES, TokenFile
from .tokenizer import load_tokenizer

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text):
    """'512M', '1G', '1.5G' or a byte count -> bytes."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1] if t and t[-1] in _UNITS else ""
    try:
        value = float(t[: len(t) - len(unit)])
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 512M or 1G)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive: {text!r}")
    return int(value * _UNITS[unit])


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return value


def _parser():
    p = argparse.ArgumentParser(prog="ngramdraft", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"ngramdraft {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("build-static", help="count the 2-grams of a corpus into a static cache")
    b.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="token files (.i32/.bin/.npy) or text files (.txt)",
    )
    b.add_argument("-o", "--output", required=True, metavar="CACHE")
    b.add_argument(
        "--memory-limit",
        type=parse_size,
        metavar="SIZE",
        help="target peak memory, e.g. 1G (default: one pass)",
    )
    b.add_argument("-q", "--quiet", action="store_true")
    add_corpus_arguments(b)

    r = sub.add_parser("replay", help="replay a token file as llama.cpp's lookup-stats does")
    r.add_argument("tokens", metavar="TOKENS", help="token file (.i32/.bin/.npy) or text file")
    r.add_argument("--tokenizer", metavar="NAME", help="tokenize a text file (and check the cache)")
    r.add_argument("--token-cache", metavar="DIR", help="where tokenized texts are kept")
    r.add_argument("--static", metavar="CACHE", help="native static cache or llama.cpp lookup file")
    r.add_argument("--dynamic", metavar="FILE", help="initial dynamic cache (native or llama.cpp)")
    r.add_argument("--n-ctx", type=_positive, required=True)
    r.add_argument("--n-draft", type=_positive, required=True)
    r.add_argument("--dump", metavar="FILE", help="write every draft call (parity dump format)")
    r.add_argument("--json", action="store_true", help="one JSON object on stdout")
    r.add_argument("-q", "--quiet", action="store_true")

    c = sub.add_parser("convert", help="llama.cpp lookup file <-> native static cache")
    c.add_argument("input", metavar="FILE")
    c.add_argument("-o", "--output", required=True, metavar="FILE")
    c.add_argument(
        "--to-llamacpp",
        action="store_true",
        help="write a llama.cpp lookup file from a native cache",
    )

    i = sub.add_parser("inspect", help="sizes, counts and checksums of a cache file")
    i.add_argument("cache", metavar="CACHE")
    i.add_argument("--verify", action="store_true", help="check checksums and structure")
    i.add_argument("--json", action="store_true")

    m = sub.add_parser("merge-static", help="combine static caches (e.g. built from shards)")
    m.add_argument("inputs", nargs="+", metavar="CACHE")
    m.add_argument("-o", "--output", required=True, metavar="CACHE")
    m.add_argument("--memory-limit", type=parse_size, metavar="SIZE")
    m.add_argument("-q", "--quiet", action="store_true")
    return p


def cmd_build_static(args):
    header = build_from_args(args)
    _say(
        args,
        f"{args.output}: {header.n_keys} 2-grams, {header.n_entries} entries, "
        f"from {header.n_source_tokens} tokens",
    )


def cmd_replay(args):
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    if Path(args.tokens).suffix in (*RAW_SUFFIXES, ".npy"):
        tokens = TokenFile(args.tokens)
    elif tokenizer is None:
        raise InvalidParameterError(f"{args.tokens}: a text file needs --tokenizer NAME")
    else:
        tokens, _ = tokenize(
            TextFileSource([args.tokens]), tokenizer, cache_dir(args.token_cache), quiet=True
        )
    seq = tokens.read(0, len(tokens))
    t0 = time.perf_counter()
    static = as_static(args.static) if args.static else None
    if static is not None and tokenizer is not None:
        static.check_tokenizer(tokenizer)
    t_load = 1000 * (time.perf_counter() - t0)
    result = replay(  # given a path, replay loads the dynamic cache itself (and times it)
        seq,
        args.n_ctx,
        args.n_draft,
        static,
        args.dynamic,
        dump=bool(args.dump),
        quiet=args.quiet or args.json,
    )
    result.t_load_ms += t_load
    if args.dump:
        with atomic_output(args.dump) as f:
            result.dump.astype("<i4").tofile(f)
    summary = result.to_dict()
    if args.json:
        print(json.dumps(summary))
        return
    for name in ("n_draft", "n_ctx", "n_predict", "n_calls", "n_drafted", "n_accept"):
        print(f"{name:<16}= {summary[name]}")
    print(f"{'accept':<16}= {summary['accept']:.3f}%")
    print(
        f"{'t_draft':<16}= {summary['t_draft_ms']:.2f} ms, "
        f"{summary['us_per_drafted']:.3f} us per drafted token"
    )
    print(f"{'t_load':<16}= {summary['t_load_ms']:.2f} ms")


def cmd_convert(args):
    if args.to_llamacpp:
        cache = _open_any(args.input)
        cache.save(args.output, "llamacpp")
        print(f"{args.output}: {len(cache)} n-grams, {cache.n_entries} entries (llama.cpp)")
    else:
        if file_format(args.input) == "native":
            raise InvalidParameterError(
                f"{args.input} is already a native cache (use --to-llamacpp to convert it back)"
            )
        cache = StaticCache.from_llamacpp(args.input, args.output)
        print(f"{args.output}: {len(cache)} 2-grams, {cache.n_entries} entries")


def _open_any(path):
    """A native static cache opened, anything else loaded into memory."""
    return StaticCache.open(path) if file_kind(path) == "static" else NgramCache.load(path)


def cmd_inspect(args):
    kind = file_kind(args.cache)
    if kind == "static":
        cache = StaticCache.open(args.cache)
        if args.verify:
            cache.verify(deep=True)
        info = cache.info()
    else:
        cache = NgramCache.load(args.cache)  # checks checksums and every record
        if args.verify:
            cache._check()
        keys = cache.arrays()[0]
        sizes = (keys >= 0).sum(axis=1)
        info = {
            "path": args.cache,
            "kind": kind,
            "file_bytes": Path(args.cache).stat().st_size,
            "n_ngrams": len(cache),
            "n_entries": cache.n_entries,
            "ngrams_by_size": {int(n): int((sizes == n).sum()) for n in range(1, 5)},
        }
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


def cmd_merge_static(args):
    cache = StaticCache.merge(
        args.inputs, args.output, memory_limit=args.memory_limit, quiet=args.quiet
    )
    _say(args, f"{args.output}: {len(cache)} 2-grams, {cache.n_entries} entries")


def _say(args, text):
    if not args.quiet:
        print(text)


COMMANDS = {
    "build-static": cmd_build_static,
    "replay": cmd_replay,
    "convert": cmd_convert,
    "inspect": cmd_inspect,
    "merge-static": cmd_merge_static,
}


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        COMMANDS[args.command](args)
    except NgramdraftError as e:
        print(f"ngramdraft: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"ngramdraft: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ngramdraft: interrupted", file=sys.stderr)
        return 130
    return 0
