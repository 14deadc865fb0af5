"""Two checkouts side by side: replay, Drafter, BatchDrafter, a model's load, in fresh processes.

    python benchmarks/ab.py --before ../base/src --after src [--rounds 5] [--smoke]
        [--probes replay,drafter,batch,batch-few,vllm-few,finish,load,suffix-corpus,suffix-long,
                  suffix-batch,suffix-sync,suffix-replay,suffix-start,suffix-rebase,suffix-evict,suffix-edit,
                  llama-load,llama-text,decode-apply-edit,decode-quotes,decode-session,
                  decode-open,decode-records]

Each round runs every (variant, probe) pair in a process of its own, the
variants' order alternating from round to round, so that both see the same
hours of a shared machine. The probes use only the public API, which both
checkouts must have:

* ``replay``: lookup-stats over the 200k-token held-out Gutenberg stream
  with the 541 MB corpus's static cache (n_ctx 4096, n_draft 8): us per
  drafted token (replay's own clock: drafting and context updates);
* ``drafter``: one Drafter's draft() + accept() of one token, teacher-forced
  over the same stream: us per call pair;
* ``batch``: a BatchDrafter of 256 sequences, each a window of the stream:
  draft(all) and accept(all, one token each) per step: us per sequence-step;
* ``batch-few``: as ``batch``, with 8 sequences (a small server's step, where
  the calls' fixed cost shows);
* ``vllm-few``: ngramdraft's vLLM proposer driven as ``serving.py --vllm``
  drives it (vLLM's token table, 8 requests, rows reused as they end): us per
  sequence-step of ``propose()``; run ab.py with vLLM's environment's python;
* ``finish``: one Drafter's finish() of a 640-token sequence (its start
  untimed) into a dynamic cache that already holds the stream's first 160k
  tokens as such sequences (a server's long-lived cache, larger than the
  CPU's caches), over the stream's last 40k tokens: us per finish, the
  median (a finish that grows the table costs more, once in a while);
* ``load``: ``NgramCache.load`` of a dynamic file holding the stream's
  n-grams (sizes 1-4): ms, the median of five loads, the file in the page
  cache;
* ``suffix-corpus``: as ``drafter``, with ``rules="suffix"`` and the 541 MB
  corpus's suffix file (its warm-up over before the clock starts);
* ``suffix-long``: as ``suffix-corpus``, the drafter started with a
  65,536-token prompt (a long context, as ``context_cost.py``'s 64k);
* ``suffix-batch``: as ``batch``, with ``rules="suffix"`` (no corpus);
* ``suffix-sync``: as ``suffix-batch``, told each step's tokens as vLLM's
  proposer tells them: ``sync`` with the engine's table of whole sequences;
* ``suffix-replay``: ``replay(rules="suffix")`` over the stream (n_ctx 4096,
  n_draft 8, no corpus): us per replayed token (replay's own clock).
* ``suffix-start``: a ``rules="suffix"`` Drafter's ``start`` with a
  65,536-token prompt and its ``finish`` (the sequence filed in the earlier
  requests): us per prompt token;
* ``suffix-rebase``: the slowest draft() + accept() of a Drafter sharing its
  earlier requests (a ``RequestMemory`` of 1 Mi tokens) while another thread
  replaces them with ``hold``, as a save does after another process saved
  the requests file: ms;
* ``suffix-evict``: the same while another thread adds 4,096-token
  sequences to the full memory, evicting the oldest half three times: ms;
* ``suffix-edit``: a ``rules="suffix"`` Drafter (n_draft 16) teacher-forced
  (``common/drafters.py``) over the ``edit`` workload (10,000 output tokens),
  where the substitutions it learns are applied: us per output token.
* ``llama-load``: ``load_llama`` of Qwen2.5-Coder-0.5B-Instruct (Q4_K_M;
  a tiny random model in a smoke run) with a ``rules="suffix"`` ``NgramDraftModel``,
  whose policy times passes at load, as ``real_model.py`` loads it: seconds,
  the model loaded once untimed before (the file in the page cache). A
  checkout that keeps the timings (``ngramdraft.files.passtimes``) reads
  them here: the untimed first run kept them.
* ``llama-text``: the same model and drafter answering the first open
  question with 300 tokens through the host's ``create_completion`` (as
  ``ngramdraft serve`` answers), which asks for its text after every token:
  ms spent in ``Llama.detokenize`` over the answer;
* ``decode-WORKLOAD``: that model and drafter answering one of
  ``real_model.py``'s workloads (apply-edit, quotes, session, open,
  records; its sessions in order, greedy, through the chat template):
  seconds of decode (every token after each request's first), summed over
  its requests. The answers are the model's own, so a checkout whose drafts
  or policy differ makes other passes over the same tokens. An engine
  benchmark: run it on a quiet machine.

Each process first runs its probe once untimed (kernel loading; a checkout's
first process compiles). Results: medians and ranges over rounds,
``benchmarks/results/ab/STAMP.{json,md}``.
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, drafters, engines, harness, simulated, workloads

# Each probe's corpus: the 2-gram cache, the suffix file, or none.
PROBES = {
    "replay": "static",
    "drafter": "static",
    "batch": "static",
    "batch-few": "static",
    "vllm-few": "static",
    "suffix-corpus": "suffix",
    "suffix-long": "suffix",
    "finish": None,
    "load": None,
    "suffix-batch": None,
    "suffix-sync": None,
    "suffix-replay": None,
    "suffix-start": None,
    "suffix-rebase": None,
    "suffix-evict": None,
    "suffix-edit": None,
    "llama-load": None,
    "llama-text": None,
    **{f"decode-{w}": None for w in workloads.CHATS},
}
# A smoke run's probes, short ones; the test suite runs the load and a decode apart (they need
# an engine).
SMOKE_PROBES = "drafter,suffix-batch,llama-load,llama-text,decode-apply-edit"
LONG_PROMPT = 1 << 16
MEMORY = 1 << 20
BATCH = 256
FEW = 8  # a small server's running requests


def probe(name, corpus_path, tokens_path, quick):
    """One measurement in this process (the checkout on PYTHONPATH): a float."""
    from ngramdraft import BatchDrafter, Drafter, StaticCache, SuffixCorpus, replay

    if name == "llama-load":
        return _load_seconds(quick)
    if name == "llama-text":
        return _completion_text_ms(quick)
    if name.startswith("decode-"):
        return _decode_seconds(name.removeprefix("decode-"), quick)
    if name == "vllm-few":
        steps = 300 if quick else 6000
        return simulated.run_vllm("ngramdraft-vllm", FEW, steps, quick)["us_per_seq_step"]
    stream = np.load(tokens_path)
    if name == "finish":
        return _finish_per_sequence(stream)
    if name == "load":
        return _load_ms(stream)
    if name == "suffix-replay":
        n = 20_000 if quick else len(stream)
        result = replay(stream[:n], 4096, 8, rules="suffix")
        return result.t_draft_ms * 1000 / result.n_predict
    if name == "suffix-start":
        return _start_finish(stream, quick)
    if name == "suffix-edit":
        return _edit_per_token(quick)
    if name in ("suffix-rebase", "suffix-evict"):
        return _slowest_during_rebuilds(stream, quick, evict=name == "suffix-evict")
    if name in ("suffix-batch", "suffix-sync"):
        batch = BatchDrafter(rules="suffix", max_seqs=BATCH)
        return _per_row(batch, stream, quick, sync=name == "suffix-sync")
    if name in ("suffix-corpus", "suffix-long"):
        corpus = SuffixCorpus.open(corpus_path)
        corpus.prefault().wait()
        drafter = Drafter(rules="suffix", static=corpus)
        if name == "suffix-long":
            return _per_call_long(drafter, stream, quick)
        return _per_call(drafter, stream, quick)
    static = StaticCache.open(corpus_path)
    static.prefault().done.wait()
    if name == "replay":
        n = 20_000 if quick else len(stream)
        replay(stream[:4200], 4096, 8, static)  # loads the kernels
        result = replay(stream[:n], 4096, 8, static)
        return result.t_draft_ms * 1000 / result.n_drafted
    if name == "drafter":
        return _per_call(Drafter(static=static), stream, quick)
    size = FEW if name == "batch-few" else BATCH
    return _per_row(BatchDrafter(static=static, max_seqs=size), stream, quick, size=size)


def _model(smoke):
    """The trained model the load and decode probes run, or a smoke run's tiny random one."""
    return str(engines.smoke_gguf()) if smoke else "qwen2.5-coder-0.5b-instruct"


