"""End-to-end speed: tokens per second of a real engine with and without drafting.

    python benchmarks/e2e.py [--smoke] [--json] [--rounds R] [--tokens N]

The engine is llama-cpp-python running a random-weight GGUF with
Qwen2.5-0.5B's transformer, the Llama-3 vocabulary and Q8_0 weights (see
``tests/random_gguf.py``): a forward pass costs what the trained model's
costs. Teacher forcing makes the output the workload's real text: at each
step the engine evaluates the last token and the draft in one batch, takes
the argmax of every position it samples from (as greedy decoding does), the
draft is accepted up to the first token that differs from the text, and the
rejected positions are removed from the KV cache. So acceptance is what the
drafter would achieve on that text, and time is what the engine spends.

Drafters, all called through llama-cpp-python's draft-model protocol:
``none``, ``lookup`` (llama-cpp-python's ``LlamaPromptLookupDecoding``, 8
tokens), ``context`` (ngramdraft, no static cache), ``static`` (ngramdraft
with the Gutenberg static cache: 541 MB of text, or the 25 MB parity corpus
with ``--smoke``) and ``adaptive`` (``static`` with the opt-in
``AdaptiveLength`` policy, beyond llama.cpp's rules). With ``--drafters``
also: ``cost-aware`` (``static`` with ``CostAwareLength``), ``suffix`` and
``suffix-cost-aware`` (``rules="suffix"``, without and with
``CostAwareLength``), and ``ceiling`` (the drafts of ``drafting.py``'s
ceiling: the longest earlier copy of the true text, what a speedup
is measured against).

Workloads: ``common/workloads.py``'s teacher-forced ones (open-ended, edit,
templated, real-edit), --tokens tokens each (2,000 by default).

Every (workload, drafter) run is a fresh process; runs are interleaved over
rounds, and figures are medians over rounds with their ranges; speedups are
taken within a round. Also measured: the cost of one forward pass over k
tokens relative to one token (k = 1 .. 33), which explains the speedups, and
each drafter's own cost per call at an 8k-token context. ``--smoke``: a tiny
random model, 40 tokens, one round.

Results: ``benchmarks/results/e2e/STAMP.{json,md,png}``.
"""

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, drafters, harness, workloads

MODEL = corpora.DATA / "qwen25-05b-llama3-q8_0.gguf"
SMOKE_MODEL = corpora.DATA / "tiny-llama3-q8_0.gguf"
DRAFTERS = ("none", "lookup", "context", "static", "adaptive")
# The suffix rules, and the ceiling's drafts for reference (run with --drafters).
SUFFIX = ("suffix", "suffix-cost-aware", "ceiling")
MAX_PASS = 33  # the pass cost is measured up to this many tokens (a 32-token draft)
WORKLOADS = tuple(workloads.TEXTS)
N_DRAFT = 8
# The opt-in policies by drafter name: AdaptiveLength's default and each of
# its two parts alone, and CostAwareLength given this engine's pass costs.
ADAPTIVE = {
    "adaptive": {},
    "adaptive-length": {"off_below": 0.0},
    "auto-off": {"n_min": N_DRAFT},
}
POLICIES = (*ADAPTIVE, "cost-aware")
THREADS = 2


# -- one run (a fresh process) ---------------------------------------------------


def make_policy(name, pass_cost=None):
    """The opt-in policy a drafter name stands for (pass_cost: a pass over 1..9 tokens, s)."""
    from ngramdraft import AdaptiveLength, CostAwareLength

    if name == "cost-aware":
        return CostAwareLength(pass_cost)
    return AdaptiveLength(**ADAPTIVE[name])


class CeilingDraft:
    """The ceiling's drafts (``common/drafters.py``): the longest run of the upcoming true
    tokens found earlier in the sequence, capped at N_DRAFT; it is told each request's text."""

    def __init__(self):
        self.full = np.zeros(0, dtype=np.intc)

    def __call__(self, input_ids, /, **kwargs):
        upcoming = self.full[len(input_ids) : len(input_ids) + N_DRAFT]
        return upcoming[: drafters.ceiling_length(np.asarray(input_ids), upcoming, N_DRAFT)]


