"""One measurement in a fresh process, printed as JSON (the scaling driver runs it).

    python benchmarks/probe.py replay TOKENS [STATIC] --n-ctx N --n-draft N [--dump F]
    python benchmarks/probe.py api    TOKENS [STATIC] --n-ctx N --n-draft N
    python benchmarks/probe.py open   STATIC
    python benchmarks/probe.py build  TOKENS OUT [--memory-limit SIZE]

A process of its own gives each figure its own peak RSS and page residency.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def peak_rss_kb():
    """This process image's peak RSS (VmHWM): ru_maxrss would carry over the
    parent's peak through fork and exec."""
    with open("/proc/self/status") as f:
        return int(next(line.split()[1] for line in f if line.startswith("VmHWM")))


def mapping_rss_kb(path):
    """Resident kB of the mappings of ``path`` in this process (/proc/self/smaps)."""
    target = str(Path(path).resolve())
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if len(head) >= 5 and "-" in head[0] and not line.startswith(("Rss", "Size")):
                inside = head[-1] == target
            elif inside and line.startswith("Rss:"):
                total += int(head[1])
    return total


def _static(path):
    from ngramdraft import StaticCache

    return StaticCache.open(path) if path else None


def cmd_replay(args):
    from ngramdraft import replay

    tokens = np.fromfile(args.tokens, "<i4")
    t0 = time.perf_counter()
    static = _static(args.static)
    t_open = time.perf_counter() - t0
    result = replay(tokens, args.n_ctx, args.n_draft, static, dump=bool(args.dump))
    if args.dump:
        result.dump.astype("<i4").tofile(args.dump)
    out = result.to_dict()
    out.update(t_open_ms=1000 * t_open, peak_rss_kb=peak_rss_kb())
    if args.static:
        out["static_resident_kb"] = mapping_rss_kb(args.static)
    return out


def cmd_api(args):
    """lookup-stats' protocol driven through Drafter.draft()/accept() from Python."""
    from ngramdraft import Drafter

    tokens = np.fromfile(args.tokens, "<i4")
    drafter = Drafter(_static(args.static), n_draft=args.n_draft)
    n_drafted = n_accept = n_calls = 0
    elapsed = 0.0
    for start in range(0, len(tokens) - args.n_ctx, args.n_ctx):
        chunk = tokens[start : start + args.n_ctx]
        drafter.start(chunk[:1])
        n_out = 1
        while n_out < args.n_ctx:
            t0 = time.perf_counter()
            draft = drafter.draft()
            n = 0
            while n < len(draft) and n_out + n < args.n_ctx and draft[n] == chunk[n_out + n]:
                n += 1
            accepted = chunk[n_out : min(n_out + n + 1, args.n_ctx)]
            drafter.accept(accepted)
            elapsed += time.perf_counter() - t0
            n_calls += 1
            n_drafted += len(draft)
            n_accept += n
            n_out += len(accepted)
        drafter.finish()
    return {
        "n_calls": n_calls,
        "n_drafted": n_drafted,
        "n_accept": n_accept,
        "t_draft_ms": 1000 * elapsed,
        "us_per_drafted": 1e6 * elapsed / max(n_drafted, 1),
        "peak_rss_kb": peak_rss_kb(),
    }


def cmd_open(args):
    t0 = time.perf_counter()
    import ngramdraft  # noqa: F401  (import is not open time)

    t1 = time.perf_counter()
    _static(args.static)
    return {"t_open_ms": 1000 * (time.perf_counter() - t1), "t_import_ms": 1000 * (t1 - t0)}


def cmd_build(args):
    from ngramdraft import StaticCache
    from ngramdraft.cli.args import parse_size
    from ngramdraft.files.tokens import TokenFile

    t0 = time.perf_counter()
    limit = parse_size(args.memory_limit) if args.memory_limit else None
    cache = StaticCache.build(TokenFile(args.tokens), args.out, memory_limit=limit)
    return {
        "t_build_s": time.perf_counter() - t0,
        "peak_rss_kb": peak_rss_kb(),
        "n_2grams": len(cache),
        "file_bytes": Path(args.out).stat().st_size,
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["replay", "api", "open", "build"])
    p.add_argument("paths", nargs="+")
    p.add_argument("--n-ctx", type=int, default=4096)
    p.add_argument("--n-draft", type=int, default=8)
    p.add_argument("--dump")
    p.add_argument("--memory-limit")
    args = p.parse_args()
    if args.mode in ("replay", "api"):
        args.tokens, args.static = args.paths[0], (args.paths[1] if len(args.paths) > 1 else None)
    elif args.mode == "open":
        args.static = args.paths[0]
    else:
        args.tokens, args.out = args.paths
    print(json.dumps(globals()[f"cmd_{args.mode}"](args)))


if __name__ == "__main__":
    sys.exit(main())
