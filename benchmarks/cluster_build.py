"""Distributed build: the 541 MB corpus on Dask (local:1, local:2) against the single-machine build.

    python benchmarks/cluster_build.py [--quick] [--rounds R] [--json]

Every variant builds the static cache of the same token file (the 541 MB
Gutenberg training text, Llama-3 tokens; ``--quick``: its first 25 MB) in a
fresh process, interleaved over rounds: ``single`` (the single-machine
build), ``local:1`` and ``local:2`` (a LocalCluster of 1 or 2 worker
processes, started before the clock; ``local:2:1G`` with a memory limit of
1 GiB per worker, which Dask enforces and the build sizes its tasks for).
Reported per variant: wall time (median and range), peak RSS of the
process (single) or of each worker, the bytes workers sent (to each other
and to the client) and the bytes the client received; and whether every
output is the single-machine file byte for byte. Results:
benchmarks/results/<stamp>-distributed.{json,md}.
"""

import argparse
import hashlib
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpora  # noqa: E402

VARIANTS = ("single", "local:1", "local:2", "local:2:1G")  # local:N[:per-worker memory limit]


def token_file(quick):
    full = corpora.DATA / f"train-{corpora.FULL_MB}M.{corpora.TOKENIZER}.i32"
    if not full.exists():
        corpora.full_tokens()  # tokenizes the training text once
    if not quick:
        return full
    path = corpora.DATA / "train-25M.llama3.i32"
    if not path.exists():
        n = os.path.getsize(full) // 4 * 25 // corpora.FULL_MB
        np.fromfile(full, dtype="<i4", count=n).tofile(path)
    return path


def run(variant, quick, out):
    from ngramdraft.build.corpus import Corpus
    from ngramdraft.build.local import build_static
    from ngramdraft.cli.args import parse_size

    corpus = Corpus.of([token_file(quick)])
    if variant == "single":
        t0 = time.perf_counter()
        build_static(corpus.triples(), out, meta=corpus.meta())
        seconds = time.perf_counter() - t0
        rss = [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]
        sent = received = 0
    else:
        import distributed

        from ngramdraft.build import distributed as D

        _, n, *limit = variant.split(":")
        memory_limit = parse_size(limit[0]) if limit else None
        with (
            distributed.LocalCluster(
                n_workers=int(n),
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                memory_limit=memory_limit or "auto",
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            client.run(lambda: __import__("ngramdraft.kernels.triples"))  # imports off the clock
            t0 = time.perf_counter()
            header = D.build(client, corpus, out, memory_limit=memory_limit)
            seconds = time.perf_counter() - t0

            def peak():
                return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

            def sent_bytes(dask_worker):
                return dask_worker.transfer_outgoing_bytes_total

            rss = sorted(client.run(peak).values())
            sent = sum(client.run(sent_bytes).values())
            # What the client received: each partition's grouped arrays.
            received = header.n_keys * (8 + 8) + header.n_entries * (4 + 4)
    return {
        "variant": variant,
        "seconds": seconds,
        "peak_rss_mb": rss,
        "worker_bytes_sent": sent,
        "client_bytes_received": received,
        "md5": hashlib.md5(Path(out).read_bytes()).hexdigest(),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="the first 25 MB, one round")
    ap.add_argument("--rounds", type=int, help="rounds (default 2; 1 with --quick)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        spec = json.loads(args.worker)
        corpora.QUICK = spec["quick"]
        print(json.dumps(run(spec["variant"], spec["quick"], spec["out"])))
        return
    corpora.QUICK = args.quick
    token_file(args.quick)
    rounds = args.rounds or (1 if args.quick else 2)
    runs = []
    t_start = time.time()
    for r in range(rounds):
        order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
        for variant in order:
            out = corpora.DATA / f"dist-{variant.replace(':', '')}.ngd"
            spec = {"variant": variant, "quick": args.quick, "out": str(out)}
            result = corpora.worker(__file__, spec)
            result["round"] = r
            runs.append(result)
            print(f"round {r + 1}/{rounds} {variant:<8} {result['seconds']:.1f} s", file=sys.stderr)
    table = {}
    for variant in VARIANTS:
        mine = [x for x in runs if x["variant"] == variant]
        seconds = [x["seconds"] for x in mine]
        table[variant] = {
            "seconds": float(np.median(seconds)),
            "range": [min(seconds), max(seconds)],
            "peak_rss_mb": mine[-1]["peak_rss_mb"],
            "worker_bytes_sent": mine[-1]["worker_bytes_sent"],
            "client_bytes_received": mine[-1]["client_bytes_received"],
        }
    result = {
        "corpus": "first 25 MB" if args.quick else "541 MB Gutenberg training text",
        "tokens_bytes": os.path.getsize(token_file(args.quick)),
        "rounds": rounds,
        "identical": len({x["md5"] for x in runs}) == 1,
        "variants": table,
        "runs": runs,
        "seconds": time.time() - t_start,
    }
    name = "distributed-quick" if args.quick else "distributed"
    corpora.save_results(name, result, markdown, args.json)


def markdown(result):
    lines = [
        f"# Distributed build: {result['corpus']} ({result['tokens_bytes'] / 1e6:.0f} MB of "
        f"tokens), {result['rounds']} round(s); outputs identical: {result['identical']}",
        "",
        "| build | wall s (range) | peak RSS MB (per worker) | worker bytes sent MB "
        "| client received MB |",
        "|---|---:|---:|---:|---:|",
    ]
    for variant, v in result["variants"].items():
        rss = ", ".join(f"{x:.0f}" for x in v["peak_rss_mb"])
        lines.append(
            f"| {variant} | {v['seconds']:.1f} ({v['range'][0]:.1f}-{v['range'][1]:.1f}) | {rss} "
            f"| {v['worker_bytes_sent'] / 1e6:.0f} | {v['client_bytes_received'] / 1e6:.0f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
