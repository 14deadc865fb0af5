"""Cost per output token against the context's length: 1k and 64k tokens, side by side.

Each drafter (``common/drafters.py``'s, each through its own code) is started on a
prompt of the first N tokens of the held-out text and teacher-forced, as
``drafting.py`` does, over T tokens of two outputs:

* ``prose``: the text's own continuation, where drafters mostly find
  nothing: the cost of looking;
* ``copy``: the prompt's last T tokens again, one token in 40 replaced:
  the cost of drafting, accepting and finding the place again.

The cost is the drafter's time per output token (drafting and being told
what was accepted; the prompt's start is not timed). Each (drafter, context,
round) is a fresh process, interleaved; figures are medians over rounds
with their ranges, and each is also given as a multiple of llama.cpp's
rules' median in the same run (with a corpus, of theirs with the corpus's
2-gram cache; the corpus is ``drafting.py``'s, its warm-up over before the
clock starts). Results: ``benchmarks/results/context_cost/STAMP.{md,json}``.

    python benchmarks/context_cost.py [--contexts 1024,65536] [--tokens 2000] [--rounds 3]
"""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, drafters, harness

DRAFTERS = (
    "llama.cpp",
    "suffix",
    "llama.cpp+static",
    "suffix+corpus",
    "vllm-ngram",
    "suffixdecoding",
)
WITH_CORPUS = ("llama.cpp+static", "suffix+corpus")  # compared with each other
K = 8
EDIT_EVERY = 40


def requests(context, tokens, workload):
    """[(prompt, output)]: the held-out text's first ``context`` tokens, then T more."""
    stream = corpora.test_stream(context + tokens).astype(np.int32)
    prompt = stream[:context]
    if workload == "prose":
        return [(prompt, stream[context:])]
    output = prompt[-tokens:].copy()
    output[EDIT_EVERY // 2 :: EDIT_EVERY] += 1  # a replaced token now and then
    return [(prompt, output)]


def work(spec):
    corpora.SMOKE = spec["smoke"]
    drafter, context, tokens = spec["drafter"], spec["context"], spec["tokens"]
    drafters.run("warm-up", drafter, K, requests(600, 60, "copy"))  # loads its kernels
    return [
        {**drafters.run(w, drafter, K, requests(context, tokens, w)), "context": context}
        for w in ("prose", "copy")
    ]


def markdown(result):
    rows = result["rows"]
    lines = [
        "# Drafting cost against the context's length",
        "",
        f"k = {K}; each (drafter, context, round) a fresh process, interleaved; medians with "
        "ranges over rounds.",
        "",
        "| context | workload | drafter | tokens/pass | us per output token (range) "
        "| x llama.cpp's rules (with the 2-gram cache for +corpus) |",
        "|---:|---|---|---:|---:|---:|",
    ]
    base = {
        (r["context"], r["workload"], r["drafter"] in WITH_CORPUS): r["us_per_token"]
        for r in rows
        if r["drafter"] in ("llama.cpp", "llama.cpp+static")
    }
    order = {d: i for i, d in enumerate(DRAFTERS)}
    for r in sorted(rows, key=lambda r: (r["context"], r["workload"], order[r["drafter"]])):
        lo, hi = r["us_per_token_range"]
        b = base.get((r["context"], r["workload"], r["drafter"] in WITH_CORPUS))
        ratio = f"{r['us_per_token'] / b:.2f}" if b else ""
        lines.append(
            f"| {r['context']} | {r['workload']} | {r['drafter']} | {r['tokens_per_pass']:.2f} "
            f"| {r['us_per_token']:.1f} ({lo:.1f}-{hi:.1f}) | {ratio} |"
        )
    return "\n".join(lines) + "\n"


def main():
    ap = harness.parser(__doc__.split("\n")[0])
    ap.add_argument("--contexts", default="1024,65536", help="prompt lengths, in tokens")
    ap.add_argument("--tokens", type=int, default=2000, help="output tokens per workload")
    ap.add_argument("--drafters", default=",".join(DRAFTERS))
    args = ap.parse_args()
    if harness.worker_main(args, work):
        return
    started, quiet = time.time(), harness.Quiet()
    if args.smoke:
        args.rounds, args.contexts, args.tokens = 1, "1024", 100
        args.drafters = "llama.cpp,suffix,llama.cpp+static,suffix+corpus"
    corpora.SMOKE = args.smoke
    contexts = [int(c) for c in args.contexts.split(",")]
    variants = [(c, d) for c in contexts for d in args.drafters.split(",")]
    rounds_rows = []
    for _, (context, drafter) in harness.rounds(variants, args.rounds):
        spec = {"drafter": drafter, "context": context, "tokens": args.tokens}
        rounds_rows.append(harness.fresh(__file__, {**spec, "smoke": args.smoke}))
    rows = drafters.summarize(rounds_rows, ("context", "workload", "drafter"))
    result = {"k": K, "tokens": args.tokens, "rounds": args.rounds, "rows": rows}
    harness.save(
        "context_cost",
        result,
        markdown,
        smoke=args.smoke,
        as_json=args.json,
        started=started,
        quiet=quiet,
    )


if __name__ == "__main__":
    main()
