"""What several commands' parsers share: sizes, counts, the caches' options, a model's options."""

import argparse
import textwrap
from typing import Any

from ..drafting.rulesets import DEFAULT, RULE_SETS

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str) -> int:
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


def positive(text: str) -> int:
    """An integer >= 1, as argparse's type."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return value


def subcommand(
    sub: Any, name: str, summary: str, description: str, examples: list[str]
) -> argparse.ArgumentParser:
    """A subcommand's parser, with its description and examples in --help."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name,
        help=summary,
        description=textwrap.fill(description, 79),
        epilog="examples:\n" + "\n".join(f"  {e}" for e in examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    return parser


def add_cache_arguments(
    p: argparse.ArgumentParser, dynamic_help: str, rules: str = DEFAULT
) -> None:
    """The caches and sizes every drafting command takes, with llama.cpp's names and defaults
    (``rules``: the rule set a command drafts with unless told, said in its help)."""
    p.add_argument(
        "--static",
        "-lcs",
        metavar="CACHE",
        help="static cache: native .ngd or llama.cpp lookup file (llama.cpp's -lcs)",
    )
    p.add_argument("--dynamic", "-lcd", metavar="FILE", help=f"{dynamic_help} (llama.cpp's -lcd)")
    p.add_argument(
        "-c",
        "--n-ctx",
        type=positive,
        default=4096,
        metavar="N",
        help="context (chunk) size in tokens (default: 4096, as llama.cpp)",
    )
    p.add_argument(
        "--rules",
        choices=tuple(RULE_SETS),
        default=rules,
        help=f"the drafting rules (default: {rules}): llamacpp (llama.cpp's, bit for bit) or "
        "suffix (copy what followed the longest earlier match; --static then takes a "
        "suffix file from `build-static --suffix`, --dynamic a requests file)",
    )
    p.add_argument(
        "--n-draft",
        "--draft",
        type=positive,
        metavar="N",
        help="most tokens drafted per step (default: 8, as llama.cpp; with a model and "
        "--rules suffix, 64, the policy choosing how many to submit)",
    )


def say(args: argparse.Namespace, text: str) -> None:
    """Print a command's summary line, unless --quiet."""
    if not args.quiet:
        print(text)
