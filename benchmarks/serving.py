"""Serving: drafting cost per sequence-step with many concurrent sequences.

    python benchmarks/serving.py [--sizes 1,8,64,256] [--static full|parity]
        [--seq-steps 200000] [--no-budget] [--vllm] [--rounds 3] [--smoke] [--json]

A server's loop, simulated on real text: B sequences run at once (B = 1, 8,
64, 256), each a stretch of the held-out Gutenberg stream; a third of them
start with one shared "system prompt". Every step drafts for all of them,
then accepts what a model would: the drafted tokens up to the first that
differs from the text, plus the text's next token (teacher forcing, so the
acceptance is the replay's). A sequence that has generated its share
finishes into the shared dynamic cache and a new one takes its place. Only
the drafter's calls are timed: ``BatchDrafter.draft`` + ``accept`` for the
whole batch (each also reported apart), against one ``Drafter`` per
sequence called in a Python loop; ``finish`` (a merge into the dynamic
cache) is timed apart, per sequence. The batch is given the verified tokens
as an engine's sampler holds them, a table of n_draft + 1 columns padded
with -1 and the count that holds in each row (vLLM's), and, in a run of its
own (``batch-lists``), as a list of one array per sequence.
The static cache is the 541 MB corpus's (``--static parity``: the 25 MB
parity corpus's, whose tables fit far better in a CPU's caches; ``--smoke``:
the first MB's). Each (B, drafter) runs about ``--seq-steps`` sequence-steps.

Also measured: one Drafter's draft() + accept() of one token, the call
pair of a plain decoding loop, and a long-lived dynamic cache's size over
10 million tokens with a budget of a million n-grams, against no budget over
one million (skipped with ``--no-budget``). Every (B, drafter) runs in a fresh process,
interleaved over rounds; figures are medians with ranges. Results:
``benchmarks/results/serving/STAMP.{md,json}``.
"""

import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, harness
from common.simulated import GENERATE, STATICS, Texts, accepted, run_vllm, static_path

SIZES = (1, 8, 64, 256)
KINDS = ("batch", "batch-lists", "single")


