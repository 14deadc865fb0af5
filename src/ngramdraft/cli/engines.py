"""generate and serve: a GGUF model drafting with ngramdraft (llama-lookup, and a server)."""

import argparse
import dataclasses
import json
import os
from pathlib import Path
from typing import Any

from ..drafting.policy import AdaptiveLength, CostAwareLength, Policy
from ..drafting.rulesets import DEFAULT
from ..errors import InvalidParameterError
from ..files.models import MODELS, fetch_model
from .args import add_cache_arguments, positive, subcommand


def register(sub: Any) -> None:
    g = subcommand(
        sub,
        "generate",
        "generate with a GGUF model and ngramdraft drafting (llama.cpp's llama-lookup)",
        "Greedy generation with llama-cpp-python, drafting with ngramdraft through its own "
        "verification loop; prints the text, then the prompt's and the decode's time, "
        "tokens/s, forward passes, drafted and accepted tokens. --compare also runs a plain "
        "llama_cpp.Llama, as a user without ngramdraft would.",
        [
            "ngramdraft generate model.gguf -p 'def fib(n):' -n 128",
            "ngramdraft generate model.gguf --prompt-file doc.txt -n 256 -lcs wiki.ngd --compare",
            "ngramdraft generate qwen2.5-coder-0.5b-instruct --chat --rules suffix -n 400 "
            "--prompt-file request.txt --compare",
        ],
    )
    _add_model_arguments(g, DEFAULT)
    prompt = g.add_mutually_exclusive_group(required=True)
    prompt.add_argument("-p", "--prompt", metavar="TEXT", help="the prompt")
    prompt.add_argument("-f", "--prompt-file", metavar="FILE", help="read the prompt from FILE")
    g.add_argument(
        "--chat",
        action="store_true",
        help="the prompt is a user's message, put in the model's own chat template",
    )
    g.add_argument(
        "-n",
        "--n-predict",
        type=positive,
        default=256,
        metavar="N",
        help="most tokens to generate (default: 256; an end-of-generation token stops sooner)",
    )
    g.add_argument(
        "--compare",
        action="store_true",
        help="also generate with a plain llama_cpp.Llama: speedups, whether the outputs are "
        "identical, and if not where they part, with the plain model's logits there",
    )
    g.add_argument("--json", action="store_true", help="figures as one JSON object on stdout")
    g.set_defaults(run=generate_command)

    s = subcommand(
        sub,
        "serve",
        "OpenAI-compatible server (llama-cpp-python's) drafting with ngramdraft",
        "Serve a GGUF model over llama-cpp-python's OpenAI-compatible API (/v1/completions, "
        "/v1/chat/completions), drafting with ngramdraft through its own verification loop; "
        "one request at a time, one shared dynamic cache. By default the fastest "
        "configuration measured (benchmarks/servers.py): the suffix rules, drafts of up to "
        "64 tokens, each cut to what this model's measured pass costs make worth it; "
        "--rules llamacpp --no-policy drafts as llama.cpp does. A sampling field a request "
        "leaves out takes llama-server's default (repeat_penalty 1.0, so temperature 0 is "
        "greedy). Drafting figures since start: GET /metrics (Prometheus) and "
        "/ngramdraft/stats (JSON); GET /health answers without a key. SIGTERM or Ctrl-C "
        "saves every pending count and exits.",
        [
            "ngramdraft serve model.gguf --static wiki.ngd --dynamic seen.ngd --port 8000",
            "NGRAMDRAFT_API_KEY=secret ngramdraft serve model.gguf --host 0.0.0.0",
        ],
    )
    _add_model_arguments(s, "suffix")
    s.add_argument(
        "--no-draft",
        action="store_true",
        help="serve without drafting, through llama-cpp-python's own loop (the same server "
        "and model settings: a baseline)",
    )
    s.add_argument(
        "-fa",
        "--flash-attn",
        choices=("on", "off"),
        default="on",
        help="llama.cpp's flash attention (default: on, as llama-server's 'auto' chooses on a "
        "CPU: its greedy answers are then llama-server's, and long prompts cost less)",
    )
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    s.add_argument("--port", type=positive, default=8000, help="port (default: 8000)")
    s.add_argument(
        "--api-key",
        default=os.environ.get("NGRAMDRAFT_API_KEY") or None,
        metavar="KEY",
        help="clients must send 'Authorization: Bearer KEY' on every route but /health "
        "(default: $NGRAMDRAFT_API_KEY; unset or empty there: no key; an empty KEY here "
        "is an error)",
    )
    s.add_argument(
        "--verbose", action="store_true", help="show llama.cpp's loading log and each request"
    )
    s.add_argument(
        "--save-every",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="seconds between saves of --dynamic (default: 30; 0 saves after every request)",
    )
    s.set_defaults(run=serve_command)


def _add_model_arguments(p: argparse.ArgumentParser, rules: str) -> None:
    p.add_argument(
        "model",
        metavar="MODEL",
        help=f"a GGUF model file, or a trained model by name, fetched once ({', '.join(MODELS)})",
    )
    add_cache_arguments(
        p, "dynamic cache: loaded if it exists, saved as sequences finish", rules=rules
    )
    policies = p.add_mutually_exclusive_group()
    policies.add_argument(
        "--adaptive",
        action="store_true",
        help="opt-in, beyond llama.cpp's rules: draft lengths follow the acceptance, and "
        "drafting pauses where little is accepted (ngramdraft.AdaptiveLength)",
    )
    policies.add_argument(
        "--cost-aware",
        action="store_true",
        help="opt-in for llama.cpp's rules (the default of --rules suffix): submit the part of "
        "each draft that promises the most tokens per second, from this model's pass costs "
        "as measured while it runs (ngramdraft.CostAwareLength)",
    )
    policies.add_argument(
        "--no-policy",
        action="store_true",
        help="submit every draft whole, as llama.cpp does (the default of llama.cpp's rules; "
        "with --rules suffix, drafts of --n-draft tokens, 32 by default, each verified whole)",
    )
    p.add_argument(
        "-t",
        "--threads",
        type=positive,
        metavar="N",
        help="CPU threads, for decoding and for prompts (default: this machine's physical "
        "cores, as llama.cpp's own tools)",
    )


