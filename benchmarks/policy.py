"""Policies on a replay: acceptance, and speed under an engine's measured pass costs.

    python benchmarks/policy.py [--costs RESULTS.json] [--tokens 2000] [--smoke]
    python benchmarks/policy.py --outputs RESULTS.json [--costs RESULTS.json | --measure MODEL]

No model runs, so every policy sees exactly the same text: at each step the
draft is accepted up to the first token that differs from the text, plus the
model's own token. Speed comes from a pass-cost curve an engine benchmark
measured (the ``pass_cost`` of a ``real_model`` results file; a smoke run uses
a made-up curve): a run's time is the sum, over its passes, of the cost of a
pass over 1 + submitted tokens; the speedup is the time of one pass per token
over that (the *allowed* speedup of ``real_model.py``). The passes are the
replay's, the costs the engine's.

Two texts:

* by default, the teacher-forced workloads (open-ended, edit, templated)
  through llama.cpp's rules with the static cache, 8 tokens, and the policies
  ``exact`` (none), ``adaptive`` (``AdaptiveLength()``), ``adaptive-length``
  (``off_below=0``: the length alone), ``auto-off`` (``n_min=8``: the pause
  alone) and ``cost-aware`` (``CostAwareLength`` given the curve);
* ``--outputs``: a trained model's own answers, the plain engine's outputs
  that a ``real_model`` run recorded (its prompts made again with the model's
  chat template), every request of a workload in order through one drafter
  per rule set and workload (with ``--carry``, one through every workload in
  turn, as one server serves them), each drafting its engine default
  (``ENGINE_N_DRAFT``: llama.cpp's 8 tokens, the suffix rules' 64, or fewer
  where the curve stops sooner), priced at that run's curve (or ``--costs``'s:
  another run's, measured on a quieter machine; or ``--measure``'s: the
  curve measured now, as ``ngramdraft serve`` loads the model, with flash
  attention, to 65 tokens). Policies: ``whole`` (none),
  ``given`` (``CostAwareLength`` given the curve), ``learned`` (what an engine
  user gets: ``CostAwareLength()`` told the load's timed passes and each pass
  at the curve's cost, as the adapter's clock tells it), ``untimed`` (the
  same, no pass timed at load) and ``oracle``, which submits exactly the
  tokens that will be accepted: no drafted token wasted, what knowing the
  future makes of these drafts (not a bound on every policy: where a long
  pass costs more per token than a short one, cutting a right draft can
  do better).

Results: ``benchmarks/results/policy/STAMP.{md,json}``.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, engines, harness, workloads

N_DRAFT = 8
ADAPTIVE = {"adaptive": {}, "adaptive-length": {"off_below": 0.0}, "auto-off": {"n_min": N_DRAFT}}
POLICIES = ("exact", *ADAPTIVE, "cost-aware")
WORKLOADS = ("open-ended", "edit", "templated")
RULES = {"llamacpp": 8, "suffix": 64}  # each rule set's engine draft length (ENGINE_N_DRAFT)
OUTPUT_POLICIES = ("whole", "given", "learned", "untimed", "oracle")
TIMES = 3  # timings of each size at load (the adapter's TIMED_TO_TRUST)
SMOKE_COST = {k: 1.0 + 0.4 * (k - 1) for k in range(1, 34)}


def make_policy(name, pass_cost):
    from ngramdraft import AdaptiveLength, CostAwareLength

    if name in ("exact", "whole", "oracle"):
        return None
    if name in ("cost-aware", "given"):
        return CostAwareLength(pass_cost)
    if name in ("learned", "untimed"):
        return CostAwareLength()
    return AdaptiveLength(**ADAPTIVE[name])


def replay(requests, drafter, curve, *, oracle=False):
    """(tokens, passes, drafted, accepted, cost) of ``drafter`` over (prompt, text) requests.

    Each pass costs ``curve[k]`` for k submitted tokens, and a drafter whose
    policy learns pass costs is told so; ``oracle`` submits exactly the
    tokens that will be accepted.
    """
    tokens = passes = drafted = accepted = 0
    cost = 0.0
    for prompt, text in requests:
        drafter.start([*prompt, text[0]])
        pos = 0
        while pos < len(text) - 1:
            draft = drafter.draft().tolist()[: len(text) - 2 - pos]
            n = 0
            while n < len(draft) and draft[n] == text[pos + 1 + n]:
                n += 1
            submitted = n if oracle else len(draft)
            drafter.accept(text[pos + 1 : pos + n + 2])
            drafter.observe_pass(submitted + 1, curve[submitted])
            passes, drafted, accepted = passes + 1, drafted + submitted, accepted + n
            cost += curve[submitted]
            pos += n + 1
        drafter.finish()
        tokens += len(text) - 1
    return tokens, passes, drafted, accepted, cost


def _row(workload, policy, figures, **extra):
    tokens, passes, drafted, accepted, cost = figures
    return {
        "workload": workload,
        **extra,
        "policy": policy,
        "tokens": tokens,
        "passes": passes,
        "drafted": drafted,
        "accepted": accepted,
        "acceptance": accepted / drafted if drafted else 0.0,
        "tokens_per_pass": tokens / passes,
        "speedup": tokens / cost,
    }


def teacher_forced(curve, n_tokens, smoke):
    """The teacher-forced workloads through llama.cpp's rules and every policy."""
    from ngramdraft import Drafter, NgramCache

    static = corpora.static_cache(1 if smoke else corpora.FULL_MB)
    static.prefault().wait()
    rows = []
    for workload in WORKLOADS:
        requests = workloads.TEXTS[workload](n_tokens)
        for name in POLICIES:
            policy = make_policy(name, curve[: N_DRAFT + 1])
            drafter = Drafter(static=static, dynamic=NgramCache(), n_draft=N_DRAFT, policy=policy)
            rows.append(_row(workload, name, replay(requests, drafter, curve)))
            print(f"{workload:<11} {name:<15} {rows[-1]['speedup']:.3f}x", file=sys.stderr)
    return rows