def make_drafter(name, quick, llama=None):
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    from ngramdraft import CostAwareLength, NgramCache
    from ngramdraft.integrations.llama_cpp import NgramDraftModel

    if name == "none":
        return None
    if name == "lookup":
        return LlamaPromptLookupDecoding(num_pred_tokens=N_DRAFT)
    if name == "ceiling":
        return CeilingDraft()
    if name.startswith("suffix"):
        aware = name == "suffix-cost-aware"
        policy = CostAwareLength(list(pass_costs(llama).values())) if aware else None
        return NgramDraftModel(n_draft=N_DRAFT, policy=policy, rules="suffix")
    static = static_cache(quick) if name == "static" or name in POLICIES else None
    policy = None
    if name in POLICIES:  # CostAwareLength gets the pass costs of `llama`, measured here
        cost = list(pass_costs(llama).values()) if name == "cost-aware" else None
        policy = make_policy(name, cost)
    return NgramDraftModel(static=static, dynamic=NgramCache(), n_draft=N_DRAFT, policy=policy)


def static_cache(smoke):
    return corpora.static_cache(1 if smoke else corpora.FULL_MB)


def teacher_forced(llama, draft_model, prompt, text):
    """Decode ``text`` after ``prompt``; (decode seconds, passes, drafted, accepted)."""
    llama.reset()
    llama.eval(prompt)
    seq = list(prompt)
    passes = drafted = accepted = 0
    pos = 0  # text[pos] is the token the model "sampled" last, not yet evaluated
    seq.append(text[0])
    if draft_model is not None:
        # Its first call loads its kernels (0.7 s, 4% of a 400-token run): made before
        # the clock, on the sequence the first timed call sees (which drafts the same; a
        # policy learns from that one draft twice, one step in hundreds).
        draft_model(np.array(seq, dtype=np.intc))
    t0 = time.perf_counter()
    while pos < len(text) - 1:
        draft = [] if draft_model is None else draft_model(np.array(seq, dtype=np.intc)).tolist()
        draft = draft[: len(text) - 2 - pos]
        start = llama.n_tokens
        llama.eval([text[pos], *draft])
        passes += 1
        n = 0
        while n < len(draft) and draft[n] == text[pos + 1 + n]:
            n += 1
        # The engine's sampling: the argmax of every position it reads.
        np.argmax(llama.scores[start : start + n + 1], axis=1)
        llama.n_tokens = start + n + 1  # the next eval removes the rejected positions
        seq.extend(text[pos + 1 : pos + n + 2])
        pos += n + 1
        drafted += len(draft)
        accepted += n
    return time.perf_counter() - t0, passes, drafted, accepted


def _model(smoke):
    return SMOKE_MODEL if smoke else MODEL


def run_one(workload, drafter, n, quick):
    import llama_cpp

    requests = workloads.TEXTS[workload](n)
    n_ctx = max(len(p) + len(t) for p, t in requests) + 64
    # The host's eval with every position's logits: what teacher forcing reads.
    llama = llama_cpp.Llama(
        str(_model(quick)),
        n_ctx=n_ctx,
        n_threads=THREADS,
        n_threads_batch=THREADS,
        logits_all=True,
        verbose=False,
    )
    draft_model = make_drafter(drafter, quick, llama)
    seconds = passes = drafted = accepted = tokens = 0
    for prompt, text in requests:
        if isinstance(draft_model, CeilingDraft):
            draft_model.full = np.array(list(prompt) + list(text), dtype=np.intc)
        s, p, d, a = teacher_forced(llama, draft_model, prompt, text)
        seconds, passes, drafted, accepted = seconds + s, passes + p, drafted + d, accepted + a
        tokens += len(text) - 1
    return {
        "workload": workload,
        "drafter": drafter,
        "tokens": tokens,
        "seconds": seconds,
        "tokens_per_s": tokens / seconds,
        "passes": passes,
        "drafted": drafted,
        "accepted": accepted,
        "accepted_per_pass": accepted / passes,
    }


def batch_cost(smoke, reps=7):
    """Median seconds of one forward pass over k tokens at a 1,024-token context, k = 1..33."""
    from ngramdraft.integrations.llama_cpp import load_llama

    llama = load_llama(_model(smoke), n_ctx=2048, n_threads=THREADS, n_threads_batch=THREADS)
    return pass_costs(llama, 1 if smoke else reps, 9 if smoke else MAX_PASS)


def pass_costs(llama, reps=7, n_tokens=N_DRAFT + 1):
    """Pass costs over 1 .. n_tokens tokens on a loaded model, as {k: seconds}."""
    from ngramdraft.integrations.llama_cpp_measure import measure_pass_cost

    costs = measure_pass_cost(llama, n_tokens, context=1024, reps=reps)
    return dict(enumerate(costs, start=1))


