"""replay: a text replayed as llama.cpp's lookup-stats does, and what its figures mean."""

import argparse
import json
import textwrap
from pathlib import Path
from typing import Any

from ..build.sources import TextFiles
from ..build.tokenize import tokenize
from ..drafting.replay import replay
from ..errors import InvalidParameterError
from ..files.atomic import atomic_output, write_array
from ..files.folders import cache_dir
from ..files.tokens import RAW_SUFFIXES, TokenFile
from ..tokenizers import CHOICES, load_tokenizer, needs_tokenizer
from .args import add_cache_arguments, subcommand


def register(sub: Any) -> None:
    r = subcommand(
        sub,
        "replay",
        "replay a text as llama.cpp's lookup-stats does",
        "Replay a token stream in chunks of --n-ctx tokens, drafting --n-draft tokens at "
        "every position, as llama.cpp's llama-lookup-stats does, and report how many drafted "
        "tokens a model would have accepted.",
        [
            "ngramdraft replay heldout.txt --tokenizer llama3 --static books.ngd",
            "ngramdraft replay tokens.i32 -lcs books.ngd -lcd seen.bin --n-ctx 4096 --draft 8",
        ],
    )
    r.add_argument("tokens", metavar="TOKENS", help="token file (.i32/.bin/.npy) or text file")
    r.add_argument(
        "--tokenizer",
        metavar="NAME",
        help=f"tokenize a text file (and check the cache's tokenizer): {CHOICES}",
    )
    r.add_argument("--token-cache", metavar="DIR", help="where tokenized texts are kept")
    add_cache_arguments(
        r,
        "initial dynamic cache: native or llama.cpp lookup file, or with --rules suffix a "
        "requests file; read, never written",
    )
    r.add_argument("--dump", metavar="FILE", help="write every draft call (parity dump format)")
    r.add_argument("--json", action="store_true", help="one JSON object on stdout")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress")
    r.set_defaults(run=replay_command)


def replay_command(args: argparse.Namespace) -> None:
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    if Path(args.tokens).suffix in (*RAW_SUFFIXES, ".npy"):
        tokens = TokenFile(args.tokens)
    elif tokenizer is None:
        raise InvalidParameterError(needs_tokenizer(f"{args.tokens}, a text file,"))
    else:
        tokens, _ = tokenize(
            TextFiles([args.tokens]), tokenizer, cache_dir(args.token_cache), quiet=True
        )
    seq = tokens.read(0, len(tokens))
    if args.n_draft is None:
        args.n_draft = 8  # lookup-stats' default, for both rule sets
    result = replay(  # given paths, replay opens the caches itself (and times it)
        seq,
        args.n_ctx,
        args.n_draft,
        args.static,
        args.dynamic,
        dump=bool(args.dump),
        quiet=args.quiet or args.json,
        rules=args.rules,
        tokenizer=tokenizer,
    )
    if args.dump and result.dump is not None:
        with atomic_output(args.dump) as f:
            write_array(f, result.dump.astype("<i4"))
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
    print(f"{'t_load':<16}= {summary['t_load_ms']:.2f} ms (opening the caches)")
    print(
        f"{'t_startup':<16}= {summary['t_startup_ms']:.2f} ms "
        "(loading the kernels; compiling them, on a first run)"
    )
    print()
    print(
        textwrap.fill(
            f"What it means: of {result.n_predict} replayed tokens, {result.n_accept} "
            f"({result.from_drafts:.1f}%) came from accepted drafts ('accept' is accepted over "
            f"drafted: {result.n_accept} of {result.n_drafted}). A model would need "
            f"{result.passes} forward passes instead of {result.n_predict}: "
            f"{result.tokens_per_pass:.3f} tokens per pass, {result.n_accept} passes saved.",
            79,
        )
    )
