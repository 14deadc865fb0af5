"""Opt-in policies on the replay: acceptance, and speed under an engine's measured pass costs.

    python benchmarks/policy.py [--costs RESULTS.json] [--tokens 2000] [--smoke]

Replays the teacher-forced workloads (open-ended, edit, templated) through a
``Drafter`` with the static cache: at each step the draft is accepted up to
the first token that differs from the text, plus the model's own token. No
model runs, so every policy sees exactly the same text. Policies:

* ``exact``: llama.cpp's rules (no policy);
* ``adaptive``: ``AdaptiveLength()``, the default of the opt-in policy;
* ``adaptive-length``: ``AdaptiveLength(off_below=0)``, the draft length alone;
* ``auto-off``: ``AdaptiveLength(n_min=8)``, full-length drafts and the pause alone;
* ``cost-aware``: ``CostAwareLength`` given the pass costs the speed is priced
  with (as a user who measured them once on the engine would).

Speed comes from a pass-cost curve an engine benchmark measured (the
``pass_cost`` of a ``real_model`` results file, the newest by default; a smoke
run uses a made-up curve): a run's time is the sum, over its passes, of the
cost of a pass over 1 + drafted tokens; the speedup is the time of one pass
per token over that. The passes are the replay's, the costs the engine's.

Results: ``benchmarks/results/policy/STAMP.{md,json}``.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, harness, workloads

N_DRAFT = 8
ADAPTIVE = {"adaptive": {}, "adaptive-length": {"off_below": 0.0}, "auto-off": {"n_min": N_DRAFT}}
POLICIES = ("exact", *ADAPTIVE, "cost-aware")
WORKLOADS = ("open-ended", "edit", "templated")
SMOKE_COST = {k: 1.0 + 0.4 * (k - 1) for k in range(1, N_DRAFT + 2)}


def make_policy(name, pass_cost):
    from ngramdraft import AdaptiveLength, CostAwareLength

    if name == "exact":
        return None
    if name == "cost-aware":
        return CostAwareLength(pass_cost)
    return AdaptiveLength(**ADAPTIVE[name])


def replay(requests, static, policy):
    """(tokens, passes, drafted, accepted, per-pass draft lengths) of one workload."""
    from ngramdraft import Drafter, NgramCache

    drafter = Drafter(static=static, dynamic=NgramCache(), n_draft=N_DRAFT, policy=policy)
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
            passes, drafted, accepted = passes + 1, drafted + len(draft), accepted + n
            lengths.append(len(draft))
            pos += n + 1
        drafter.finish()
        tokens += len(text) - 1
    return tokens, passes, drafted, accepted, lengths


def _costs(path):
    """{k: seconds} of the newest (or the given) real_model results' first model's curve."""
    if path is None:
        found = sorted((harness.RESULTS / "real_model").glob("*.json"))
        if not found:
            raise SystemExit("no real_model results to take pass costs from: give --costs FILE")
        path = found[-1]
    curve = next(iter(json.loads(Path(path).read_text())["pass_cost"].values()))
    return {int(k): v for k, v in curve.items()}, Path(path).name


def main():
    ap = harness.parser(__doc__.splitlines()[0], rounds=1)
    ap.add_argument("--costs", type=Path, help="a real_model results file (default: newest)")
    ap.add_argument("--tokens", type=int, help="tokens per workload (2000)")
    args = ap.parse_args()
    started = time.time()
    corpora.SMOKE = args.smoke
    if args.smoke:
        cost, source, args.tokens = SMOKE_COST, "a made-up curve (smoke)", args.tokens or 200
    else:
        cost, source = _costs(args.costs)
    sizes = sorted(cost)  # curve[k]: a pass over 1 + k tokens
    curve = np.interp(range(1, N_DRAFT + 2), sizes, [cost[k] for k in sizes]).tolist()
    static = corpora.static_cache(1 if args.smoke else corpora.FULL_MB)
    static.prefault().wait()
    rows = []
    for workload in WORKLOADS:
        requests = workloads.TEXTS[workload](args.tokens or 2000)
        for name in POLICIES:
            tokens, passes, drafted, accepted, lengths = replay(
                requests, static, make_policy(name, curve)
            )
            seconds = sum(curve[k] for k in lengths)  # a pass over 1 + k tokens: curve[k]
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
                    "speedup": tokens * curve[0] / seconds,
                }
            )
            print(f"{workload:<11} {name:<15} {rows[-1]['speedup']:.3f}x", file=sys.stderr)
    result = {"costs_from": source, "n_draft": N_DRAFT, "rows": rows}
    harness.save("policy", result, markdown, smoke=args.smoke, as_json=args.json, started=started)


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