def _load_seconds(smoke):
    """Seconds of real_model's "suffix" load: load_llama with a suffix-rules NgramDraftModel
    (passes timed at load, or read where an earlier load kept them)."""
    engine = engines.LlamaCpp(_model(smoke))
    engine.load("none").llama.close()  # the file read once, untimed
    t0 = time.perf_counter()
    engine.load("suffix")
    return time.perf_counter() - t0


def _completion_text_ms(smoke):
    """ms in ``Llama.detokenize`` while ``create_completion`` answers the first open question
    with real_model's "suffix" drafter, up to 300 tokens."""
    from ngramdraft.integrations.llama_cpp import chat_text

    llama = engines.LlamaCpp(_model(smoke)).load("suffix").llama
    prompt = chat_text(llama, workloads.chat("open", smoke)[0].messages([]))[0]
    detokenize, spent = llama.detokenize, []

    def timed(*args, **kwargs):
        t0 = time.perf_counter()
        text = detokenize(*args, **kwargs)
        spent.append(time.perf_counter() - t0)
        return text

    llama.detokenize = timed  # the instance's, before the class's: the host calls this one
    llama.create_completion(prompt, max_tokens=300, temperature=0.0)
    return 1000 * sum(spent)


def _decode_seconds(workload, smoke):
    """Seconds of decode of real_model's "suffix" drafter over a workload's requests."""
    answering = engines.LlamaCpp(_model(smoke)).load("suffix")
    sessions = workloads.chat(workload, smoke)
    return sum(a.decode_s for _, _, a in workloads.answered(answering, sessions))


