"""Opt-in policies on the replay: acceptance, and speed under the engine's measured pass costs.

    python benchmarks/policy.py [--e2e RESULTS.json] [--tokens N] [--json]

Replays ``benchmarks/e2e.py``'s three workloads (open-ended, edit, templated)
through a Drafter with the static cache, teacher-forced as e2e does: at each
step the draft is accepted up to the first token that differs from the text,
plus the model's own token. No model runs, so every policy sees exactly the
same text. Policies:

* ``exact``: llama.cpp's rules (no policy);
* ``adaptive``: ``AdaptiveLength()``, the default of the opt-in policy;
* ``adaptive-length``: ``AdaptiveLength(off_below=0)``, the draft length alone;
* ``auto-off``: ``AdaptiveLength(n_min=8)``, full-length drafts and the pause alone;
* ``cost-aware``: ``CostAwareLength`` given the same pass costs the speed is
  priced with (a user measures them on their engine once).

Speed comes from the cost of a forward pass over k tokens that
``benchmarks/e2e.py`` measured on the engine (``batch_cost_s`` in its results
file, the newest by default): a run's time is the sum, over its passes, of
the cost of a pass over 1 + drafted tokens; the speedup is the time of one
pass per token over that. The passes are the replay's, the costs the
engine's: the same arithmetic e2e's tokens per second come from, without its
noise. Results: ``benchmarks/results/<stamp>-policy.{json,md}``.
"""

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import corpora  # noqa: E402
import e2e  # noqa: E402

POLICIES = ("exact", *e2e.POLICIES)


def replay(requests, static, name, pass_cost):
    """(tokens, passes, drafted, accepted, per-pass draft lengths) of one workload."""
    from ngramdraft import Drafter, NgramCache

    policy = None if name == "exact" else e2e.make_policy(name, pass_cost)
    drafter = Drafter(static=static, dynamic=NgramCache(), n_draft=e2e.N_DRAFT, policy=policy)
    tokens = passes = drafted = accepted = 0
    lengths = []
    for prompt, text in requests:
        drafter.start([*prompt, text[0]])
        pos = 0
        while pos < len(text) - 1:
            draft = drafter.draft().tolist()[: len(text) - 2 - pos]
            n = 0
            while n < len(draft) and draft[n] == text[pos + 1 + n]:
                n += 1
            drafter.accept(text[pos + 1 : pos + n + 2])
            passes += 1
            drafted += len(draft)
            accepted += n
            lengths.append(len(draft))
            pos += n + 1
        drafter.finish()
        tokens += len(text) - 1
    return tokens, passes, drafted, accepted, lengths


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--e2e", type=Path, help="an e2e results file (default: the newest)")
    ap.add_argument("--tokens", type=int, default=2000, help="tokens per workload (2000)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()
    source = args.e2e or sorted(corpora.results_dir().glob("*-e2e.json"))[-1]
    cost = {int(k): v for k, v in json.loads(source.read_text())["batch_cost_s"].items()}
    static = e2e.static_cache(False)
    static.prefault().done.wait()
    rows = []
    for workload in e2e.WORKLOADS:
        requests = e2e.MAKERS[workload](args.tokens)
        for name in POLICIES:
            pass_cost = [cost[k] for k in sorted(cost)]
            tokens, passes, drafted, accepted, lengths = replay(requests, static, name, pass_cost)
            seconds = sum(cost[1 + k] for k in lengths)
            rows.append(
                {
                    "workload": workload,
                    "policy": name,
                    "tokens": tokens,
                    "passes": passes,
                    "drafted": drafted,
                    "accepted": accepted,
                    "acceptance": accepted / drafted if drafted else 0.0,
                    "tokens_per_pass": tokens / passes,
                    "speedup": tokens * cost[1] / seconds,
                }
            )
            print(f"{workload:<11} {name:<9} {rows[-1]['speedup']:.3f}x", file=sys.stderr)
    result = {"costs_from": source.name, "n_draft": e2e.N_DRAFT, "rows": rows}
    corpora.save_results("policy", result, markdown, args.json)


def markdown(result):
    lines = [
        f"# Policies on the replay; pass costs from {result['costs_from']}",
        "",
        "| workload | policy | passes | drafted | accepted | acceptance | tokens/pass "
        "| speedup (engine's pass costs) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['workload']} | {r['policy']} | {r['passes']} | {r['drafted']} "
            f"| {r['accepted']} | {r['acceptance']:.0%} | {r['tokens_per_pass']:.2f} "
            f"| {r['speedup']:.2f}x |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
