"""Teacher-forced draft quality and cost: llama.cpp's rules, the peers' drafters, the ceiling.

    python benchmarks/drafting.py [--rounds 3] [--tokens 2000] [--smoke]

Every drafter of ``common/drafters.py`` (each through its own code) and the
ceilings are teacher-forced on the workloads of ``common/workloads.py``
(open-ended, edit, templated, real-edit) at k = 8, 16 and 32. Figures per
(workload, drafter, k):

* tokens per pass: output tokens over passes (1.00 = no help), and its share
  of the ceiling's;
* drafted per pass and the share of drafted tokens accepted;
* cost: the drafter's time per output token (drafting and, for stateful
  drafters, being told what was accepted), in microseconds.

The corpus of the ``+static`` and ``+corpus`` drafters is the Gutenberg
training text (541 MB), the open-ended text held out from it; a corpus file
is opened once per process and its warm-up (pages mapped, checksums
checked, in a background thread) is over before the clock starts. Quality
is deterministic; costs are medians over rounds with their ranges, each
(drafter, round) a fresh process, interleaved.

Results: ``benchmarks/results/drafting/STAMP.{md,json}``.
"""

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, drafters, harness, workloads

CAPS = (8, 16, 32)
WORKLOADS = tuple(workloads.TEXTS)


def work(spec):
    """Every workload at every cap, one drafter, in this process."""
    corpora.SMOKE = spec["smoke"]
    name, n = spec["drafter"], spec["tokens"]
    made = {w: workloads.TEXTS[w](n) for w in spec["workloads"]}
    for requests in made.values():  # compiles or loads what each workload calls
        prompt, output = requests[0]
        drafters.run("warm-up", name, 8, [(prompt, output[:50])])
    return [drafters.run(w, name, k, requests) for w, requests in made.items() for k in CAPS]


def markdown(result):
    rows = result["rows"]
    lines = [
        "# Teacher-forced drafting",
        "",
        f"{result['tokens']} output tokens per workload; each (drafter, round) a fresh process, "
        "interleaved; costs are medians with ranges over rounds.",
        "",
        "| workload | k | drafter | tokens/pass | of ceiling | drafted/pass | accepted "
        "| us per output token (range) |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    ceiling = {
        (r["workload"], r["k"]): r["tokens_per_pass"] for r in rows if r["drafter"] == "ceiling"
    }
    order = {d: i for i, d in enumerate(drafters.DRAFTERS)}
    for r in sorted(rows, key=lambda r: (r["workload"], r["k"], order[r["drafter"]])):
        share = r["tokens_per_pass"] / ceiling[(r["workload"], r["k"])]
        cost = "-"
        if r["us_per_token"] is not None:
            lo, hi = r["us_per_token_range"]
            cost = f"{r['us_per_token']:.1f} ({lo:.1f}-{hi:.1f})"
        lines.append(
            f"| {r['workload']} | {r['k']} | {r['drafter']} | {r['tokens_per_pass']:.2f} "
            f"| {share:.0%} | {r['drafted_per_pass']:.2f} | {r['accepted_share']:.0%} | {cost} |"
        )
    return "\n".join(lines) + "\n"


def main():
    ap = harness.parser(__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, help="output tokens per workload (default 2000)")
    ap.add_argument("--drafters", default=",".join(drafters.DRAFTERS))
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    args = ap.parse_args()
    if harness.worker_main(args, work):
        return
    started, quiet = time.time(), harness.Quiet()
    if args.smoke:
        args.rounds, args.tokens = 1, args.tokens or 120
        args.workloads = "open-ended,edit,templated"
        args.drafters = "llama.cpp,llama.cpp+static,suffix,suffix+corpus,ceiling,ceiling-1+near"
    args.tokens = args.tokens or 2000
    corpora.SMOKE = args.smoke
    mb = 1 if args.smoke else corpora.FULL_MB
    corpora.static_cache(mb)  # built once, before any worker's clock
    corpora.suffix_corpus(mb)
    chosen = args.drafters.split(",")
    rounds_rows = []
    for r, name in harness.rounds(chosen, args.rounds):
        # The ceilings are deterministic and untimed: the first round is enough.
        if r and name in drafters.CEILINGS:
            continue
        spec = {
            "drafter": name,
            "tokens": args.tokens,
            "smoke": args.smoke,
            "workloads": args.workloads.split(","),
        }
        rounds_rows.append(harness.fresh(__file__, spec))
        print(f"round {r + 1}/{args.rounds} {name}", file=sys.stderr, flush=True)
    result = {"tokens": args.tokens, "rounds": args.rounds, "rows": drafters.summarize(rounds_rows)}
    harness.save(
        "drafting",
        result,
        markdown,
        smoke=args.smoke,
        as_json=args.json,
        started=started,
        quiet=quiet,
    )


if __name__ == "__main__":
    main()
