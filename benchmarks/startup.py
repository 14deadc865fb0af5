"""A fresh process's start: ``import ngramdraft`` and a whole small replay, wall time.

    python benchmarks/startup.py [--python PYTHON ...] [--src SRC ...] [--first] [--rounds 5]
        [--json]

What a user waits for before the first draft: each command runs as a new
``python -m ngramdraft`` process (the console script adds only its launcher),
timed from outside, start to exit. Variants:

* ``import``: ``python -c "import ngramdraft"`` (no kernel is loaded: numba
  is imported at the first one);
* ``replay``: ``replay`` of the parity data's first 20,000 held-out tokens
  with the 25 MB parity static cache, as llama.cpp's lookup-stats runs it:
  the kernels loaded from numba's cache, the file opened and checked, every
  draft made;
* ``python``: ``python -c pass``, the interpreter's own floor;
* ``numba``: ``python -c "import numba"``, the floor of any process that
  runs a numba kernel (loading the first kernel from numba's cache then
  initializes numba's CPU target, which this does not count);
* ``first`` (with ``--first``): ``replay`` as the first command after
  installing runs it, with an empty numba cache and no mark of a compiled
  installation (a new folder for each, every run): every kernel compiled,
  over the machine's cores (``cli/compiled.py``).

``--python`` names the interpreters to start (default: this one), e.g. a
virtual environment made by the README's install beside the test
environment: numba imports SciPy and coverage when they are installed, which
the README's install does not pull in. numba's cache is warmed by one
untimed run of each interpreter first, and the processes write and read
their bytecode as an installed package does (``PYTHONDONTWRITEBYTECODE``,
which some machines set, is left out), so the figures are every later
run's. ``--src`` puts checkouts' ``src`` folders first on the path, one
setup each (``installed``: none), for an A/B of two checkouts in one run.
Variants interleave over rounds; the table gives the best of the
rounds (the figure the issue asks for: best of three) and the median with
its range. Results: ``benchmarks/results/startup/STAMP.{md,json}``.
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, harness

VARIANTS = ("python", "numba", "import", "replay")
FIRST = "first"
TOKENS = 20_000


def _inputs(smoke):
    """(token file, its token count, static cache path) of the replay."""
    n = 2_000 if smoke else TOKENS
    tokens = corpora.DATA / f"startup-{n}.i32"
    if not tokens.exists():
        corpora.test_stream(n).astype("<i4").tofile(tokens)
    static = corpora.static_cache(1) if smoke else corpora.parity_static()
    return tokens, tokens.stat().st_size // 4, static.path


def command(setup, variant, tokens, static):
    """The argv and environment of one variant in one setup, (python, src)."""
    python, src = setup
    env = ENV if src == INSTALLED else {**ENV, "PYTHONPATH": src}
    return _argv(python, variant, tokens, static), env


def _argv(python, variant, tokens, static):
    if variant == FIRST:
        return _argv(python, "replay", tokens, static)
    if variant == "python":
        return [python, "-c", "pass"]
    if variant == "numba":
        return [python, "-c", "import numba"]
    if variant == "import":
        return [python, "-c", "import ngramdraft"]
    return [python, "-m", "ngramdraft", "replay", str(tokens), "--static", str(static)]


# An installed package's environment: its bytecode written once and read after.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
INSTALLED = "installed"  # the --src of the package the interpreter has installed


def timed(argv, env, first=False):
    """Wall seconds of one run; ``first``: in a new installation's empty caches."""
    if first:
        with tempfile.TemporaryDirectory(prefix="ngramdraft-first-") as folder:
            new = {**env, "NUMBA_CACHE_DIR": f"{folder}/numba", "NGRAMDRAFT_CACHE": folder}
            return timed(argv, new)
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env=env)
    return time.perf_counter() - t0


def label(setup):
    python, src = setup
    return python if src == INSTALLED else f"{python} with {src}"


def markdown(result):
    lines = [
        "# A fresh process's start",
        "",
        f"Wall time of a new process, start to exit; {result['rounds']} rounds, interleaved, "
        "numba's cache warm (`first`: empty, every kernel compiled), bytecode written.",
        "",
    ]
    for setup, wall in result["wall"].items():
        python = setup.split(" with ")[0]
        lines += [
            f"`{setup}` ({result['packages'][python]}):",
            "",
            "| command | best s | median s (range) |",
            "|---|---:|---:|",
        ]
        for v in result["variants"]:
            s = wall[v]
            lines.append(f"| `{v}` | {s['min']:.3f} | {harness.fmt(s, '.3f')} |")
        lines.append("")
    return "\n".join(lines)


def packages(python):
    """What of numba's optional imports an interpreter has (they cost its start)."""
    probe = (
        "import importlib.util as u; "
        "print(', '.join(f'{m} ' + ('yes' if u.find_spec(m) else 'no') "
        "for m in ('scipy', 'coverage')))"
    )
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def main():
    ap = harness.parser(__doc__.split("\n")[0], rounds=5)
    ap.add_argument(
        "--python",
        nargs="+",
        default=[sys.executable],
        metavar="PYTHON",
        help="interpreters to start, each with ngramdraft installed (default: this one)",
    )
    ap.add_argument(
        "--src",
        nargs="+",
        default=[INSTALLED],
        metavar="SRC",
        help="checkouts' src folders to run, first on the path (default: the installed one)",
    )
    ap.add_argument(
        "--first",
        action="store_true",
        help="also the first run after installing (every kernel compiled: minutes a run)",
    )
    args = ap.parse_args()
    started, quiet = time.time(), harness.Quiet()
    if args.smoke:
        args.rounds = 1
    tokens, n_tokens, static = _inputs(args.smoke)
    src = [s if s == INSTALLED else str(Path(s).resolve()) for s in args.src]
    setups = [(p, s) for p in args.python for s in src]
    variants = [*VARIANTS, *([FIRST] if args.first else [])]
    pairs = [(setup, v) for setup in setups for v in variants]
    argvs = {pair: command(*pair, tokens, static) for pair in pairs}
    for setup in setups:  # compiles or loads the kernels: numba's cache warm from here on
        timed(*argvs[setup, "replay"])
    times = {pair: [] for pair in pairs}
    for _, pair in harness.rounds(pairs, args.rounds):
        times[pair].append(timed(*argvs[pair], first=pair[1] == FIRST))
    result = {
        "rounds": args.rounds,
        "tokens": n_tokens,
        "static": Path(static).name,
        "variants": variants,
        "packages": {p: packages(p) for p in args.python},
        "wall": {
            label(setup): {v: harness.spread(times[setup, v]) for v in variants} for setup in setups
        },
    }
    harness.save(
        "startup",
        result,
        markdown,
        smoke=args.smoke,
        as_json=args.json,
        started=started,
        quiet=quiet,
    )


if __name__ == "__main__":
    main()
