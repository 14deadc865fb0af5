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

Drafters (llama-cpp-python):

* ``none``: a plain ``llama_cpp.Llama``, as a user without ngramdraft runs it;
* ``lookup``: llama-cpp-python's own ``LlamaPromptLookupDecoding`` (its
  defaults), through its own loop (``logits_all=True``, without which it fails
  past ``n_batch`` positions);
* ``llamacpp``: ngramdraft, llama.cpp's rules (8 tokens), through ngramdraft's
  loop (``load_llama``); ``llamacpp-host`` the same drafts through the host's
  loop; ``llamacpp-cost`` with ``CostAwareLength()`` (opt-in);
* ``suffix``: ngramdraft's suffix rules as an engine user gets them
  (``NgramDraftModel(rules="suffix")``: 32 tokens, the engine's learned pass
  costs deciding how many to submit), through ngramdraft's loop;
  ``suffix-host`` through the host's; ``suffix-whole`` without the policy.

Also per model and round: the engine's pass-cost curve (a verification pass
over k tokens against one token, k = 1 .. 33, as ngramdraft's loop makes it),
from which each run's decode speedup *allowed* by its passes is computed
(one-token passes over the passes it made, each at the curve's cost); the
tokens per pass, and the copy ceiling's on the model's own output (the
longest earlier copy in the sequence of each next run of tokens, at the
drafter's draft length). Every output is compared with ``none``'s of the same
round; where one differs, the first differing position and the logit margin
between the two tokens there (one-token evaluation) are reported.

``--quantizations Q8_0,F16`` adds the same model requantized here with
llama.cpp's quantizer (``llama_model_quantize``, from the shipped Q4_K_M),
each a model of its own in the table.

Results: ``benchmarks/results/real_model/STAMP.{md,json}``.
"""

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, drafters, harness, workloads

THREADS = 2
N_CTX = 8192
SMOKE_MODEL = "smollm2-135m-instruct"
COST_SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 17, 21, 25, 29, 33)
DRAFTERS = (
    "none",
    "lookup",
    "llamacpp",
    "llamacpp-host",
    "llamacpp-cost",
    "suffix",
    "suffix-host",
    "suffix-whole",
)
N_DRAFT = {"llamacpp": 8, "suffix": 32, "lookup": 10}  # each drafter's longest draft


def _rules(drafter):
    return drafter.split("-")[0]


# -- the models --------------------------------------------------------------------


def model_path(name, quantization=None):
    """A trained model's GGUF (fetched by name), or a requantized copy made here once."""
    from ngramdraft import fetch_model

    path = Path(name) if name.endswith(".gguf") else fetch_model(name)
    if quantization is None:
        return path
    out = corpora.DATA / "models" / f"{path.stem}.{quantization}.gguf"
    if not out.exists():
        import llama_cpp

        out.parent.mkdir(parents=True, exist_ok=True)
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{quantization}")
        params.allow_requantize = True  # from the shipped Q4_K_M: its weights, another layout
        params.nthread = THREADS
        tmp = out.with_suffix(".part")
        if llama_cpp.llama_model_quantize(str(path).encode(), str(tmp).encode(), params):
            raise RuntimeError(f"llama_model_quantize {path} -> {quantization} failed")
        tmp.replace(out)
    return out


def _load(path, drafter):
    """(Llama, draft model) for a drafter: which Llama, which loop, which draft model."""
    import llama_cpp
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    from ngramdraft import CostAwareLength
    from ngramdraft.integrations.llama_cpp import NgramDraftModel, load_llama

    settings = {"n_ctx": N_CTX, "n_threads": THREADS, "n_threads_batch": THREADS, "verbose": False}
    if drafter == "none":
        return llama_cpp.Llama(str(path), **settings), None
    if drafter == "lookup":
        draft = LlamaPromptLookupDecoding()
    else:
        options = {"rules": _rules(drafter)}
        if drafter == "llamacpp-cost":
            options["policy"] = CostAwareLength()
        if drafter == "suffix-whole":
            options["policy"] = None
        draft = NgramDraftModel(**options)
    if drafter in ("lookup", "llamacpp-host", "suffix-host"):  # the host's own loop
        return llama_cpp.Llama(str(path), draft_model=draft, logits_all=True, **settings), draft
    return load_llama(path, draft_model=draft, **settings), draft


# -- one run (a fresh process) -----------------------------------------------------


def run(spec):
    from ngramdraft.integrations.llama_cpp import chat_prompt, generate

    path = model_path(spec["model"], spec.get("quantization"))
    llama, draft = _load(path, spec["drafter"])
    sessions = workloads.chat(spec["workload"], spec["smoke"])
    rows = []
    first = True
    for s, session in enumerate(sessions):
        answers = []
        for turn in range(len(session.turns)):
            prompt = chat_prompt(llama, session.messages(answers))
            if first and draft is not None:  # loads the drafter's kernels before any clock
                draft(np.asarray(prompt, dtype=np.intc))
                first = False
            g = generate(llama, prompt, session.max_tokens, draft)
            answers.append(g.text)
            rows.append(
                {
                    "session": s,
                    "turn": turn,
                    "label": session.labels[turn] if session.labels else "",
                    "prompt": prompt,
                    "output": g.tokens,
                    "prompt_s": g.prompt_seconds,
                    "decode_s": g.decode_seconds,
                    "passes": g.passes,
                    "drafted": g.drafted,
                    "accepted": g.accepted,
                    "draft_lengths": g.draft_lengths,
                }
            )
    return {"rows": rows}


def pass_cost(spec):
    """The engine's verification-pass cost curve on this model, k = COST_SIZES, after 1k tokens."""
    from ngramdraft.integrations.llama_cpp import load_llama, measure_pass_cost

    path = model_path(spec["model"], spec.get("quantization"))
    llama = load_llama(path, n_ctx=2048, n_threads=THREADS, n_threads_batch=THREADS)
    n = 9 if spec["smoke"] else max(COST_SIZES)
    costs = measure_pass_cost(llama, n, context=1024, reps=1 if spec["smoke"] else 3)
    return {"cost_s": dict(enumerate(costs, start=1))}


def margin(spec):
    """At a divergence: the logits of the two tokens after ``prefix``, one-token evaluation."""
    import llama_cpp

    path = model_path(spec["model"], spec.get("quantization"))
    llama = llama_cpp.Llama(
        str(path), n_ctx=N_CTX, n_threads=THREADS, logits_all=True, verbose=False
    )
    llama.eval(spec["prefix"][:-1])
    llama.eval(spec["prefix"][-1:])  # the last token alone, as plain decoding evaluates it
    logits = np.asarray(llama.scores[llama.n_tokens - 1])
    a, b = spec["tokens"]
    top2 = np.sort(logits)[-2:]
    return {
        "logit_a": float(logits[a]),
        "logit_b": float(logits[b]),
        "margin": float(abs(logits[a] - logits[b])),
        "top_gap": float(top2[1] - top2[0]),
    }


def work(spec):
    return {"run": run, "cost": pass_cost, "margin": margin}[spec["kind"]](spec)


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
    keys = dict.fromkeys(_key(r) for r in runs)
    for model, workload, drafter in keys:
        mine = [r for r in runs if _key(r) == (model, workload, drafter)]
        entry = {}
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
        k = N_DRAFT.get(_rules(drafter))
        none = base.get((0, model, workload))
        if none is not None and k is not None:
            entry["ceiling_tokens_per_pass"] = _ceiling(none["rows"], k)
            entry["of_ceiling"] = entry["tokens_per_pass"] / entry["ceiling_tokens_per_pass"]
        allowed = [_allowed(r["rows"], costs[(r["round"], model)]) for r in mine]
        entry["allowed_decode_speedup"] = harness.spread(allowed)
        if drafter != "none":
            achieved = [
                (base[(r["round"], model, workload)]["decode_s"] / r["decode_s"]) / a
                for r, a in zip(mine, allowed, strict=True)
                if (r["round"], model, workload) in base
            ]
            entry["of_allowed"] = harness.spread(achieved)
        entry["identical"] = all(r["identical"] for r in mine)
        entry["divergences"] = [m for m in margins if m["key"] == [model, workload, drafter]]
        table.setdefault(model, {}).setdefault(workload, {})[drafter] = entry
    return table


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


LABELS = {
    "none": "no drafting (plain `Llama`)",
    "lookup": "llama-cpp-python `LlamaPromptLookupDecoding`",
    "llamacpp": "ngramdraft, llama.cpp's rules",
    "llamacpp-host": "ngramdraft, llama.cpp's rules, host's loop",
    "llamacpp-cost": "ngramdraft, llama.cpp's rules + `CostAwareLength()`",
    "suffix": 'ngramdraft `rules="suffix"`',
    "suffix-host": 'ngramdraft `rules="suffix"`, host\'s loop',
    "suffix-whole": 'ngramdraft `rules="suffix"`, whole drafts',
}


def markdown(result):
    lines = [
        f"# Trained models on llama-cpp-python, {THREADS} threads, {result['rounds']} round(s)",
        "",
        "Times are sums over a workload's requests, medians over rounds (range); speedups are "
        "each round's ratio to `none` in the same round. *allowed*: the decode speedup the "
        "measured pass-cost curve allows for the passes made; *of allowed*: the measured "
        "decode speedup over that.",
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
            "| workload | drafter | prompt s | decode s | total s | prompt | decode | total "
            "| tokens/pass | of ceiling | allowed | of allowed | same output |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for workload, by_drafter in by_workload.items():
            for drafter, e in by_drafter.items():
                of_allowed = harness.fmt(e["of_allowed"], ".0%") if "of_allowed" in e else ""
                same = "yes" if e["identical"] else _divergence(e["divergences"])
                lines.append(
                    f"| {workload} ({e['tokens']} tokens) | {LABELS[drafter]} "
                    f"| {e['prompt_s']['median']:.2f} | {e['decode_s']['median']:.2f} "
                    f"| {e['total_s']['median']:.2f} | {harness.fmt(e['prompt_speedup'])} "
                    f"| {harness.fmt(e['decode_speedup'])} | {harness.fmt(e['total_speedup'])} "
                    f"| {e['tokens_per_pass']:.2f} | {_share(e.get('of_ceiling'))} "
                    f"| {e['allowed_decode_speedup']['median']:.2f}x | {of_allowed} | {same} |"
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
    ap.add_argument("--models", help="model names or GGUF paths (qwen2.5-coder-0.5b-instruct)")
    ap.add_argument("--quantizations", default="", help="also requantized: e.g. Q8_0,F16")
    ap.add_argument("--workloads", help=f"default {','.join(workloads.CHATS)}")
    ap.add_argument("--drafters", help=f"default {','.join(DRAFTERS)}")
    args = ap.parse_args()
    if harness.worker_main(args, work):
        return
    if args.smoke:  # the smallest trained model, short answers, one round
        args.rounds = 1
        args.models = args.models or SMOKE_MODEL
        args.workloads = args.workloads or "records,session"
        args.drafters = args.drafters or "none,lookup,llamacpp,suffix"
    args.models = args.models or "qwen2.5-coder-0.5b-instruct"
    args.workloads = args.workloads or ",".join(workloads.CHATS)
    args.drafters = args.drafters or ",".join(DRAFTERS)
    started, quiet = time.time(), harness.Quiet()
    models = [(m, None) for m in args.models.split(",")]
    models += [(m, q) for m, _ in list(models) for q in filter(None, args.quantizations.split(","))]
    chosen = args.drafters.split(",")
    if "none" not in chosen:
        chosen.insert(0, "none")
    wl = args.workloads.split(",")
    for name, q in models:  # fetched and made before any clock
        model_path(name, q)
    runs, costs = [], {}
    variants = [(m, w, d) for m in models for w in wl for d in chosen]
    for r, ((model, q), workload, drafter) in harness.rounds(variants, args.rounds):
        label = model if q is None else f"{model} {q}"
        if (r, label) not in costs:  # the curve, once a round, before the model's first run
            spec = {"kind": "cost", "model": model, "quantization": q, "smoke": args.smoke}
            curve = harness.fresh(__file__, spec)["cost_s"]
            costs[(r, label)] = {int(k): v for k, v in curve.items()}
        spec = {
            "kind": "run",
            "model": model,
            "quantization": q,
            "workload": workload,
            "drafter": drafter,
            "smoke": args.smoke,
        }
        rows = harness.fresh(__file__, spec)["rows"]
        run_ = {
            "round": r,
            "model": label,
            "model_name": model,
            "quantization": q,
            "workload": workload,
            "drafter": drafter,
            "rows": rows,
            "requests": len(rows),
            "tokens": sum(len(x["output"]) for x in rows),
            "passes": sum(x["passes"] for x in rows),
            "prompt_s": sum(x["prompt_s"] for x in rows),
            "decode_s": sum(x["decode_s"] for x in rows),
        }
        run_["total_s"] = run_["prompt_s"] + run_["decode_s"]
        runs.append(run_)
        print(
            f"round {r + 1}/{args.rounds} {label} {workload:<10} {drafter:<13} "
            f"prompt {run_['prompt_s']:6.2f} s decode {run_['decode_s']:6.2f} s "
            f"{run_['tokens'] / run_['passes']:.2f} tokens/pass",
            file=sys.stderr,
            flush=True,
        )
    margins = _divergences(runs)
    table = summarize(runs, costs, margins)
    result = {
        "rounds": args.rounds,
        "smoke": args.smoke,
        "threads": THREADS,
        "table": table,
        "pass_cost": {
            label: {str(k): v for k, v in costs[(0, label)].items()}
            for label in dict.fromkeys(r["model"] for r in runs)
        },
        "pass_cost_by_round": [
            {"round": r, "model": m, "cost_s": {str(k): v for k, v in c.items()}}
            for (r, m), c in costs.items()
        ],
        "runs": [{k: v for k, v in r.items() if k != "rows"} for r in runs],
        "outputs": [
            {
                "model": r["model"],
                "workload": r["workload"],
                "drafter": r["drafter"],
                "round": r["round"],
                "rows": [{k: v for k, v in x.items() if k != "prompt"} for x in r["rows"]],
            }
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
            "kind": "margin",
            "model": r["model_name"],
            "quantization": r["quantization"],
            "prefix": row["prompt"] + other["output"][:position],
            "tokens": [other["output"][position], row["output"][position]],
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
    os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
    main()
