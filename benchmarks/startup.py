"""A fresh process's start: ``import ngramdraft`` and a whole small replay, wall time.

    python benchmarks/startup.py [--rounds 5] [--json]

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
  initializes numba's CPU target, which this does not count).

numba's cache is warmed by one untimed run first, so the figures are every
later run's. Variants interleave over rounds; the table gives the best of
the rounds (the figure the issue asks for: best of three) and the median
with its range. Results: ``benchmarks/results/startup/STAMP.{md,json}``.
"""

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, harness

VARIANTS = ("python", "numba", "import", "replay")
TOKENS = 20_000


def _inputs(smoke):
    """(token file, its token count, static cache path) of the replay."""
    n = 2_000 if smoke else TOKENS
    tokens = corpora.DATA / f"startup-{n}.i32"
    if not tokens.exists():
        corpora.DATA.mkdir(parents=True, exist_ok=True)
        corpora.test_stream(n).astype("<i4").tofile(tokens)
    static = corpora.static_cache(1) if smoke else corpora.parity_static()
    return tokens, tokens.stat().st_size // 4, static.path


def command(variant, tokens, static):
    if variant == "python":
        return [sys.executable, "-c", "pass"]
    if variant == "numba":
        return [sys.executable, "-c", "import numba"]
    if variant == "import":
        return [sys.executable, "-c", "import ngramdraft"]
    return [sys.executable, "-m", "ngramdraft", "replay", str(tokens), "--static", str(static)]


def timed(argv):
    t0 = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - t0


def markdown(result):
    lines = [
        "# A fresh process's start",
        "",
        f"Wall time of a new process, start to exit; {result['rounds']} rounds, interleaved, "
        "numba's cache warm.",
        "",
        "| command | best s | median s (range) |",
        "|---|---:|---:|",
    ]
    for v in result["variants"]:
        s = result["wall"][v]
        lines.append(f"| `{v}` | {s['min']:.3f} | {harness.fmt(s, '.3f')} |")
    return "\n".join(lines) + "\n"


def main():
    ap = harness.parser(__doc__.split("\n")[0], rounds=5)
    args = ap.parse_args()
    started, quiet = time.time(), harness.Quiet()
    if args.smoke:
        args.rounds = 1
    tokens, n_tokens, static = _inputs(args.smoke)
    argvs = {v: command(v, tokens, static) for v in VARIANTS}
    timed(argvs["replay"])  # compiles or loads the kernels: numba's cache warm from here on
    times = {v: [] for v in VARIANTS}
    for _, v in harness.rounds(VARIANTS, args.rounds):
        times[v].append(timed(argvs[v]))
    result = {
        "rounds": args.rounds,
        "tokens": n_tokens,
        "static": Path(static).name,
        "variants": list(VARIANTS),
        "wall": {v: harness.spread(t) for v, t in times.items()},
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
