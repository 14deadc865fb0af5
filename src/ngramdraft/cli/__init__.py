"""The ngramdraft command line (also ``python -m ngramdraft``): one module per command group.

``build`` (build-static, merge-static), ``replay``, ``files`` (convert,
inspect, merge-dynamic) and ``engines`` (generate, serve) each declare their
options beside their bodies; ``args`` holds what several share, ``parser``
gathers them. Here: how failures reach the user. Every failure the
library can name becomes one line on stderr, ``ngramdraft: error: ...``,
and exit status 1 (2 for usage errors). :func:`run` is the console script
(and ``python -m ngramdraft``); :func:`main` runs a command in-process.
"""

import gc
import io
import os
import signal
import sys
import warnings
from collections.abc import Callable
from typing import Any, NoReturn

from numba.core.event import Event, Listener, install_listener

from ..errors import NgramdraftError, NgramdraftWarning
from . import compiled
from .parser import parser


class CompileNotice(Listener):
    """Says why a run is slow to start, at numba's first compilation in it.

    numba raises ``numba:compile`` only for what its disk cache misses, so a
    run whose kernels are cached, or that needs none, says nothing (a check
    for one kernel's cache file said it on every run that never used that
    kernel: every run of a user of the suffix rules alone). The first run that
    compiles compiles the rest too (``compiled.py``): one notice per
    installation.
    """

    def __init__(self) -> None:
        self.said = False

    def on_start(self, event: Event) -> None:
        if not self.said:  # numba compiles under its global lock: one notice
            self.said = True
            notice = compiled.NOTICE_AGAIN if compiled.compiled() else compiled.NOTICE
            print(notice, file=sys.stderr, flush=True)

    def on_end(self, event: Event) -> None:
        pass


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


def _escape_what_cannot_print() -> None:
    """Show what the output's encoding cannot encode as escapes, never as a traceback.

    Texts from files reach the output: meta values (valid JSON may name a lone
    surrogate, ``"\\ud800"``, which no UTF-8 stream encodes) and paths (bytes
    that are not UTF-8 arrive as surrogates). stderr escapes them already.
    """
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="backslashreplace")


def main(argv: list[str] | None = None) -> int:
    _escape_what_cannot_print()
    args = parser().parse_args(argv)
    try:
        notice = CompileNotice()
        with warnings.catch_warnings(), install_listener("numba:compile", notice):
            warnings.simplefilter("always", NgramdraftWarning)
            warnings.showwarning = _warn_with(warnings.showwarning)
            args.run(args)
        if notice.said and not compiled.compiled():
            compiled.compile_the_rest()  # what the next commands need, under the same notice
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


def run() -> NoReturn:
    """The console script: :func:`main`, then exit.

    Loading a kernel makes numba import its typing and lowering registries:
    about 110,000 objects the garbage collector tracks, which the
    interpreter's teardown then collected several times over, 0.1-0.2 s of a
    0.6 s replay (docs/performance-drafting.md). Frozen, they are left to the
    process's exit. Only here: a caller of main() in-process keeps
    collecting as before.
    """
    status = main()
    gc.freeze()
    sys.exit(status)
