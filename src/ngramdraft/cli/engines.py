"""generate and serve: a GGUF model drafting with ngramdraft (llama-lookup, and a server)."""

import argparse
import json
import os
from pathlib import Path
from typing import Any

from ..drafting.policy import AdaptiveLength, CostAwareLength, Policy
from ..errors import InvalidParameterError
from .args import add_cache_arguments, positive, subcommand


def register(sub: Any) -> None:
    g = subcommand(
        sub,
        "generate",
        "generate with a GGUF model and ngramdraft drafting (llama.cpp's llama-lookup)",
        "Greedy generation with llama-cpp-python, drafting with ngramdraft; prints the text, "
        "then tokens/s, forward passes, drafted and accepted tokens.",
        [
            "ngramdraft generate model.gguf -p 'def fib(n):' -n 128",
            "ngramdraft generate model.gguf --prompt-file doc.txt -n 256 -lcs wiki.ngd --compare",
        ],
    )
    _add_model_arguments(g)
    prompt = g.add_mutually_exclusive_group(required=True)
    prompt.add_argument("-p", "--prompt", metavar="TEXT", help="the prompt")
    prompt.add_argument("-f", "--prompt-file", metavar="FILE", help="read the prompt from FILE")
    g.add_argument(
        "-n",
        "--n-predict",
        type=positive,
        default=256,
        metavar="N",
        help="tokens to generate (default: 256)",
    )
    g.add_argument(
        "--compare",
        action="store_true",
        help="also generate without drafting: speedup, and whether the outputs are identical",
    )
    g.add_argument(
        "--cost-aware",
        action="store_true",
        help="opt-in, beyond llama.cpp's rules: measure this model's forward-pass cost per "
        "batch size, then submit the part of each draft that promises the most tokens per "
        "second (ngramdraft.CostAwareLength)",
    )
    g.add_argument("--json", action="store_true", help="figures as one JSON object on stdout")
    g.set_defaults(run=generate_command)

    s = subcommand(
        sub,
        "serve",
        "OpenAI-compatible server (llama-cpp-python's) drafting with ngramdraft",
        "Serve a GGUF model over llama-cpp-python's OpenAI-compatible API (/v1/completions, "
        "/v1/chat/completions), drafting with ngramdraft; one request at a time, one shared "
        "dynamic cache. Drafting figures since start: GET /metrics (Prometheus) and "
        "/ngramdraft/stats (JSON). SIGTERM or Ctrl-C saves every pending count and exits.",
        [
            "ngramdraft serve model.gguf --static wiki.ngd --dynamic seen.ngd --port 8000",
            "NGRAMDRAFT_API_KEY=secret ngramdraft serve model.gguf --host 0.0.0.0",
        ],
    )
    _add_model_arguments(s)
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    s.add_argument("--port", type=positive, default=8000, help="port (default: 8000)")
    s.add_argument(
        "--api-key",
        default=os.environ.get("NGRAMDRAFT_API_KEY") or None,
        metavar="KEY",
        help="clients must send 'Authorization: Bearer KEY' (default: $NGRAMDRAFT_API_KEY)",
    )
    s.add_argument(
        "--save-every",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="seconds between saves of --dynamic (default: 30; 0 saves after every request)",
    )
    s.set_defaults(run=serve_command)


def _add_model_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL.gguf", help="a GGUF model file")
    add_cache_arguments(p, "dynamic cache: loaded if it exists, saved as sequences finish")
    p.add_argument(
        "--adaptive",
        action="store_true",
        help="opt-in, beyond llama.cpp's rules: draft lengths follow the acceptance, and "
        "drafting pauses where little is accepted (ngramdraft.AdaptiveLength)",
    )
    p.add_argument(
        "-t",
        "--threads",
        type=positive,
        metavar="N",
        help="CPU threads (default: llama.cpp's choice)",
    )


def _draft_model(
    args: argparse.Namespace, policy: Policy | None = None, save_every: float = 0.0
) -> Any:
    from ..integrations.llama_cpp import NgramDraftModel

    if policy is None and args.adaptive:
        policy = AdaptiveLength()
    return NgramDraftModel(
        static=args.static,
        dynamic=args.dynamic,
        n_draft=args.n_draft,
        policy=policy,
        save_every=save_every,
        rules=args.rules,
    )


def generate_command(args: argparse.Namespace) -> None:
    from ..integrations import llama_cpp as engine

    if args.prompt_file is not None:
        text = Path(args.prompt_file).read_text(encoding="utf-8")
    else:
        text = args.prompt
    if args.cost_aware and args.adaptive:
        raise InvalidParameterError("--adaptive and --cost-aware are two policies: choose one")
    llama = engine.load_llama(
        args.model, n_ctx=args.n_ctx, n_threads=args.threads, logits_all=True
    )  # engine.generate hands the host its draft model
    policy = None
    if args.cost_aware:  # the policy needs this model's pass costs, measured once here
        policy = CostAwareLength(engine.measure_pass_cost(llama, args.n_draft + 1))
    draft = _draft_model(args, policy)
    draft.check_model(llama)
    prompt = llama.tokenize(text.encode("utf-8"), add_bos=True)
    if len(prompt) + args.n_predict > args.n_ctx:
        raise InvalidParameterError(
            f"prompt ({len(prompt)} tokens) + -n {args.n_predict} exceeds the context "
            f"(-c {args.n_ctx}): raise -c or lower -n"
        )
    runs = {"ngramdraft": engine.generate(llama, prompt, args.n_predict, draft)}
    draft.finish()
    if args.compare:
        runs["no drafting"] = engine.generate(llama, prompt, args.n_predict, None)
    figures: dict[str, Any] = {
        name: {
            "n_tokens": len(g.tokens),
            "seconds": g.seconds,
            "tokens_per_s": g.tokens_per_s,
            "forward_passes": g.passes,
            "tokens_per_pass": g.tokens_per_pass,
            "drafted": g.drafted,
            "accepted": g.accepted,
        }
        for name, g in runs.items()
    }
    if args.compare:
        base = runs["no drafting"]
        figures["speedup"] = runs["ngramdraft"].tokens_per_s / base.tokens_per_s
        figures["identical"] = runs["ngramdraft"].tokens == base.tokens
    if args.json:
        print(json.dumps(figures))
        return
    print(runs["ngramdraft"].text)
    print()
    for name, g in runs.items():
        f = figures[name]
        rate = 100 * g.accepted / g.drafted if g.drafted else 0.0
        print(
            f"{name:<12} {f['n_tokens']} tokens in {g.seconds:.2f} s = {g.tokens_per_s:.1f} "
            f"tokens/s; {g.passes} forward passes ({g.tokens_per_pass:.2f} tokens per pass); "
            f"drafted {g.drafted}, accepted {g.accepted} ({rate:.1f}%)"
        )
    if args.compare:
        same = "identical" if figures["identical"] else "DIFFERENT"
        print(f"speedup      {figures['speedup']:.2f}x; outputs {same}")


def serve_command(args: argparse.Namespace) -> None:
    from ..integrations.llama_cpp_server import serve

    serve(
        args.model,
        draft_model=_draft_model(args, save_every=args.save_every),
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        n_ctx=args.n_ctx,
        **({"n_threads": args.threads} if args.threads else {}),
    )