def run(kind, size, steps, quick, which):
    from ngramdraft import BatchDrafter, Drafter, NgramCache, StaticCache

    static = StaticCache.open(static_path(quick, which))
    static.prefault().done.wait()  # mapped and checked before the clock
    texts = Texts(corpora.test_stream(200_000))
    shared = NgramCache()
    timed = [0.0, 0.0]  # seconds in draft calls, in accept calls
    seq_steps = 0
    if kind != "single":
        drafter = BatchDrafter(static=static, dynamic=shared, max_seqs=size)
    live = {}  # id -> [continuation, position]
    next_id = 0

    def admit():
        nonlocal next_id
        prompt, rest = texts.next()
        if kind != "single":
            drafter.add(next_id, prompt)
        else:
            live_drafters[next_id] = Drafter(static=static, dynamic=shared)
            live_drafters[next_id].start(prompt)
        live[next_id] = [rest, 0]
        next_id += 1

    live_drafters = {}
    for _ in range(size):
        admit()
    warmup = min(20, steps // 5)  # loads the compiled kernels and starts numba's threads
    finishes = 0
    t_finish = 0.0
    for step in range(steps + warmup):
        if step == warmup:
            timed, seq_steps, finishes, t_finish = [0.0, 0.0], 0, 0, 0.0
        ids = list(live)
        if kind != "single":
            t0 = time.perf_counter()
            out, lengths = drafter.draft(ids)
            timed[0] += time.perf_counter() - t0
            new = []
            # The verified tokens as an engine's sampler hands them over: a row of
            # n_draft + 1 per sequence, padded with -1 (vLLM's), and how many hold.
            table = np.full((len(ids), out.shape[1] + 1), -1, dtype=np.int32)
            counts = np.empty(len(ids), dtype=np.int64)
            for k, i in enumerate(ids):
                rest, pos = live[i]
                n = accepted(out[k, : lengths[k]], rest[pos:])
                new.append(rest[pos : pos + n])
                table[k, :n] = new[-1]
                counts[k] = n
            t0 = time.perf_counter()
            if kind == "batch":
                drafter.accept(ids, table, counts)
            else:
                drafter.accept(ids, new)
            timed[1] += time.perf_counter() - t0
        else:
            new = []
            for i in ids:
                t0 = time.perf_counter()
                draft = live_drafters[i].draft()
                timed[0] += time.perf_counter() - t0
                rest, pos = live[i]
                n = accepted(draft, rest[pos:])
                tokens = rest[pos : pos + n].tolist()
                t0 = time.perf_counter()
                live_drafters[i].accept(tokens)
                timed[1] += time.perf_counter() - t0
                new.append(tokens)
        seq_steps += len(ids)
        for i, tokens in zip(ids, new, strict=True):
            live[i][1] += len(tokens)
            if live[i][1] >= GENERATE - 1:
                t0 = time.perf_counter()
                if kind != "single":
                    drafter.finish(i)
                else:
                    live_drafters.pop(i).finish()
                t_finish += time.perf_counter() - t0
                finishes += 1
                del live[i]
                admit()
    return {
        "kind": kind,
        "size": size,
        "us_per_seq_step": 1e6 * sum(timed) / seq_steps,
        "draft_us": 1e6 * timed[0] / seq_steps,
        "accept_us": 1e6 * timed[1] / seq_steps,
        "us_per_finish": 1e6 * t_finish / finishes if finishes else None,
        "seq_steps": seq_steps,
        "threads": _threads() if kind != "single" and size >= 32 else 1,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "dynamic_ngrams": len(shared),
    }


VLLM_SIZES = (8, 64, 256)
VLLM_KINDS = ("ngramdraft-vllm", "vllm-builtin")


def one_token_loop(quick, which, steps=100_000, n_ctx=4096):
    """us per draft() + accept() of one token: a decoding loop with one Drafter.

    Sequences of n_ctx tokens (lookup-stats' chunks) follow one another, each
    finished into the dynamic cache; start and finish are not timed.
    """
    from ngramdraft import Drafter, StaticCache

    static = StaticCache.open(static_path(quick, which))
    static.prefault().done.wait()  # mapped and checked before the clock
    stream = corpora.test_stream(steps + 2 * n_ctx).tolist()
    drafter = Drafter(static=static)
    timed = 0.0
    for start in range(0, steps + n_ctx, n_ctx):  # the first chunk loads the kernels
        drafter.start(stream[start : start + 64])
        t0 = time.perf_counter()
        for token in stream[start + 64 : start + n_ctx]:
            drafter.draft()
            drafter.accept([token])
        if start:
            timed += time.perf_counter() - t0
        drafter.finish()
    calls = (len(range(0, steps + n_ctx, n_ctx)) - 1) * (n_ctx - 64)
    return {"kind": "one-token", "us_per_call_pair": 1e6 * timed / calls}


def budget_run(n_tokens, max_ngrams, seq_len=512):
    """A long-lived dynamic cache: sequences of seq_len tokens merged in, budgeted or not."""
    from ngramdraft import NgramCache

    tokens = corpora.prefix_tokens(max(1, n_tokens // 240_000 + 1))[:n_tokens]
    dynamic = NgramCache(max_ngrams=max_ngrams)
    context = NgramCache("context")
    peak = 0
    t0 = time.perf_counter()
    for start in range(0, len(tokens), seq_len):
        context.clear()
        context.update(tokens[start : start + seq_len])
        dynamic.merge(context)  # what finish() does
        peak = max(peak, len(dynamic))
    table_bytes = dynamic.nbytes
    return {
        "kind": "budget",
        "max_ngrams": max_ngrams,
        "tokens": len(tokens),
        "peak_ngrams": peak,
        "final_ngrams": len(dynamic),
        "table_mb": table_bytes / 1e6,
        "bytes_per_token": table_bytes / len(tokens),
        "seconds": time.perf_counter() - t0,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def _threads():
    import numba

    return numba.get_num_threads()


def child(spec):
    if spec["kind"] in VLLM_KINDS:
        return harness.fresh(__file__, spec, python=harness.vllm_python(), env=harness.vllm_env())
    return harness.fresh(__file__, spec)


def work(spec):
    corpora.SMOKE = spec.get("quick", False)
    if spec["kind"] in VLLM_KINDS:
        return run_vllm(spec["kind"], spec["size"], spec["steps"], spec["quick"], spec["static"])
    if spec["kind"] == "one-token":
        steps = {"steps": 1000} if spec["quick"] else {}
        return one_token_loop(spec["quick"], spec["static"], **steps)
    if spec["kind"] == "budget":
        return budget_run(spec["tokens"], spec["max_ngrams"])
    return run(spec["kind"], spec["size"], spec["steps"], spec["quick"], spec["static"])


def main():
    ap = harness.parser(__doc__.splitlines()[0])
    ap.add_argument(
        "--vllm", action="store_true", help="also vLLM proposers: ngramdraft's and vLLM's own"
    )
    ap.add_argument("--sizes", help=f"batch sizes (default {','.join(map(str, SIZES))})")
    ap.add_argument("--static", choices=STATICS, default="full", help="static cache (default full)")
    ap.add_argument(
        "--seq-steps", type=int, default=200_000, help="sequence-steps per run (default 200000)"
    )
    ap.add_argument(
        "--no-budget", action="store_true", help="skip the long-lived dynamic cache's runs"
    )
    args = ap.parse_args()
    if harness.worker_main(args, work):
        return
    started, quiet = time.time(), harness.Quiet()
    smoke = args.smoke
    corpora.SMOKE = smoke
    static_path(smoke, args.static)
    rounds = 1 if smoke else args.rounds
    sizes = (
        tuple(int(x) for x in args.sizes.split(","))
        if args.sizes
        else ((1, 64) if smoke else SIZES)
    )
    vllm_sizes = tuple(s for s in VLLM_SIZES if not smoke or s == 8)
    seq_steps = 500 if smoke else args.seq_steps
    runs, one_token = [], []
    base = {"quick": smoke, "static": args.static}
    for r in range(rounds):
        one_token.append(child({**base, "kind": "one-token"})["us_per_call_pair"])
        variants = [(size, kind) for size in sizes for kind in KINDS]
        if args.vllm:
            variants += [(size, kind) for size in vllm_sizes for kind in VLLM_KINDS]
        for _, (size, kind) in harness.rounds(variants[::-1] if r % 2 else variants, 1):
            per = seq_steps // size // (4 if kind in VLLM_KINDS else 1)
            out = child({**base, "kind": kind, "size": size, "steps": max(50, per)})
            out["round"] = r
            runs.append(out)
            print(
                f"round {r + 1}/{rounds} B={size:<4} {kind:<15} "
                f"{out['us_per_seq_step']:.3f} us/seq-step",
                file=sys.stderr,
            )
    long_run = 20_000 if smoke else 10_000_000
    budgets = [
        child({"kind": "budget", "tokens": tokens, "max_ngrams": budget, "quick": smoke})
        for tokens, budget in ((long_run // 10, None), (long_run, long_run // 10))
        if not args.no_budget
    ]
    table = _summary(
        runs,
        sizes,
        KINDS,
        threads="first",
        peak_rss_mb="median",
        draft_us="median",
        accept_us="median",
        us_per_finish="median",
    )
    vllm = _summary(
        runs, vllm_sizes if args.vllm else (), VLLM_KINDS, accepted_per_seq_step="median"
    )
    result = {
        "static": "1 MB of the corpus (smoke)" if smoke else STATICS[args.static],
        "seq_steps": seq_steps,
        "rounds": rounds,
        "quick": smoke,
        "sizes": table,
        "vllm_proposers": vllm,
        "dynamic_cache": budgets,
        "one_drafter_draft_accept_us": float(np.median(one_token)),
        "one_drafter_draft_accept_us_range": [min(one_token), max(one_token)],
        "runs": runs,
    }
    harness.save(
        "serving", result, markdown, smoke=smoke, as_json=args.json, started=started, quiet=quiet
    )


def _summary(runs, sizes, kinds, **fields):
    """{size: {kind: median us per seq-step, its range, and each field's first or median}}."""
    table = {}
    for size in sizes:
        table[str(size)] = row = {}
        for kind in kinds:
            mine = [r for r in runs if r["size"] == size and r["kind"] == kind]
            us = [r["us_per_seq_step"] for r in mine]
            row[kind] = {"us_per_seq_step": float(np.median(us)), "range": [min(us), max(us)]}
            for name, how in fields.items():
                values = [r[name] for r in mine if r[name] is not None]  # None: none finished
                if not values:
                    row[kind][name] = None
                elif how == "first":
                    row[kind][name] = values[0]
                else:
                    row[kind][name] = float(np.median(values))
    return table


def _us(entry):
    return f"{entry['us_per_seq_step']:.3f} ({entry['range'][0]:.3f}-{entry['range'][1]:.3f})"


def markdown(result):
    lines = [
        f"# Serving: static cache of the {result['static']}, {result['rounds']} round(s), "
        f"about {result['seq_steps']:,} sequence-steps a run",
        "",
        "BatchDrafter accepting a padded token table (an engine sampler's), and accepting "
        "a list of arrays:",
        "",
        "| sequences | BatchDrafter us/seq-step (range) | draft + accept | threads "
        "| accepting lists (range) | draft + accept "
        "| one Drafter each us/seq-step (range) | ratio | finish us (batch) "
        "| peak RSS MB (batch) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for size, row in result["sizes"].items():
        b, bl, s = row["batch"], row["batch-lists"], row["single"]
        finish = "-" if b["us_per_finish"] is None else f"{b['us_per_finish']:.0f}"
        lines.append(
            f"| {size} | {_us(b)} | {b['draft_us']:.3f} + {b['accept_us']:.3f} | {b['threads']} "
            f"| {_us(bl)} | {bl['draft_us']:.3f} + {bl['accept_us']:.3f} | {_us(s)} "
            f"| {s['us_per_seq_step'] / b['us_per_seq_step']:.1f}x "
            f"| {finish} | {b['peak_rss_mb']:.0f} |"
        )
    if result.get("vllm_proposers"):
        lines += [
            "",
            "vLLM proposers, us per sequence-step of propose() (range) and drafted tokens "
            "accepted per sequence-step:",
            "",
            "| sequences | ngramdraft NgramProposer | accepted | vLLM's NgramProposer | accepted |",
            "|---:|---:|---:|---:|---:|",
        ]
        for size, row in result["vllm_proposers"].items():
            a, b = row["ngramdraft-vllm"], row["vllm-builtin"]
            lines.append(
                f"| {size} | {a['us_per_seq_step']:.2f} ({a['range'][0]:.2f}-{a['range'][1]:.2f}) "
                f"| {a['accepted_per_seq_step']:.2f} | {b['us_per_seq_step']:.2f} "
                f"({b['range'][0]:.2f}-{b['range'][1]:.2f}) | {b['accepted_per_seq_step']:.2f} |"
            )
    if result["dynamic_cache"]:
        lines += [
            "",
            "Dynamic cache over a long run (sequences of 512 tokens merged in, as finish() does):",
            "",
            "| budget (n-grams) | tokens | peak n-grams | final table MB | bytes per token | s |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for b in result["dynamic_cache"]:
            lines.append(
                f"| {b['max_ngrams'] or 'none'} | {b['tokens']:,} | {b['peak_ngrams']:,} "
                f"| {b['table_mb']:.0f} | {b['bytes_per_token']:.0f} | {b['seconds']:.0f} |"
            )
    lo, hi = result["one_drafter_draft_accept_us_range"]
    lines += [
        "",
        f"One Drafter, draft() + accept() of one token: "
        f"{result['one_drafter_draft_accept_us']:.2f} us ({lo:.2f}-{hi:.2f})",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    os.environ.setdefault("NUMBA_NUM_THREADS", "2")
    main()