def _per_row(batch, stream, quick, sync=False, size=BATCH):
    """us per sequence-step: draft(all) and accept(all, one token each), ``size`` windows;
    or ``sync``, the windows so far handed over whole."""
    steps = 100 if quick else 400
    ids = list(range(size))
    offsets = np.linspace(0, len(stream) - steps - 200, size).astype(int)
    table = np.stack([stream[at : at + 64 + steps] for at in offsets]).astype(np.int32)
    for i in ids:
        batch.add(i, table[i, :64])
    timed = 0.0
    for step in range(steps):
        lengths = np.full(size, 64 + step + 1)
        t0 = time.perf_counter()
        batch.draft(ids)
        if sync:
            batch.sync(ids, table, lengths)
        else:
            batch.accept(ids, [[int(token)] for token in table[:, 64 + step]])
        if step >= 10:  # the first steps load the kernels
            timed += time.perf_counter() - t0
    return 1e6 * timed / ((steps - 10) * size)


def _edit_per_token(quick):
    """us per output token of the edit workload, teacher-forced (16-token drafts), whose
    clock times the draft and accept calls."""
    requests = workloads.edit(2_000 if quick else 10_000)
    runs = [drafters.run("edit", "suffix", 16, requests) for _ in range(2 if quick else 6)]
    return statistics.mean(run["us_per_token"] for run in runs[1:])  # the first loads kernels


def _per_call_long(drafter, stream, quick):
    """us per draft() + accept() of one token after a LONG_PROMPT-token prompt (half the
    stream, if that is shorter), teacher-forced over the stream's next tokens, the first
    thousand untimed (kernel loading)."""
    cut = min(LONG_PROMPT, len(stream) // 2)
    prompt, rest = stream[:cut], stream[cut:].tolist()
    rest = rest[: (5_000 if quick else 40_000) + 1000]
    drafter.start(prompt)
    for i, token in enumerate(rest):
        if i == 1000:
            t0 = time.perf_counter()
        drafter.draft()
        drafter.accept([token])
    return 1e6 * (time.perf_counter() - t0) / (len(rest) - 1000)


def _per_call(drafter, stream, quick):
    """us per draft() + accept() of one token, teacher-forced over 4,096-token windows."""
    steps = 20_000 if quick else 100_000
    tokens = stream.tolist()
    timed = 0.0
    done = 0
    for start in range(0, len(tokens) - 4096, 4096):
        drafter.start(tokens[start : start + 64])
        t0 = time.perf_counter()
        for token in tokens[start + 64 : start + 4096]:
            drafter.draft()
            drafter.accept([token])
        if start:  # the first window loads the kernels
            timed += time.perf_counter() - t0
            done += 4096 - 64
        drafter.finish()
        if done >= steps:
            break
    return 1e6 * timed / done


def _finish_per_sequence(stream, length=640):
    """us per finish() of a ``length``-token sequence into a dynamic cache holding the
    stream's first four fifths as such sequences; the median over the last fifth's."""
    from ngramdraft import Drafter, NgramCache

    drafter = Drafter(dynamic=NgramCache())
    held = len(stream) * 4 // 5
    times = []
    for at in range(0, len(stream) - length, length):
        drafter.start(stream[at : at + length])
        t0 = time.perf_counter()
        drafter.finish()
        if at >= held:
            times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times)


