"""Cost per output token against the context's length: 1k and 64k tokens, side by side.

Each drafter (``drafting.py``'s, each through its own code) is started on a
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
clock starts). Results go to
``benchmarks/results/STAMP-context-cost.{md,json}``.

    python benchmarks/context_cost.py [--contexts 1024,65536] [--tokens 2000] [--rounds 3]
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import corpora  # noqa: E402
import drafting  # noqa: E402

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


def child(drafter, context, tokens):
    rows = []
    drafting.run("warm-up", drafter, K, requests(600, 60, "copy"))  # loads its kernels
    for workload in ("prose", "copy"):
        row = drafting.run(workload, drafter, K, requests(context, tokens, workload))
        rows.append({**row, "context": context})
    print(json.dumps(rows))


def markdown(rows, args):
    lines = [
        "# Drafting cost against the context's length",
        "",
        f"`python benchmarks/context_cost.py --contexts {args.contexts} --tokens {args.tokens} "
        f"--rounds {args.rounds}`: k = {K}; each (drafter, context, round) a fresh process, "
        "interleaved; medians with ranges over rounds.",
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
        ratio = r["us_per_token"] / base[(r["context"], r["workload"], r["drafter"] in WITH_CORPUS)]
        lines.append(
            f"| {r['context']} | {r['workload']} | {r['drafter']} | {r['tokens_per_pass']:.2f} "
            f"| {r['us_per_token']:.1f} ({lo:.1f}-{hi:.1f}) | {ratio:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--contexts", default="1024,65536", help="prompt lengths, in tokens")
    ap.add_argument("--tokens", type=int, default=2000, help="output tokens per workload")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--drafters", default=",".join(DRAFTERS))
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return
    contexts = [int(c) for c in args.contexts.split(",")]
    rounds_rows = []
    for _ in range(args.rounds):
        for context in contexts:
            for d in args.drafters.split(","):
                cmd = [sys.executable, __file__, "--child", d, str(context), str(args.tokens)]
                done = subprocess.run(cmd, capture_output=True, text=True, check=True)
                rounds_rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    rows = drafting.summarize(rounds_rows, ("context", "workload", "drafter"))
    stamp = time.strftime("%Y-%m-%d-%H%M")
    out = HERE / "results"
    (out / f"{stamp}-context-cost.json").write_text(
        json.dumps({"args": vars(args), "rows": rows}, indent=1)
    )
    text = markdown(rows, args)
    (out / f"{stamp}-context-cost.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