def recorded(results, smoke):
    """{workload: [(prompt, output)]}: the plain engine's answers in a real_model run, its
    prompts made again as the run made them (the earlier answers in each session's turns).
    A smoke run takes the teacher-forced workloads' texts instead."""
    if smoke:
        return {w: workloads.TEXTS[w](200) for w in WORKLOADS}
    if results.get("benchmark") == "servers":
        return served(results)
    import llama_cpp

    from ngramdraft.integrations.llama_cpp import chat_prompt

    run = next(r for r in results["runs"] if r["drafter"] == "none")
    path = engines.gguf(run["spec"]["model"], run["spec"].get("quantization"))
    vocab = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
    out = {}
    for o in results["outputs"]:
        if o["drafter"] != "none":
            continue
        requests, answers = [], {}
        sessions = workloads.chat(o["workload"], results["smoke"])
        for row in o["rows"]:
            said = answers.setdefault(row["session"], [])
            prompt = chat_prompt(vocab, sessions[row["session"]].messages(said))
            requests.append((prompt, row["output"]))
            said.append(vocab.detokenize(row["output"]).decode("utf-8", errors="replace"))
        out[o["workload"]] = requests
    return out


def served(results):
    """{workload: [(prompt, output)]}: plain llama-server's requests and answers in one round
    of a servers run (its first model), tokenized as the server tokenized them."""
    run = next(r for r in results["runs"] if r["config"] == "llama-server")
    vocab = engines.vocabulary(engines.gguf(run["model"]))
    out = {}
    for row in run["rows"]:
        out.setdefault(row["workload"], []).append(
            (engines.prompt_tokens(vocab, row["prompt"]), engines.answer_tokens(vocab, row["text"]))
        )
    return out


def model_outputs(results, curve, smoke, carry=False):
    """The recorded answers through each rule set and output policy: a fresh drafter per
    workload, or with ``carry`` one through every workload in turn, as one server serves
    them (what it learned, and its earlier requests, carried from one to the next)."""
    from ngramdraft import Drafter
    from ngramdraft.integrations.llama_cpp import sizes_timed_at_load

    rows, kept = [], {}
    for workload, requests in recorded(results, smoke).items():
        for rules, engine_n_draft in RULES.items():
            n_draft = min(engine_n_draft, len(curve) - 1)
            for name in OUTPUT_POLICIES:
                drafter = kept.get((rules, name)) if carry else None
                if drafter is None:
                    policy = make_policy(name, curve[: n_draft + 1])
                    drafter = kept[rules, name] = Drafter(
                        rules=rules, n_draft=n_draft, policy=policy
                    )
                    if name == "learned":  # what the adapter times when the model loads
                        for k in sizes_timed_at_load(n_draft):
                            for _ in range(TIMES):
                                drafter.observe_pass(k, curve[k - 1])
                figures = replay(requests, drafter, curve, oracle=name == "oracle")
                rows.append(_row(workload, name, figures, rules=rules))
                print(
                    f"{workload:<11} {rules:<9} {name:<8} {rows[-1]['speedup']:.3f}x",
                    file=sys.stderr,
                )
    return rows