def _load_ms(stream):
    """ms per NgramCache.load of a dynamic file of the stream's n-grams, the median of five."""
    from ngramdraft import NgramCache

    cache = NgramCache()
    cache.update(stream)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "dynamic.ngd"
        cache.save(path)
        times = []
        for _ in range(6):  # the first reads the file into the page cache
            t0 = time.perf_counter()
            NgramCache.load(path)
            times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times[1:])


def _start_finish(stream, quick):
    """us per prompt token of start(a long prompt) + finish(), the first pair untimed."""
    from ngramdraft import Drafter

    drafter, prompt = Drafter(rules="suffix"), stream[:LONG_PROMPT]
    times = []
    for _ in range(4 if quick else 11):
        t0 = time.perf_counter()
        drafter.start(prompt)
        drafter.finish()
        times.append(time.perf_counter() - t0)
    return 1e6 * statistics.median(times[1:]) / len(prompt)


def _slowest_during_rebuilds(stream, quick, evict):
    """ms: the slowest draft() + accept() while another thread rebuilds the earlier requests:
    holds them anew, or (``evict``) adds requests past their budget."""
    import threading

    from ngramdraft import Drafter, RequestMemory

    held = np.resize(stream, MEMORY).astype(np.int32)
    held[4095::4096] = -1  # requests of 4,096 tokens, each ended as a memory holds them
    memory = RequestMemory(max_tokens=MEMORY)
    memory.hold(held)
    drafter = Drafter(rules="suffix", dynamic=memory)
    drafter.start(stream[:64].tolist())
    done = threading.Event()

    def rebuild():
        if evict:  # each half a budget of adds evicts the oldest half
            for at in range(0, (1 if quick else 3) * MEMORY // 2, 4096):
                memory.add(held[at % MEMORY : at % MEMORY + 4095])
        else:
            for _ in range(2 if quick else 5):
                memory.hold(held)
        done.set()

    slowest, at = 0.0, 64
    worker = threading.Thread(target=rebuild)
    worker.start()
    while not done.is_set():
        t0 = time.perf_counter()
        drafter.draft()
        drafter.accept([int(stream[at % len(stream)])])
        slowest = max(slowest, time.perf_counter() - t0)
        at += 1
    worker.join()
    return 1e3 * slowest


def data(smoke, probes):
    """({corpus kind: path} for the probes, test stream .npy path), built once."""
    corpora.SMOKE = smoke
    size = 1 if smoke else corpora.FULL_MB
    kinds = {PROBES[name] for name in probes}
    corpus = {None: "-"}
    if "static" in kinds:
        corpus["static"] = str(corpora.static_cache(size).path)
    if "suffix" in kinds:
        corpus["suffix"] = str(corpora.suffix_corpus(size).path)
    stream_path = corpora.DATA / f"ab-test-{'smoke' if smoke else 'full'}.npy"
    if not stream_path.exists():
        np.save(stream_path, corpora.test_stream(40_000 if smoke else 200_000))
    return corpus, stream_path


UNITS = {
    "replay": "us per drafted token",
    "drafter": "us per draft()+accept()",
    "batch": f"us per sequence-step ({BATCH} sequences)",
    "batch-few": f"us per sequence-step ({FEW} sequences)",
    "vllm-few": f"us per sequence-step of propose() ({FEW} requests)",
    "suffix-corpus": "us per draft()+accept()",
    "suffix-long": "us per draft()+accept(), 64k context",
    "finish": "us per finish() of 640 tokens",
    "load": "ms per NgramCache.load of the stream's n-grams",
    "suffix-batch": f"us per sequence-step ({BATCH} sequences)",
    "suffix-sync": f"us per sequence-step ({BATCH} sequences)",
    "suffix-replay": "us per replayed token",
    "suffix-start": "us per prompt token",
    "suffix-rebase": "ms, the slowest draft()+accept()",
    "suffix-evict": "ms, the slowest draft()+accept()",
    "suffix-edit": "us per output token",
    "llama-load": "s, load_llama with a policy that learns pass costs",
    "llama-text": "ms in Llama.detokenize over a 300-token completion",
    **{f"decode-{w}": f"s of decode, the suffix rules answering {w}" for w in workloads.CHATS},
}


def work(spec):
    return probe(spec["probe"], spec["corpus"], spec["tokens"], spec["smoke"])


def main():
    ap = harness.parser(__doc__.split("\n\n")[0], rounds=5)
    ap.add_argument("--before", help="the first checkout's src folder")
    ap.add_argument("--after", help="the second checkout's src folder")
    ap.add_argument(
        "--probes", help=f"which probes, comma-separated (all; a smoke run's: {SMOKE_PROBES})"
    )
    args = ap.parse_args()
    if harness.worker_main(args, work):
        return
    started, quiet = time.time(), harness.Quiet()
    if args.smoke:  # this checkout against itself, short probes
        args.rounds, args.probes = 1, args.probes or SMOKE_PROBES
        args.before = args.before or str(harness.REPO / "src")
        args.after = args.after or str(harness.REPO / "src")
    if not (args.before and args.after):
        ap.error("--before and --after name the two checkouts' src folders")
    probes = (args.probes or ",".join(PROBES)).split(",")
    if unknown := set(probes) - set(PROBES):
        ap.error(f"unknown probes {sorted(unknown)}: choose from {', '.join(PROBES)}")
    corpus, tokens = data(args.smoke, probes)
    variants = {
        "before": str(Path(args.before).resolve()),
        "after": str(Path(args.after).resolve()),
    }
    runs = {(v, name): [] for v in variants for name in probes}
    # Round 0 compiles each checkout's kernels: not counted.
    pairs = [(name, v) for name in probes for v in variants]
    for r, (name, v) in harness.rounds(pairs, args.rounds + 1):
        spec = {
            "probe": name,
            "corpus": corpus[PROBES[name]],
            "tokens": str(tokens),
            "smoke": args.smoke,
        }
        value = harness.fresh(__file__, spec, env={"PYTHONPATH": variants[v]})
        print(f"round {r} {v:<6} {name:<8} {value:.3f}", file=sys.stderr, flush=True)
        if r:
            runs[(v, name)].append(value)
    rows = []
    for name in probes:
        b, a = runs[("before", name)], runs[("after", name)]
        rows.append(
            {
                "probe": name,
                "unit": UNITS[name],
                "before": harness.spread(b),
                "after": harness.spread(a),
                "after_over_before": statistics.median(a) / statistics.median(b),
            }
        )
    result = {
        "variants": variants,
        "rounds": args.rounds,
        "rows": rows,
        "runs": {f"{v} {n}": x for (v, n), x in runs.items()},
    }
    harness.save(
        "ab", result, markdown, smoke=args.smoke, as_json=args.json, started=started, quiet=quiet
    )


def markdown(result):
    variants = result["variants"]
    lines = [
        f"# A/B: {variants['before']} vs {variants['after']}",
        "",
        f"{result['rounds']} rounds, each (checkout, probe) a fresh process, interleaved; "
        "medians with ranges.",
        "",
        "| probe | unit | before | after | after / before |",
        "|---|---|---:|---:|---:|",
    ]
    for row in result["rows"]:
        lines.append(
            f"| {row['probe']} | {row['unit']} | {harness.fmt(row['before'], '.3f')} "
            f"| {harness.fmt(row['after'], '.3f')} | {row['after_over_before']:.2f} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