def drafter_cost(quick, n_ctx=8192, calls=400):
    if quick:
        n_ctx, calls = 1024, 20
    """Median microseconds per draft-model call at an n_ctx-token sequence growing by one."""
    stream = corpora.test_stream(n_ctx + calls).astype(np.intc)
    out = {}
    for name in ("lookup", "context", "static"):
        model = make_drafter(name, quick)
        model(stream[:n_ctx])
        times = []
        for i in range(calls):
            seq = stream[: n_ctx + i + 1]
            t0 = time.perf_counter()
            model(seq)
            times.append(time.perf_counter() - t0)
        out[name] = 1e6 * float(np.median(times))
    return out


# -- the driver ----------------------------------------------------------------


def ensure_inputs(smoke):
    sys.path.insert(0, str(harness.REPO / "tests"))  # the tests' model writer
    from random_gguf import QWEN25_05B_LLAMA3, Shape, write_random_gguf

    # A smoke run's model: the Llama-3 vocabulary over two tiny layers.
    tiny = Shape(
        n_vocab=128256, n_embd=64, n_layer=2, n_head=4, n_head_kv=2, n_ff=128, tied_output=True
    )
    path = _model(smoke)
    if not path.exists():
        print(f"writing {path.name} (random weights, Q8_0) ...", file=sys.stderr)
        tmp = path.with_suffix(".part")
        write_random_gguf(tmp, tiny if smoke else QWEN25_05B_LLAMA3, quantization="Q8_0")
        tmp.replace(path)
    static_cache(smoke)


def child(spec):
    return harness.fresh(__file__, spec)


def work(spec):
    corpora.SMOKE = spec.get("quick", False)
    if spec["kind"] == "run":
        return run_one(spec["workload"], spec["drafter"], spec["n"], spec["quick"])
    if spec["kind"] == "batch_cost":
        return batch_cost(spec["quick"])
    return drafter_cost(spec["quick"])


def summarize(runs, workloads, rounds):
    table = {}
    for w in workloads:
        base = {
            r["round"]: r["tokens_per_s"]
            for r in runs
            if r["workload"] == w and r["drafter"] == "none"
        }
        table[w] = {}
        for d in dict.fromkeys(r["drafter"] for r in runs):
            mine = [r for r in runs if r["workload"] == w and r["drafter"] == d]
            if not mine:
                continue
            speed = [r["tokens_per_s"] for r in mine]
            speedup = [r["tokens_per_s"] / base[r["round"]] for r in mine]
            table[w][d] = {
                "tokens_per_s": float(np.median(speed)),
                "tokens_per_s_range": [min(speed), max(speed)],
                "speedup": float(np.median(speedup)),
                "speedup_range": [min(speedup), max(speedup)],
                "passes": mine[0]["passes"],
                "accepted_per_pass": mine[0]["accepted_per_pass"],
                "drafted": mine[0]["drafted"],
                "accepted": mine[0]["accepted"],
                "tokens": mine[0]["tokens"],
            }
    return table


LABELS = {
    "none": "no drafting",
    "lookup": "llama-cpp-python LlamaPromptLookupDecoding",
    "context": "ngramdraft (context only)",
    "static": "ngramdraft (+ static cache)",
    "adaptive": "ngramdraft (+ static, opt-in AdaptiveLength)",
    "adaptive-length": "ngramdraft (+ static, AdaptiveLength's length alone)",
    "auto-off": "ngramdraft (+ static, AdaptiveLength's auto-off alone)",
    "cost-aware": "ngramdraft (+ static, opt-in CostAwareLength)",
    "suffix": 'ngramdraft rules="suffix"',
    "suffix-cost-aware": 'ngramdraft rules="suffix", CostAwareLength',
    "ceiling": "the ceiling's drafts (the longest earlier copy of the true text)",
}