def model_file(name: str) -> str:
    """A model argument as a path: a known model's name is fetched (once), else a path."""
    return str(fetch_model(name)) if name in MODELS else name


def _draft_model(args: argparse.Namespace, save_every: float = 0.0) -> Any:
    from ..integrations.core import AUTO
    from ..integrations.llama_cpp import NgramDraftModel

    policy: Policy | None = AUTO
    if args.no_policy:
        policy = None
    elif args.adaptive:
        policy = AdaptiveLength()
    elif args.cost_aware:
        policy = CostAwareLength()
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
    from ..integrations import llama_cpp_measure as measure

    if args.prompt_file is not None:
        text = Path(args.prompt_file).read_text(encoding="utf-8")
    else:
        text = args.prompt
    path = model_file(args.model)
    settings = {"n_ctx": args.n_ctx, **_threads(args)}
    draft = _draft_model(args)
    llama = engine.load_llama(path, draft_model=draft, **settings)
    if args.chat:
        prompt = engine.chat_prompt(llama, [{"role": "user", "content": text}])
    else:
        prompt = llama.tokenize(text.encode("utf-8"), add_bos=True)
    if len(prompt) + args.n_predict > args.n_ctx:
        raise InvalidParameterError(
            f"prompt ({len(prompt)} tokens) + -n {args.n_predict} exceeds the context "
            f"(-c {args.n_ctx}): raise -c or lower -n"
        )
    runs = {"ngramdraft": measure.generate(llama, prompt, args.n_predict, draft)}
    draft.finish()
    parted = None
    if args.compare:
        del llama  # one model in memory at a time
        plain = engine.plain_llama(path, **settings)
        runs["plain Llama"] = measure.generate(plain, prompt, args.n_predict)
    figures: dict[str, Any] = {
        name: {
            "n_prompt": len(prompt),
            "n_tokens": len(g.tokens),
            "prompt_s": g.prompt_seconds,
            "decode_s": g.decode_seconds,
            "seconds": g.seconds,
            "tokens_per_s": g.tokens_per_s,
            "decode_tokens_per_s": g.decode_tokens_per_s,
            "forward_passes": g.passes,
            "tokens_per_pass": g.tokens_per_pass,
            "drafted": g.drafted,
            "accepted": g.accepted,
        }
        for name, g in runs.items()
    }
    if args.compare:
        ours, base = runs["ngramdraft"], runs["plain Llama"]
        figures["speedup"] = base.seconds / ours.seconds
        figures["decode_speedup"] = ours.decode_tokens_per_s / base.decode_tokens_per_s
        figures["identical"] = ours.tokens == base.tokens
        parted = measure.first_difference(plain, prompt, base.tokens, ours.tokens)
        figures["first_difference"] = None if parted is None else dataclasses.asdict(parted)
    if args.json:
        print(json.dumps(figures))
        return
    print(runs["ngramdraft"].text)
    print()
    for name, g in runs.items():
        rate = 100 * g.accepted / g.drafted if g.drafted else 0.0
        print(
            f"{name:<12} prompt {len(prompt)} tokens in {g.prompt_seconds:.2f} s; "
            f"{len(g.tokens)} tokens in {g.decode_seconds:.2f} s more "
            f"({g.decode_tokens_per_s:.1f} tokens/s after the first); {g.passes} forward "
            f"passes ({g.tokens_per_pass:.2f} tokens per pass); drafted {g.drafted}, accepted "
            f"{g.accepted} ({rate:.1f}%)"
        )
    if args.compare:
        same = "identical" if figures["identical"] else "DIFFERENT"
        print(
            f"speedup      {figures['speedup']:.2f}x the whole request, "
            f"{figures['decode_speedup']:.2f}x the decode; outputs {same}"
        )
        if parted is not None:
            print(_parted(parted, plain))


def _parted(d: Any, llama: Any) -> str:
    """Where the outputs part, in words, with the plain model's two logits there."""
    plain, ours = (repr(llama.detokenize([t]).decode("utf-8", "replace")) for t in d.tokens)
    return (
        f"parted at   token {d.position}: the plain model's logits there put its {plain} "
        f"{d.margin:.3f} above ngramdraft's {ours} ({d.logits[0]:.3f} against "
        f"{d.logits[1]:.3f}; its two best {d.top_gap:.3f} apart). A verification pass "
        "computes in batches and can tip so near a tie; a large margin would be a bug "
        "worth reporting."
    )


def serve_command(args: argparse.Namespace) -> None:
    from ..integrations.llama_cpp_server import serve

    if args.api_key is not None and not args.api_key.strip():
        raise InvalidParameterError(
            "--api-key is empty: give a key, or leave the option out to serve without one"
        )
    serve(
        model_file(args.model),
        draft_model=None if args.no_draft else _draft_model(args, save_every=args.save_every),
        host=args.host,
        port=args.port,
        api_key=args.api_key,
        verbose=args.verbose,
        n_ctx=args.n_ctx,
        flash_attn=args.flash_attn == "on",
        **_threads(args),
    )


def _threads(args: argparse.Namespace) -> dict[str, int]:
    from ..integrations.llama_cpp import physical_cores

    n = args.threads or physical_cores()
    return {"n_threads": n, "n_threads_batch": n}