def _costs(path):
    """({k: seconds} of a real_model run's first model's curve, its file name, the results)."""
    if path is None:
        found = sorted((harness.RESULTS / "real_model").glob("*.json"))
        if not found:
            raise SystemExit("no real_model results to take pass costs from: give --costs FILE")
        path = found[-1]
    results = json.loads(Path(path).read_text())
    curve = next(iter(results["pass_cost"].values()))
    return {int(k): v for k, v in curve.items()}, Path(path).name, results


def measured(model):
    """{k: seconds} of passes over 1 .. 65 tokens of ``model``, loaded as ``serve`` loads it."""
    from ngramdraft.integrations.llama_cpp import load_llama, physical_cores
    from ngramdraft.integrations.llama_cpp_measure import measure_pass_cost

    threads = physical_cores()
    llama = load_llama(
        engines.gguf(model), n_ctx=2048, n_threads=threads, n_threads_batch=threads,
        flash_attn=True,
    )  # fmt: skip
    costs = measure_pass_cost(llama, 65, context=1024, reps=3)
    source = f"{model} measured now (flash attention, {threads} threads)"
    return dict(enumerate(costs, start=1)), source


def main():
    ap = harness.parser(__doc__.splitlines()[0], rounds=1)
    ap.add_argument(
        "--costs",
        type=Path,
        help="a real_model results file whose pass costs to use (default: --outputs, else newest)",
    )
    ap.add_argument(
        "--measure",
        metavar="MODEL",
        help="measure MODEL's pass costs now, as `ngramdraft serve` loads it, and use them",
    )
    ap.add_argument(
        "--carry",
        action="store_true",
        help="with --outputs: one drafter through every workload in turn, as one server",
    )
    ap.add_argument("--tokens", type=int, help="tokens per workload (2000)")
    ap.add_argument(
        "--outputs",
        type=Path,
        help="a real_model results file whose answers to replay (or a servers one: plain "
        "llama-server's requests and answers, its first round)",
    )
    args = ap.parse_args()
    started = time.time()
    corpora.SMOKE = args.smoke
    if args.smoke:
        cost, source, results = SMOKE_COST, "a made-up curve (smoke)", None
    elif args.measure:
        cost, source = measured(args.measure)
        results = json.loads(args.outputs.read_text()) if args.outputs else None
    else:
        cost, source, results = _costs(args.costs or args.outputs)
        if args.outputs and args.costs:  # the answers are another file's
            results = json.loads(args.outputs.read_text())
    sizes = sorted(cost)  # curve[k]: a pass over 1 + k tokens, relative to one token
    curve = np.interp(range(1, max(sizes) + 1), sizes, [cost[k] for k in sizes])
    curve = (curve / curve[0]).tolist()
    # Kept in a real_model run's shape, so that a later run can take it with --costs.
    result = {"costs_from": source, "pass_cost": {source: {str(k): v for k, v in cost.items()}}}
    if args.outputs or args.smoke:
        result["outputs_of"] = args.outputs.name if args.outputs else "smoke texts"
        result["carry"] = args.carry
        result["outputs"] = model_outputs(results, curve, args.smoke, args.carry)
    if not args.outputs:
        n_tokens = 200 if args.smoke else args.tokens or 2000
        result["n_draft"] = N_DRAFT
        result["teacher_forced"] = teacher_forced(curve, n_tokens, args.smoke)
    harness.save("policy", result, markdown, smoke=args.smoke, as_json=args.json, started=started)


def markdown(result):
    lines = [f"# Policies on a replay; pass costs from {result['costs_from']}", ""]
    for key, title, by_rules in (
        (
            "outputs",
            f"A trained model's answers ({result.get('outputs_of')})"
            + (", one drafter through every workload in turn" if result.get("carry") else ""),
            True,
        ),
        ("teacher_forced", "The teacher-forced workloads", False),
    ):
        if key not in result:
            continue
        head, line = ("rules | ", "---|") if by_rules else ("", "")
        lines += [
            f"{title}:",
            "",
            f"| workload | {head}policy | passes | submitted | accepted | acceptance "
            "| tokens/pass | speedup (engine's pass costs) |",
            f"|---|{line}---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in result[key]:
            rules = f"{r['rules']} | " if by_rules else ""
            lines.append(
                f"| {r['workload']} | {rules}{r['policy']} | {r['passes']} | {r['drafted']} "
                f"| {r['accepted']} | {r['acceptance']:.0%} | {r['tokens_per_pass']:.2f} "
                f"| {r['speedup']:.2f}x |"
            )
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