def markdown(result):
    lines = [
        f"# End-to-end: {result['model']}, {result['threads']} threads, "
        f"{result['rounds']} round(s){' (quick)' if result['quick'] else ''}",
        "",
        "| workload | drafter | tokens/s (range) | speedup (range) | of the ceiling's "
        "| forward passes | accepted per pass |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for w, rows in result["workloads"].items():
        ceiling = rows.get("ceiling", {}).get("speedup")
        for d, r in rows.items():
            lo, hi = r["tokens_per_s_range"]
            slo, shi = r["speedup_range"]
            share = f"{(r['speedup'] - 1) / (ceiling - 1):.0%}" if ceiling and ceiling > 1 else "-"
            lines.append(
                f"| {w} ({r['tokens']} tokens) | {LABELS[d]} | {r['tokens_per_s']:.1f} "
                f"({lo:.1f}-{hi:.1f}) | {r['speedup']:.2f}x ({slo:.2f}-{shi:.2f}) | {share} "
                f"| {r['passes']} | {r['accepted_per_pass']:.2f} |"
            )
    lines += ["", "Cost of one forward pass over k tokens relative to one token:", ""]
    cost = result["batch_cost_s"]
    lines.append("| k | " + " | ".join(str(k) for k in cost) + " |")
    lines.append("|---" * (len(cost) + 1) + "|")
    lines.append("| relative | " + " | ".join(f"{v / cost['1']:.2f}" for v in cost.values()) + " |")
    lines += ["", f"one token: {1000 * cost['1']:.1f} ms", ""]
    lines.append(
        "Drafter cost per call at an 8,192-token context (median us): "
        + ", ".join(f"{LABELS[k]} {v:.1f}" for k, v in result["drafter_us_per_call_8k"].items())
    )
    return "\n".join(lines) + "\n"


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    workloads = list(result["workloads"])
    drafters = list(result["workloads"][workloads[0]])
    width = 0.8 / len(drafters)
    for i, d in enumerate(drafters):
        speed = [result["workloads"][w][d]["speedup"] for w in workloads]
        offset = (i - (len(drafters) - 1) / 2) * width
        ax.bar(np.arange(len(workloads)) + offset, speed, width, label=LABELS[d])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(np.arange(len(workloads)), workloads)
    ax.set_ylabel("speedup over no drafting (tokens/s)")
    ax.set_title("llama-cpp-python, random Qwen2.5-0.5B shape, Q8_0, teacher-forced")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = harness.parser(__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, help="generated tokens per workload (default 2000)")
    ap.add_argument(
        "--drafters",
        help=f"comma-separated drafters (default: {','.join(DRAFTERS)}; also "
        f"{','.join([*(d for d in POLICIES if d not in DRAFTERS), *SUFFIX])})",
    )
    ap.add_argument(
        "--workloads", help=f"comma-separated workloads (default: {','.join(WORKLOADS)})"
    )
    args = ap.parse_args()
    if harness.worker_main(args, work):
        return
    started, quiet = time.time(), harness.Quiet()
    if args.smoke:
        args.rounds, args.tokens = 1, args.tokens or 40
        args.workloads = args.workloads or "edit"
        args.drafters = args.drafters or "none,lookup,static,suffix-cost-aware,ceiling"
    n = args.tokens or 2000
    corpora.SMOKE = args.smoke
    ensure_inputs(args.smoke)
    # The short measurements first: one that fails then costs no run its results.
    batch = {str(k): v for k, v in child({"kind": "batch_cost", "quick": args.smoke}).items()}
    drafter_us = child({"kind": "drafter_cost", "quick": args.smoke})
    wl = args.workloads.split(",") if args.workloads else WORKLOADS
    chosen = args.drafters.split(",") if args.drafters else DRAFTERS
    runs = []
    for r, (w, d) in harness.rounds([(w, d) for w in wl for d in chosen], args.rounds):
        spec = {"kind": "run", "workload": w, "drafter": d, "n": n, "quick": args.smoke}
        out = child(spec)
        out["round"] = r
        runs.append(out)
        print(
            f"round {r + 1}/{args.rounds} {w:<11} {d:<8} {out['tokens_per_s']:7.1f} tokens/s "
            f"{out['accepted_per_pass']:.2f} accepted/pass",
            file=sys.stderr,
        )
    import llama_cpp

    result = {
        "model": f"{_model(args.smoke).name}: random weights, Llama-3 vocab, Q8_0 "
        f"(llama-cpp-python {llama_cpp.__version__})",
        "threads": THREADS,
        "rounds": args.rounds,
        "quick": args.smoke,
        "n_draft": N_DRAFT,
        "workloads": summarize(runs, wl, args.rounds),
        "batch_cost_s": batch,
        "drafter_us_per_call_8k": drafter_us,
        "runs": runs,
    }
    out = harness.save(
        "e2e", result, markdown, smoke=args.smoke, as_json=args.json, started=started, quiet=quiet
    )
    plot(result, out.with_suffix(".png"))


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", str(THREADS))
    main()
