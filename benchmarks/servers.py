"""Servers as a user runs them: llama.cpp's own llama-server, plain and with each of its
n-gram drafters, against `ngramdraft serve`, over HTTP, streamed.

    python benchmarks/servers.py [--models qwen2.5-coder-0.5b-instruct,...]
        [--workloads apply-edit,...] [--configs NAME,...] [--rounds 2] [--max-tokens N]
        [--llama-server PATH] [--before OTHER/src] [--smoke]
    python benchmarks/servers.py --rescore RESULTS.json

A CPU user who wants prompt-lookup speed runs one of two commands: llama.cpp's
``llama-server`` with a ``--spec-*`` flag, or ``ngramdraft serve``. Each
configuration (:data:`CONFIGS`) is a fresh server process per round, on one
model file, 2 threads and one slot, its rounds interleaved with the others'
(reversed every other round). The client here sends each chat workload's
turns (``common/workloads.py``: the trained-model benchmark's five) as
streamed ``/v1/completions`` requests, greedy (``temperature: 0`` and
nothing else, as a user sends it), the prompt rendered once by the model's
own chat template so that both servers read the same text; a session's later
turns carry that server's own earlier answers.

Per request: the time to the first streamed token (the prompt), the time
after it (the decode), the text and its tokens (the model's tokenizer), and
the server's own draft counters (``timings.draft_n`` and
``draft_n_accepted`` in a completion's last chunk, which both servers send).
Ratios are taken within a round against plain ``llama-server``'s run of the
same requests, each configuration's decode taken at plain llama-server's
length (its decode time per token, times plain's tokens): where an answer
parts from plain llama-server's at a near tie it may run longer or stop
sooner, and its time alone would count that as speed. Where an output differs, the first
differing token is weighed by the plain model's logits there
(``first_difference``, a plain ``llama_cpp.Llama`` of the same file).
``--before OTHER/src`` adds ``ngramdraft serve (before)``: the same command
run from another checkout's ``src``, interleaved with this one's, so that a
change to ``serve`` is judged against the code before it in one run.
``--rescore`` makes an earlier run's table and divergences again, as a new
results file (runs before 2026-12-07 17:00 neither counted the answers'
tokens nor read the prompt's chat markers as special tokens when weighing a
divergence).

llama-server comes from ``../shared/llama-server/build.sh`` (the same
llama.cpp and CPU flags as the llama-cpp-python wheel). ``--smoke`` runs a
tiny random model for seconds: ngramdraft's side always, llama-server's
where it is built.
"""

import http.client
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import engines, harness, workloads

DEFAULT_LLAMA_SERVER = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    / "ngramdraft-peers"
    / "llama-server-0.3.36"
    / "bin"
    / "llama-server"
)
PLAIN = "llama-server"
# `ngramdraft serve` from the checkout --before names (PYTHONPATH), beside this one's.
BEFORE = "ngramdraft serve (before)"
# name -> (server, its arguments beyond the model, threads, context and port)
CONFIGS = {
    PLAIN: ("llama-server", []),
    "llama-server --spec-default": ("llama-server", ["--spec-default"]),
    "llama-server ngram-mod": ("llama-server", ["--spec-type", "ngram-mod"]),
    "llama-server ngram-simple": ("llama-server", ["--spec-type", "ngram-simple"]),
    "llama-server ngram-map-k": ("llama-server", ["--spec-type", "ngram-map-k"]),
    "llama-server ngram-map-k4v": ("llama-server", ["--spec-type", "ngram-map-k4v"]),
    "llama-server ngram-cache": ("llama-server", ["--spec-type", "ngram-cache"]),
    "llama-server -fa off": ("llama-server", ["-fa", "off"]),
    "llama-server -fa off --spec-default": ("llama-server", ["-fa", "off", "--spec-default"]),
    "ngramdraft serve --no-draft": ("ngramdraft", ["--no-draft"]),
    "ngramdraft serve": ("ngramdraft", []),
    "ngramdraft serve --n-draft 32": ("ngramdraft", ["--n-draft", "32"]),
    "ngramdraft serve --rules llamacpp": ("ngramdraft", ["--rules", "llamacpp"]),
    "ngramdraft serve -fa on": ("ngramdraft", ["-fa", "on"]),
    BEFORE: ("ngramdraft", []),
}
SMOKE_CONFIGS = (PLAIN, "llama-server --spec-default", "ngramdraft serve --no-draft",
                 "ngramdraft serve", BEFORE)  # fmt: skip
