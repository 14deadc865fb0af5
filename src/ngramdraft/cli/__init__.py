"""The ngramdraft command line (also ``python -m ngramdraft``): one module per command group.

``build`` (build-static, merge-static), ``replay``, ``files`` (convert,
inspect, merge-dynamic) and ``engines`` (generate, serve) each declare their
options beside their bodies; ``args`` holds what several share. Here: the
parser that gathers them, and how failures reach the user. Every failure the
library can name becomes one line on stderr, ``ngramdraft: error: ...``,
and exit status 1 (2 for usage errors).
"""

import argparse
import os
import signal
import sys
import warnings
from collections.abc import Callable
from typing import Any

from .._version import __version__
from ..drafting.replay import replay_chunk
from ..errors import NgramdraftError, NgramdraftWarning
from . import build, engines, files, replay

GROUPS = (build, replay, files, engines)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ngramdraft",
        description="Prompt-lookup (n-gram) speculative drafting with llama.cpp's rules: build "
        "caches, replay texts as llama.cpp's lookup-stats does, generate and serve with a model.",
        epilog="Run 'ngramdraft COMMAND --help' for a command's options and examples.",
    )
    p.add_argument("--version", action="version", version=f"ngramdraft {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    return p


def kernels_compiled() -> bool:
    """Whether numba holds the drafting kernels compiled on disk (False when it cannot tell)."""
    try:
        return os.path.exists(replay_chunk._cache._cache_file._index_path)
    except AttributeError:  # numba's cache layout is its own business
        return False


def _warn_with(show: Callable[..., Any]) -> Callable[..., None]:
    """A showwarning printing ngramdraft's own warnings as one line, others as ``show`` does."""

    def warn(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: Any = None,
        line: str | None = None,
    ) -> None:
        if issubclass(category, NgramdraftWarning):
            print(f"ngramdraft: warning: {message}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)

    return warn


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if not kernels_compiled():
        print(
            "ngramdraft: compiling the kernels, once for this installation "
            "(about a minute; later runs load them in under a second)",
            file=sys.stderr,
            flush=True,
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", NgramdraftWarning)
            warnings.showwarning = _warn_with(warnings.showwarning)
            args.run(args)
    except BrokenPipeError:
        # The reader went away (`ngramdraft inspect X | head`): stop quietly, as
        # coreutils do, and keep the interpreter's final flush from failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except NgramdraftError as e:
        print(f"ngramdraft: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"ngramdraft: error: {where}{e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ngramdraft: interrupted", file=sys.stderr)
        return 130
    return 0
