"""The ngramdraft command line (also ``python -m ngramdraft``).

Every failure the library can name becomes one line on stderr,
``ngramdraft: error: ...``, and exit status 1 (2 for usage errors).
"""

import argparse
import json
import os
import signal
import sys
import textwrap
import time
import warnings
from pathlib import Path

from ._version import __version__
from .atomic import atomic_output
from .build import build_static
from .cache import NgramCache, file_format, file_kind
from .corpus import Corpus, DatasetSource, TextFileSource, cache_dir, tokenize
from .errors import EmptyCacheWarning, InvalidParameterError, NgramdraftError, NgramdraftWarning
from .policy import AdaptiveLength, CostAwareLength
from .replay import replay
from .shared import format_for
from .static import StaticCache, as_static
from .tokenfile import RAW_SUFFIXES, TokenFile
from .tokenizer import load_tokenizer

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text):
    """'512M', '1G', '1.5G' or a byte count -> bytes."""
    t = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = t[-1] if t and t[-1] in _UNITS else ""
    try:
        value = float(t[: len(t) - len(unit)])
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (use e.g. 512M or 1G)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive: {text!r}")
    return int(value * _UNITS[unit])


def _positive(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1: {text!r}")
    return value


def _subcommand(sub, name, summary, description, examples):
    return sub.add_parser(
        name,
        help=summary,
        description=textwrap.fill(description, 79),
        epilog="examples:\n" + "\n".join(f"  {e}" for e in examples),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _parser():
    p = argparse.ArgumentParser(
        prog="ngramdraft",
        description="Prompt-lookup (n-gram) speculative drafting with llama.cpp's rules: build "
        "caches, replay texts as llama.cpp's lookup-stats does, generate and serve with a model.",
        epilog="Run 'ngramdraft COMMAND --help' for a command's options and examples.",
    )
    p.add_argument("--version", action="version", version=f"ngramdraft {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    b = _subcommand(
        sub,
        "build-static",
        "count the 2-grams of a corpus into a static cache",
        "Count every (2-gram, follower) of a corpus into a static cache file, as "
        "llama.cpp's llama-lookup-create does. Inputs are token files, text files (with "
        "--tokenizer), local data files or a Hugging Face dataset.",
        [
            "ngramdraft build-static books/*.txt --tokenizer llama3 -o books.ngd",
            "ngramdraft build-static corpus.i32 -o corpus.ngd --memory-limit 1G",
            "ngramdraft build-static notes.txt --tokenizer model.gguf -o notes.ngd",
            "ngramdraft build-static books/*.txt --tokenizer llama3 -o books.ngd "
            "--cluster local:4 --memory-limit 2G",
        ],
    )
    b.add_argument(
        "inputs",
        nargs="*",
        metavar="INPUT",
        help="token files (.i32/.bin little-endian int32, .npy) or text files (.txt)",
    )
    b.add_argument("-o", "--output", required=True, metavar="CACHE", help="the cache to write")
    b.add_argument(
        "--memory-limit",
        type=parse_size,
        metavar="SIZE",
        help="target peak memory, e.g. 1G (default: one pass, as much as it takes); "
        "with --cluster, per worker",
    )
    b.add_argument(
        "--cluster",
        metavar="SPEC",
        help="count on Dask: local:N starts N worker processes here, tcp://HOST:PORT uses "
        "a running scheduler (pip install 'ngramdraft[dask]'); the file is the same",
    )
    b.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")
    add_corpus_arguments(b)

    r = _subcommand(
        sub,
        "replay",
        "replay a text as llama.cpp's lookup-stats does",
        "Replay a token stream in chunks of --n-ctx tokens, drafting --n-draft tokens at "
        "every position, as llama.cpp's llama-lookup-stats does, and report how many drafted "
        "tokens a model would have accepted.",
        [
            "ngramdraft replay heldout.txt --tokenizer llama3 --static books.ngd",
            "ngramdraft replay tokens.i32 -lcs books.ngd -lcd seen.bin --n-ctx 4096 --draft 8",
        ],
    )
    r.add_argument("tokens", metavar="TOKENS", help="token file (.i32/.bin/.npy) or text file")
    r.add_argument(
        "--tokenizer",
        metavar="NAME",
        help="tokenize a text file (and check the cache): a bundled name, "
        "MODEL.gguf or tokenizer.json",
    )
    r.add_argument("--token-cache", metavar="DIR", help="where tokenized texts are kept")
    _add_cache_arguments(r, "initial dynamic cache: native or llama.cpp lookup file")
    r.add_argument("--dump", metavar="FILE", help="write every draft call (parity dump format)")
    r.add_argument("--json", action="store_true", help="one JSON object on stdout")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress")

    c = _subcommand(
        sub,
        "convert",
        "llama.cpp lookup file <-> native static cache",
        "Convert a llama.cpp lookup file (llama-lookup-create's -lcs output) into a native "
        "static cache, or, with --to-llamacpp, any native cache into a lookup file that "
        "llama.cpp's llama-lookup and llama-server read.",
        [
            "ngramdraft convert lookup.bin -o lookup.ngd",
            "ngramdraft convert wiki.ngd --to-llamacpp -o wiki.bin",
        ],
    )
    c.add_argument("input", metavar="FILE", help="the cache to convert")
    c.add_argument("-o", "--output", required=True, metavar="FILE", help="the file to write")
    c.add_argument(
        "--to-llamacpp",
        action="store_true",
        help="write a llama.cpp lookup file from a native cache",
    )

    i = _subcommand(
        sub,
        "inspect",
        "sizes, counts and checksums of a cache file",
        "Print a cache file's kind, sizes, counts, sections and recorded metadata.",
        ["ngramdraft inspect wiki.ngd --verify", "ngramdraft inspect seen.bin --json"],
    )
    i.add_argument("cache", metavar="CACHE", help="a native cache or llama.cpp lookup file")
    i.add_argument("--verify", action="store_true", help="also check every checksum and invariant")
    i.add_argument("--json", action="store_true", help="one JSON object on stdout")

    m = _subcommand(
        sub,
        "merge-static",
        "combine static caches (e.g. built from shards)",
        "Add up the counts of several static caches into one (the same file as building "
        "from the joined corpora). Caches of different tokenizers are refused.",
        ["ngramdraft merge-static shard-*.ngd -o all.ngd --memory-limit 2G"],
    )
    m.add_argument("inputs", nargs="+", metavar="CACHE", help="static caches to combine")
    m.add_argument("-o", "--output", required=True, metavar="CACHE", help="the cache to write")
    m.add_argument(
        "--memory-limit", type=parse_size, metavar="SIZE", help="target peak memory, e.g. 1G"
    )
    m.add_argument("-q", "--quiet", action="store_true", help="no progress or summary")
    md = _subcommand(
        sub,
        "merge-dynamic",
        "add up dynamic caches (llama.cpp's llama-lookup-merge)",
        "Add up the counts of dynamic caches (native .ngd or llama.cpp lookup files) into "
        "one, as llama.cpp's llama-lookup-merge does. The output's format follows its "
        "suffix: .bin is a llama.cpp lookup file, anything else native.",
        [
            "ngramdraft merge-dynamic a.bin b.bin -o merged.bin",
            "ngramdraft merge-dynamic server-*.ngd -o all.ngd",
        ],
    )
    md.add_argument("inputs", nargs="+", metavar="CACHE", help="dynamic caches to add up")
    md.add_argument("-o", "--output", required=True, metavar="CACHE", help="the cache to write")

    g = _subcommand(
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
        type=_positive,
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

    s = _subcommand(
        sub,
        "serve",
        "OpenAI-compatible server (llama-cpp-python's) drafting with ngramdraft",
        "Serve a GGUF model over llama-cpp-python's OpenAI-compatible API (/v1/completions, "
        "/v1/chat/completions), drafting with ngramdraft; one request at a time, one shared "
        "dynamic cache.",
        ["ngramdraft serve model.gguf --static wiki.ngd --dynamic seen.ngd --port 8000"],
    )
    _add_model_arguments(s)
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    s.add_argument("--port", type=_positive, default=8000, help="port (default: 8000)")
    return p


def _add_model_arguments(p):
    p.add_argument("model", metavar="MODEL.gguf", help="a GGUF model file")
    _add_cache_arguments(p, "dynamic cache: loaded if it exists, saved as sequences finish")
    p.add_argument(
        "--adaptive",
        action="store_true",
        help="opt-in, beyond llama.cpp's rules: draft lengths follow the acceptance, and "
        "drafting pauses where little is accepted (ngramdraft.policy)",
    )
    p.add_argument(
        "-t",
        "--threads",
        type=_positive,
        metavar="N",
        help="CPU threads (default: llama.cpp's choice)",
    )


def _add_cache_arguments(p, dynamic_help):
    """The caches and sizes every drafting command takes, with llama.cpp's names and defaults."""
    p.add_argument(
        "--static",
        "-lcs",
        metavar="CACHE",
        help="static cache: native .ngd or llama.cpp lookup file (llama.cpp's -lcs)",
    )
    p.add_argument("--dynamic", "-lcd", metavar="FILE", help=f"{dynamic_help} (llama.cpp's -lcd)")
    p.add_argument(
        "-c",
        "--n-ctx",
        type=_positive,
        default=4096,
        metavar="N",
        help="context (chunk) size in tokens (default: 4096, as llama.cpp)",
    )
    p.add_argument(
        "--n-draft",
        "--draft",
        type=_positive,
        default=8,
        metavar="N",
        help="most tokens drafted per step (default: 8, as llama.cpp)",
    )


def _draft_model(args, policy=None):
    from .integrations.llama_cpp import NgramDraftModel

    if policy is None and args.adaptive:
        policy = AdaptiveLength()
    return NgramDraftModel(
        static=args.static, dynamic=args.dynamic, n_draft=args.n_draft, policy=policy
    )


def cmd_generate(args):
    from .integrations import llama_cpp as engine

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
    figures = {
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


def cmd_serve(args):
    from .integrations.llama_cpp_server import serve

    serve(
        args.model,
        draft_model=_draft_model(args),
        host=args.host,
        port=args.port,
        n_ctx=args.n_ctx,
        **({"n_threads": args.threads} if args.threads else {}),
    )


def add_corpus_arguments(p):
    g = p.add_argument_group("corpus (text is tokenized; token files are used as they are)")
    g.add_argument(
        "--dataset", metavar="NAME", help="Hugging Face dataset, e.g. Salesforce/wikitext"
    )
    g.add_argument("--config", metavar="NAME", help="dataset config, e.g. wikitext-103-raw-v1")
    g.add_argument(
        "--split", default="train", metavar="NAME", help="dataset split (default: train)"
    )
    g.add_argument(
        "--data-files",
        nargs="+",
        metavar="FILE",
        help="local text/jsonl/parquet/csv files, read by the same datasets builders",
    )
    g.add_argument(
        "--text-column",
        default="text",
        metavar="NAME",
        help="column holding the text in --dataset/--data-files (default: text)",
    )
    g.add_argument(
        "--tokenizer",
        metavar="NAME",
        help="bundled encoding (llama3, qwen3, cl100k_base, o200k_base), a GGUF model "
        "(MODEL.gguf: its own vocabulary), a tokenizer.json path, or a hub name",
    )
    g.add_argument(
        "--separate-documents",
        action="store_true",
        help="no 2-gram crosses a document boundary (default: one joined sequence, "
        "as llama-lookup-create)",
    )
    g.add_argument(
        "--token-cache",
        metavar="DIR",
        help="where token arrays are kept for reuse (default $NGRAMDRAFT_CACHE "
        "or ~/.cache/ngramdraft)",
    )


def corpus_from_args(args):
    """The Corpus that build-static's arguments name."""
    if args.dataset or args.data_files:
        if args.inputs:
            raise InvalidParameterError(
                "give exactly one corpus: token files, text files, --dataset or --data-files"
            )
        inputs = DatasetSource(
            args.dataset, args.config, args.split, args.data_files, args.text_column
        )
    else:
        inputs = args.inputs
    return Corpus.of(inputs, args.tokenizer, args.separate_documents)


def cmd_build_static(args):
    corpus = corpus_from_args(args)
    if args.cluster:
        from .distributed import build_on

        header = build_on(
            args.cluster, corpus, args.output, memory_limit=args.memory_limit, quiet=args.quiet
        )
    else:
        header = build_static(
            corpus.sources(args.token_cache, quiet=args.quiet),
            args.output,
            memory_limit=args.memory_limit,
            meta=corpus.meta(),
            quiet=args.quiet,
        )
    if header.n_keys == 0:
        warnings.warn(
            f"{args.output}: the corpus has {header.n_source_tokens} tokens and no 2-gram "
            "with a follower: the cache drafts nothing (is the input empty?)",
            EmptyCacheWarning,
            stacklevel=1,
        )
    _say(
        args,
        f"{args.output}: {header.n_keys} 2-grams, {header.n_entries} entries, "
        f"from {header.n_source_tokens} tokens",
    )


def cmd_replay(args):
    tokenizer = load_tokenizer(args.tokenizer) if args.tokenizer else None
    if Path(args.tokens).suffix in (*RAW_SUFFIXES, ".npy"):
        tokens = TokenFile(args.tokens)
    elif tokenizer is None:
        raise InvalidParameterError(f"{args.tokens}: a text file needs --tokenizer NAME")
    else:
        tokens, _ = tokenize(
            TextFileSource([args.tokens]), tokenizer, cache_dir(args.token_cache), quiet=True
        )
    seq = tokens.read(0, len(tokens))
    t0 = time.perf_counter()
    static = as_static(args.static) if args.static else None
    if static is not None and tokenizer is not None:
        static.check_tokenizer(tokenizer)
    t_load = 1000 * (time.perf_counter() - t0)
    result = replay(  # given a path, replay loads the dynamic cache itself (and times it)
        seq,
        args.n_ctx,
        args.n_draft,
        static,
        args.dynamic,
        dump=bool(args.dump),
        quiet=args.quiet or args.json,
    )
    result.t_load_ms += t_load
    if args.dump:
        with atomic_output(args.dump) as f:
            result.dump.astype("<i4").tofile(f)
    summary = result.to_dict()
    if args.json:
        print(json.dumps(summary))
        return
    for name in ("n_draft", "n_ctx", "n_predict", "n_calls", "n_drafted", "n_accept"):
        print(f"{name:<16}= {summary[name]}")
    print(f"{'accept':<16}= {summary['accept']:.3f}%")
    print(
        f"{'t_draft':<16}= {summary['t_draft_ms']:.2f} ms, "
        f"{summary['us_per_drafted']:.3f} us per drafted token"
    )
    print(f"{'t_load':<16}= {summary['t_load_ms']:.2f} ms (opening the caches)")
    print(f"{'t_startup':<16}= {summary['t_startup_ms']:.2f} ms (loading the compiled kernels)")
    print()
    print(
        textwrap.fill(
            f"What it means: of {result.n_predict} replayed tokens, {result.n_accept} "
            f"({result.from_drafts:.1f}%) came from accepted drafts ('accept' is accepted over "
            f"drafted: {result.n_accept} of {result.n_drafted}). A model would need "
            f"{result.passes} forward passes instead of {result.n_predict}: "
            f"{result.tokens_per_pass:.3f} tokens per pass, {result.n_accept} passes saved.",
            79,
        )
    )


def cmd_convert(args):
    if args.to_llamacpp:
        cache = _open_any(args.input)
        cache.save(args.output, "llamacpp")
        print(f"{args.output}: {len(cache)} n-grams, {cache.n_entries} entries (llama.cpp)")
    else:
        if file_format(args.input) == "native":
            raise InvalidParameterError(
                f"{args.input} is already a native cache (use --to-llamacpp to convert it back)"
            )
        cache = StaticCache.from_llamacpp(args.input, args.output)
        print(f"{args.output}: {len(cache)} 2-grams, {cache.n_entries} entries")


def _open_any(path):
    """A native static cache opened, anything else loaded into memory."""
    return StaticCache.open(path) if file_kind(path) == "static" else NgramCache.load(path)


def cmd_inspect(args):
    kind = file_kind(args.cache)
    if kind == "static":
        cache = StaticCache.open(args.cache)
        if args.verify:
            cache.verify(deep=True)
        info = cache.info()
    else:
        cache = NgramCache.load(args.cache)  # checks checksums and every record
        if args.verify:
            cache._check()
        keys = cache.arrays()[0]
        sizes = (keys >= 0).sum(axis=1)
        info = {
            "path": args.cache,
            "kind": kind,
            "file_bytes": Path(args.cache).stat().st_size,
            "n_ngrams": len(cache),
            "n_entries": cache.n_entries,
            "ngrams_by_size": {int(n): int((sizes == n).sum()) for n in range(1, 5)},
        }
    if args.verify:
        info["verified"] = True
    if args.json:
        print(json.dumps(info, indent=2))
        return
    for name, value in info.items():
        if isinstance(value, dict):
            print(f"{name}:")
            for k, v in value.items():
                print(f"  {k}: {v}")
        else:
            print(f"{name}: {value}")


def cmd_merge_static(args):
    cache = StaticCache.merge(
        args.inputs, args.output, memory_limit=args.memory_limit, quiet=args.quiet
    )
    _say(args, f"{args.output}: {len(cache)} 2-grams, {cache.n_entries} entries")


def cmd_merge_dynamic(args):
    merged = NgramCache()
    for path in args.inputs:
        merged.merge(NgramCache.load(path))
    merged.save(args.output, format_for(args.output))
    print(f"{args.output}: {len(merged)} n-grams, {merged.n_entries} entries")


def _say(args, text):
    if not args.quiet:
        print(text)


COMMANDS = {
    "build-static": cmd_build_static,
    "replay": cmd_replay,
    "convert": cmd_convert,
    "inspect": cmd_inspect,
    "merge-static": cmd_merge_static,
    "merge-dynamic": cmd_merge_dynamic,
    "generate": cmd_generate,
    "serve": cmd_serve,
}


def kernels_compiled():
    """Whether numba holds the drafting kernels compiled on disk (False when it cannot tell)."""
    from .kernels.replay import replay_chunk

    try:
        return os.path.exists(replay_chunk._cache._cache_file._index_path)
    except AttributeError:  # numba's cache layout is its own business
        return False


def _warn_with(show):
    """A showwarning printing ngramdraft's own warnings as one line, others as ``show`` does."""

    def warn(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, NgramdraftWarning):
            print(f"ngramdraft: warning: {message}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)

    return warn


def main(argv=None):
    args = _parser().parse_args(argv)
    if not kernels_compiled():
        print(
            "ngramdraft: compiling the kernels, once for this installation "
            "(about a minute; later runs load them in under a second)",
            file=sys.stderr,
            flush=True,
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always", NgramdraftWarning)
            warnings.showwarning = _warn_with(warnings.showwarning)
            COMMANDS[args.command](args)
    except BrokenPipeError:
        # The reader went away (`ngramdraft inspect X | head`): stop quietly, as
        # coreutils do, and keep the interpreter's final flush from failing again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except NgramdraftError as e:
        print(f"ngramdraft: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"ngramdraft: error: {e.filename or ''}: {e.strerror or e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("ngramdraft: interrupted", file=sys.stderr)
        return 130
    return 0
