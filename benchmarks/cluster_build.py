"""Distributed build: the 541 MB corpus on Dask (local:1, local:2) against the single-machine build.

    python benchmarks/cluster_build.py [--rounds R] [--smoke]

Every variant builds the static cache of the same token file (the 541 MB
Gutenberg training text, Llama-3 tokens; ``--smoke``: its first MB) in a
fresh process, interleaved over rounds: ``single`` (the single-machine
build), ``local:1`` and ``local:2`` (a LocalCluster of 1 or 2 worker
processes, started before the clock; ``local:2:1G`` with a memory limit of
1 GiB per worker, which Dask enforces and the build sizes its tasks for).
Reported per variant: wall time (median and range), peak RSS of the
process (single) or of each worker, the bytes workers sent (to each other
and to the client) and the bytes the client received; and whether every
output is the single-machine file byte for byte. Results:
``benchmarks/results/cluster_build/STAMP.{json,md}``.
"""

import hashlib
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, harness

VARIANTS = ("single", "local:1", "local:2", "local:2:1G")  # local:N[:per-worker memory limit]


def token_file(smoke):
    return corpora.prefix_file(1 if smoke else corpora.FULL_MB)


def run(variant, smoke, out):
    from ngramdraft import build_static, build_static_distributed

    tokens = token_file(smoke)
    if variant == "single":
        t0 = time.perf_counter()
        build_static(tokens, out)
        seconds = time.perf_counter() - t0
        rss = [resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024]
        sent = received = 0
    else:
        import distributed

        _, n, *limit = variant.split(":")
        memory_limit = int(limit[0].rstrip("G")) << 30 if limit else None
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
            client.run(lambda: __import__("ngramdraft").StaticCache)  # imports off the clock
            t0 = time.perf_counter()
            cache = build_static_distributed([tokens], out, client, memory_limit=memory_limit)
            seconds = time.perf_counter() - t0

            def peak():
                return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

            def sent_bytes(dask_worker):
                return dask_worker.transfer_outgoing_bytes_total

            rss = sorted(client.run(peak).values())
            sent = sum(client.run(sent_bytes).values())
            # What the client received: each partition's grouped arrays.
            received = len(cache) * (8 + 8) + cache.n_entries * (4 + 4)
    return {
        "variant": variant,
        "seconds": seconds,
        "peak_rss_mb": rss,
        "worker_bytes_sent": sent,
        "client_bytes_received": received,
        "md5": hashlib.md5(Path(out).read_bytes()).hexdigest(),
    }


def work(spec):
    corpora.SMOKE = spec["smoke"]
    return run(spec["variant"], spec["smoke"], spec["out"])


def main():
    ap = harness.parser(__doc__.splitlines()[0], rounds=2)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args()
    if harness.worker_main(args, work):
        return
    started, quiet = time.time(), harness.Quiet()
    corpora.SMOKE = args.smoke
    if args.smoke:
        args.rounds, args.variants = 1, "single,local:1"
    token_file(args.smoke)
    variants = args.variants.split(",")
    runs = []
    for r, variant in harness.rounds(variants, args.rounds):
        out = corpora.DATA / f"dist-{variant.replace(':', '')}.ngd"
        result = harness.fresh(__file__, {"variant": variant, "smoke": args.smoke, "out": str(out)})
        result["round"] = r
        runs.append(result)
        print(
            f"round {r + 1}/{args.rounds} {variant:<8} {result['seconds']:.1f} s", file=sys.stderr
        )
    table = {}
    for variant in variants:
        mine = [x for x in runs if x["variant"] == variant]
        table[variant] = {
            "seconds": harness.spread([x["seconds"] for x in mine]),
            "peak_rss_mb": mine[-1]["peak_rss_mb"],
            "worker_bytes_sent": mine[-1]["worker_bytes_sent"],
            "client_bytes_received": mine[-1]["client_bytes_received"],
        }
    result = {
        "corpus": "first MB (smoke)" if args.smoke else "541 MB Gutenberg training text",
        "tokens_bytes": os.path.getsize(token_file(args.smoke)),
        "rounds": args.rounds,
        "identical": len({x["md5"] for x in runs}) == 1,
        "variants": table,
        "runs": runs,
    }
    harness.save(
        "cluster_build",
        result,
        markdown,
        smoke=args.smoke,
        as_json=args.json,
        started=started,
        quiet=quiet,
    )


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
            f"| {variant} | {harness.fmt(v['seconds'], '.1f')} | {rss} "
            f"| {v['worker_bytes_sent'] / 1e6:.0f} | {v['client_bytes_received'] / 1e6:.0f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