MODELS = "qwen2.5-coder-0.5b-instruct"
START_TIMEOUT = 600  # seconds a server may take to load (a first load compiles kernels)


def llama_server_path(given):
    path = Path(given or os.environ.get("NGRAMDRAFT_LLAMA_SERVER") or DEFAULT_LLAMA_SERVER)
    return path if path.exists() else None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One configuration's server process on a free loopback port, until stopped."""

    def __init__(self, config, model, binary, log_dir, before=None):
        kind, extra = CONFIGS[config]
        self.port = _free_port()
        common = ["--host", "127.0.0.1", "--port", str(self.port), "-c", str(engines.N_CTX)]
        threads = str(engines.THREADS)
        if kind == "llama-server":
            # One slot, as ngramdraft serves one request at a time; the rest as shipped.
            command = [str(binary), "-m", str(model), "-t", threads, "-tb", threads, "-np", "1",
                       *common, *extra]  # fmt: skip
        else:
            command = [sys.executable, "-m", "ngramdraft", "serve", str(model), "-t", threads,
                       *common, *extra]  # fmt: skip
        self.log = open(Path(log_dir) / f"{config.replace(' ', '_')}.log", "w+b")  # noqa: SIM115
        t0 = time.perf_counter()
        env = None if config != BEFORE else {**os.environ, "PYTHONPATH": str(before)}
        self.proc = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self._wait()
        self.load_s = time.perf_counter() - t0

    def _wait(self):
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            try:
                status, _ = self.get("/v1/models")
                if status == 200:
                    return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"server did not start:\n{self.output()[-3000:]}")
            time.sleep(0.25)

    def get(self, path):
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def complete(self, prompt, max_tokens):
        """A streamed greedy completion: its text, prompt and decode seconds, draft counts."""
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True}
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        t0 = time.perf_counter()
        connection.request(
            "POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        if response.status != 200:
            raise RuntimeError(f"{response.status}: {response.read()[:500]!r}")
        text, first, timings = "", None, {}
        for line in response:
            if not line.startswith(b"data: ") or line.strip() == b"data: [DONE]":
                continue
            event = json.loads(line[6:])
            piece = (event["choices"][0].get("text") or "") if event.get("choices") else ""
            if piece and first is None:
                first = time.perf_counter()
            text += piece
            timings = event.get("timings", timings)
        end = time.perf_counter()
        connection.close()
        first = first or end
        # Both servers give a completion's draft counts in its last chunk's timings.
        drafted, accepted = timings.get("draft_n", 0), timings.get("draft_n_accepted", 0)
        return {
            "text": text,
            "prompt_s": first - t0,
            "decode_s": end - first,
            "drafted": drafted,
            "accepted": accepted,
        }

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def run_config(config, model, vocab, names, max_tokens, binary, log_dir, smoke, before=None):
    """Every request of the workloads ``names`` on a fresh server of ``config`` (BEFORE's
    from the checkout ``before``)."""
    from ngramdraft.integrations.llama_cpp import chat_text

    server = Server(config, model, binary, log_dir, before)
    rows = []
    try:
        for name in names:
            for s, session in enumerate(workloads.chat(name, smoke)):
                answers = []
                for turn in range(len(session.turns)):
                    prompt = chat_text(vocab, session.messages(answers))[0]
                    limit = min(session.max_tokens, max_tokens or session.max_tokens)
                    got = server.complete(prompt, limit)
                    got["tokens"] = len(engines.answer_tokens(vocab, got["text"]))
                    answers.append(got["text"])
                    rows.append({"workload": name, "session": s, "turn": turn,
                                 "prompt": prompt, **got})  # fmt: skip
    finally:
        load_s = server.load_s
        server.stop()
    return {"load_s": load_s, "rows": rows}


def summarize(runs, base):
    """Per model, configuration and workload: medians and ranges over rounds of each
    round's ratios against ``base``'s run of the same requests (plain llama-server), the
    decode taken at its length."""
    table = []
    plain = {(r["round"], r["model"]): r for r in runs if r["config"] == base}
    keys = sorted({(r["model"], r["config"]) for r in runs}, key=lambda k: (k[0], _order(k[1])))
    for model, config in keys:
        mine = [r for r in runs if (r["model"], r["config"]) == (model, config)]
        names = list(dict.fromkeys(x["workload"] for x in mine[0]["rows"]))
        row = {"model": model, "config": config, "workloads": {}}
        for name in names:
            ratios = {"total": [], "decode": [], "prompt": []}
            same = drafted = accepted = requests = 0
            for r in mine:
                base = plain.get((r["round"], model))
                ours = [x for x in r["rows"] if x["workload"] == name]
                sums = _sums(ours)
                drafted += sums["drafted"]
                accepted += sums["accepted"]
                requests += len(ours)
                if base is None:
                    continue
                theirs = [x for x in base["rows"] if x["workload"] == name]
                b = _sums(theirs)
                # Our decode at plain llama-server's length: an answer that parts at a near tie
                # and runs longer, or stops sooner, is not slower or faster for it.
                longer = b["tokens"] / sums["tokens"] if b["tokens"] and sums["tokens"] else 1
                decode = sums["decode_s"] * longer
                ratios["total"].append(b["total_s"] / (sums["prompt_s"] + decode))
                ratios["decode"].append(b["decode_s"] / decode)
                ratios["prompt"].append(sums["prompt_s"] / b["prompt_s"])
                same += sum(x["text"] == y["text"] for x, y in zip(ours, theirs, strict=True))
            row["workloads"][name] = {
                **{k: harness.spread(v) for k, v in ratios.items() if v},
                "identical": same,
                "requests": requests,
                "drafted": drafted,
                "accepted": accepted,
                "seconds": harness.spread([_sums(_of(r, name))["total_s"] for r in mine]),
            }
        totals = [w["total"]["median"] for w in row["workloads"].values() if "total" in w]
        if totals:
            row["geomean"] = math.exp(statistics.fmean(math.log(t) for t in totals))
        row["load_s"] = harness.spread([r["load_s"] for r in mine])
        table.append(row)
    return table


def _of(run, name):
    return [x for x in run["rows"] if x["workload"] == name]


def _sums(rows):
    keys = ("prompt_s", "decode_s", "drafted", "accepted", "tokens")
    out = {k: sum(x[k] for x in rows) for k in keys}
    out["total_s"] = out["prompt_s"] + out["decode_s"]
    return out


def _order(config):
    return list(CONFIGS).index(config)


def divergences(runs, model_paths, base):
    """Where an output first parts from ``base``'s for the same prompt, the plain model's
    logits of the two tokens there (a plain llama_cpp.Llama of the same file, with
    llama-server's flash attention)."""
    from ngramdraft.integrations.llama_cpp import plain_llama
    from ngramdraft.integrations.llama_cpp_measure import first_difference

    plain = {(r["round"], r["model"]): r for r in runs if r["config"] == base}
    found, llamas = [], {}
    for r in runs:
        base = plain.get((r["round"], r["model"]))
        if base is None or r is base:
            continue
        for x, y in zip(r["rows"], base["rows"], strict=True):
            if x["text"] == y["text"] or x["prompt"] != y["prompt"]:
                continue
            if r["model"] not in llamas:
                llamas[r["model"]] = plain_llama(
                    model_paths[r["model"]],
                    n_ctx=engines.N_CTX,
                    flash_attn=True,  # llama-server's numerics: its `auto` turns it on
                    n_threads=engines.THREADS,
                    n_threads_batch=engines.THREADS,
                )
            llama = llamas[r["model"]]
            prompt = engines.prompt_tokens(llama, x["prompt"])
            plain_answer, ours = (engines.answer_tokens(llama, z["text"]) for z in (y, x))
            d = first_difference(llama, prompt, plain_answer, ours)
            found.append(
                {
                    "round": r["round"],
                    "model": r["model"],
                    "config": r["config"],
                    "workload": x["workload"],
                    "session": x["session"],
                    "turn": x["turn"],
                    "position": None if d is None else d.position,
                    "margin": None if d is None else abs(d.margin),
                    "top_gap": None if d is None else d.top_gap,
                }
            )
    return found


def markdown(result):
    lines = [
        "# Servers as a user runs them: llama-server against ngramdraft serve",
        "",
        f"{result['rounds']} rounds, each configuration a fresh server process per round, "
        f"interleaved; {result['threads']} threads, one slot, streamed `/v1/completions`, "
        "greedy (`temperature: 0` alone). Each cell: whole requests' speed over "
        f"`{result['base']}` in the same round, the decode taken at its answers' length (time "
        "per token times its tokens), median (range); decode alone in square brackets; then "
        "outputs identical to its, of requests.",
        "",
    ]
    for model in dict.fromkeys(row["model"] for row in result["table"]):
        rows = [row for row in result["table"] if row["model"] == model]
        names = list(rows[0]["workloads"])
        lines += [
            f"## {model}",
            "",
            "| server | " + " | ".join(names) + " | geomean | prompt time | drafted / accepted "
            "| load s |",
            "|---|" + "---:|" * (len(names) + 4),
        ]
        for row in rows:
            cells, prompts, drafted, accepted = [], [], 0, 0
            for name in names:
                w = row["workloads"][name]
                drafted, accepted = drafted + w["drafted"], accepted + w["accepted"]
                if "total" not in w:
                    cells.append("-")
                    continue
                prompts.append(w["prompt"]["median"])
                cells.append(
                    f"{harness.fmt(w['total'], unit='x')} [{w['decode']['median']:.2f}x] "
                    f"{w['identical']}/{w['requests']}"
                )
            geo = f"{row['geomean']:.2f}x" if "geomean" in row else "-"
            prompt = f"{statistics.median(prompts):.2f}x" if prompts else "-"
            lines.append(
                f"| {row['config']} | " + " | ".join(cells) + f" | {geo} | {prompt} | "
                f"{drafted} / {accepted} | {row['load_s']['median']:.1f} |"
            )
        lines.append("")
    if result["divergences"]:
        lines += [f"Outputs that part from `{result['base']}`'s, first differing token:", ""]
        for d in result["divergences"]:
            margin = (
                "no token to weigh"
                if d["margin"] is None
                else (
                    f"token {d['position']}, the plain model's logits {d['margin']:.3f} apart "
                    f"(its two best {d['top_gap']:.3f})"
                )
            )
            lines.append(
                f"- round {d['round'] + 1}, {d['config']}, {d['workload']} session "
                f"{d['session'] + 1} turn {d['turn'] + 1}: {margin}"
            )
        lines.append("")
    if result.get("left_out"):
        lines += [f"Left out: {result['left_out']}", ""]
    if result.get("rescored_from"):
        measured = result["measured"]
        lines += [
            f"The answers' tokens counted afterwards: the run is `{result['rescored_from']}`, "
            f"`{measured['command']}`; {harness.describe(measured)}.",
            "",
        ]
    return "\n".join(lines)


def rescore(path, as_json):
    """An earlier run's table and divergences made again: its answers' tokens counted, the
    first differing token weighed after the prompt as the servers read it."""
    result = json.loads(Path(path).read_text())
    paths = {run["model"]: engines.gguf(run["model"]) for run in result["runs"]}
    vocabs = {model: engines.vocabulary(p) for model, p in paths.items()}
    for run in result["runs"]:
        for row in run["rows"]:
            row["tokens"] = len(engines.answer_tokens(vocabs[run["model"]], row["text"]))
    result["table"] = summarize(result["runs"], result["base"])
    result["divergences"] = divergences(result["runs"], paths, result["base"])
    result["rescored_from"] = Path(path).name
    # save() gives the new file this command and machine; the run's own are kept apart.
    result["measured"] = {k: result.pop(k, None) for k in ("command", "machine", "quiet")}
    for key in ("benchmark", "seconds"):
        result.pop(key, None)
    harness.save("servers", result, markdown, smoke=False, as_json=as_json)


def main():
    ap = harness.parser(__doc__.splitlines()[0], rounds=2)
    ap.add_argument("--models", help=f"model names or GGUF paths (default {MODELS})")
    ap.add_argument("--workloads", help=f"default {','.join(workloads.CHATS)}")
    ap.add_argument("--configs", help=f"default all but {BEFORE!r}: {', '.join(CONFIGS)}")
    ap.add_argument("--max-tokens", type=int, help="cap every request's max_tokens")
    ap.add_argument("--llama-server", help=f"the binary (default {DEFAULT_LLAMA_SERVER})")
    ap.add_argument("--before", type=Path, help=f"another checkout's src: its serve runs "
                    f"beside this one's, as {BEFORE!r}")  # fmt: skip
    ap.add_argument("--rescore", type=Path, help="an earlier run's results: count its answers' "
                    "tokens and make its table again")  # fmt: skip
    args = ap.parse_args()
    if args.rescore:
        return rescore(args.rescore, args.json)
    binary = llama_server_path(args.llama_server)
    configs = args.configs.split(",") if args.configs else [c for c in CONFIGS if c != BEFORE]
    if unknown := set(configs) - set(CONFIGS):
        ap.error(f"no configurations {sorted(unknown)}: {', '.join(CONFIGS)}")
    if args.before:
        if not (args.before / "ngramdraft" / "__init__.py").is_file():
            ap.error(f"--before {args.before}: no ngramdraft package there (give a src folder)")
        args.before = args.before.resolve()
        configs += [BEFORE] if BEFORE not in configs else []
    elif BEFORE in configs:
        ap.error(f"{BEFORE!r} runs the checkout --before names: give --before OTHER/src")
    left_out = None
    if args.smoke:
        args.rounds, args.max_tokens = 1, args.max_tokens or 16
        args.workloads = args.workloads or "apply-edit,records"
        configs = [c for c in configs if c in SMOKE_CONFIGS]
        paths = {"random tiny": engines.smoke_gguf()}
    else:
        paths = {m: engines.gguf(m) for m in (args.models or MODELS).split(",")}
    if binary is None:
        if not args.smoke:
            ap.error("no llama-server: run ../shared/llama-server/build.sh (or --llama-server)")
        configs = [c for c in configs if CONFIGS[c][0] != "llama-server"]
        left_out = "llama-server's configurations: not built on this machine"
    names = (args.workloads or ",".join(workloads.CHATS)).split(",")
    base = PLAIN if PLAIN in configs else configs[0]  # a smoke run without llama-server
    started, quiet = time.time(), harness.Quiet()
    runs = []
    with tempfile.TemporaryDirectory() as logs:
        for model, path in paths.items():
            vocab = engines.vocabulary(path)
            for r, config in harness.rounds(configs, args.rounds):
                got = run_config(config, path, vocab, names, args.max_tokens, binary, logs,
                                 args.smoke, args.before)  # fmt: skip
                runs.append({"round": r, "model": model, "config": config, **got})
                total = sum(x["prompt_s"] + x["decode_s"] for x in got["rows"])
                print(f"round {r + 1}/{args.rounds} {model} {config:<36} {total:7.1f} s",
                      file=sys.stderr, flush=True)  # fmt: skip
    result = {
        "rounds": args.rounds,
        "threads": engines.THREADS,
        "n_ctx": engines.N_CTX,
        "max_tokens": args.max_tokens,
        "llama_server": None if binary is None else str(binary),
        "before": None if args.before is None else str(args.before),
        "base": base,
        "table": summarize(runs, base),
        "divergences": divergences(runs, paths, base),
        "left_out": left_out,
        "runs": runs,
    }
    harness.save(
        "servers", result, markdown, smoke=args.smoke, as_json=args.json, started=started,
        quiet=quiet,
    )  # fmt: skip


if __name__ == "__main__":
    main()
