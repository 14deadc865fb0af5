"""The kernels compiled once for an installation, by the first command that needs one.

numba compiles a kernel at its first call and caches the machine code (beside
the sources, or in ``NUMBA_CACHE_DIR``). Left to itself, each of a user's
first commands would compile what it needs, each slow and each saying so.
Instead the first command that compiles anything says so (the command line's
notice, ``cli/__init__.py``) and, its own work done, compiles every other
kernel the commands and the drafting objects call, by running each on tiny
inputs (:func:`exercise`, one part per process so that the cores share the
work); then it leaves a mark, and later commands only load. The mark's name
holds what decides whether numba's cache still holds: ngramdraft's version,
its sources' sizes and times, numba's cache folder. After an upgrade or an
edit the next command compiles again, and says so again.
"""

import contextlib
import functools
import io
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import xxhash

from .._version import __version__
from ..drafting.rulesets import RULE_SETS, rule_set
from ..files.folders import cache_dir

PACKAGE = Path(__file__).resolve().parents[1]
NOTICE = (
    "ngramdraft: compiling the kernels, once for this installation "
    "(a minute or two; later runs load them in under a second)"
)
# A compilation after the mark: a kind of input the exercise does not make.
NOTICE_AGAIN = "ngramdraft: compiling a kernel this run needs (once: later runs load it)"


def mark() -> Path:
    """The file whose presence says this installation's kernels are compiled."""
    sources = sorted(PACKAGE.rglob("*.py"))
    h = xxhash.xxh3_64(__version__.encode())
    for path in sources:
        st = path.stat()
        h.update(f"{path.relative_to(PACKAGE)} {st.st_size} {st.st_mtime_ns}\n".encode())
    where = os.environ.get("NUMBA_CACHE_DIR", "default")
    h.update(where.encode())
    return cache_dir() / "compiled" / f"{h.hexdigest()}.done"


def compiled() -> bool:
    """Whether this installation's kernels were all compiled (and its sources not changed)."""
    return mark().exists()


def compile_the_rest() -> None:
    """Compile every kernel not compiled yet, then mark the installation."""
    done = mark()
    parts = list(PARTS)
    workers = max(1, min(len(parts), os.cpu_count() or 1))
    # Fresh processes (spawn): each compiles its part and writes numba's cache,
    # which this process and every later one then load.
    # Imported here: every command imports this module, few compile (multiprocessing: 20 ms).
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    with ProcessPoolExecutor(workers, mp_context=get_context("spawn")) as pool:
        for _ in pool.map(exercise, parts):
            pass
    with contextlib.suppress(OSError):  # a read-only home: the notice again next time
        done.parent.mkdir(parents=True, exist_ok=True)
        done.touch()


def exercise(part: str) -> None:
    """Run one part's entry points on tiny inputs, in a folder that is then removed."""
    with tempfile.TemporaryDirectory(prefix="ngramdraft-compile-") as folder:
        PARTS[part](Path(folder))


def _rule_set(name: str, folder: Path) -> None:
    """A rule set's own kernels, as its package's ``exercise`` runs them."""
    rule_set(name).exercise(folder)


def _commands(folder: Path) -> None:
    """The commands' own paths (token files in, every kind of file out)."""
    from ..drafting.practice import practice_tokens
    from .parser import parser

    t, s, x, b = (str(folder / name) for name in ("t.i32", "s.ngd", "x.ngd", "s.bin"))
    practice_tokens().astype("<i4").tofile(t)
    commands = [
        ["build-static", t, "-o", s, "-q"],
        ["build-static", t, "--suffix", "-o", x, "-q"],
        ["merge-static", s, s, "-o", str(folder / "m.ngd"), "-q"],
        ["replay", t, "--static", s, "-c", "256", "-q"],
        ["replay", t, "--rules", "suffix", "--static", x, "-c", "256", "-q"],
        ["convert", s, "--to-llamacpp", "-o", b],
        ["convert", b, "-o", str(folder / "c.ngd")],
        ["merge-dynamic", b, "-o", str(folder / "d.ngd")],
        ["inspect", s, "--verify"],
        ["inspect", x, "--verify"],
    ]
    with contextlib.redirect_stdout(io.StringIO()):
        for argv in commands:
            args = parser().parse_args(argv)
            args.run(args)


# One part per rule set of the registry (drafting/rulesets.py), and the commands'.
PARTS: dict[str, Callable[[Path], None]] = {
    **{name: functools.partial(_rule_set, name) for name in RULE_SETS},
    "commands": _commands,
}
