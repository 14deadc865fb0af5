"""Answer quality of a model's quantizations: how far each strays from the file as shipped.

    python benchmarks/quality.py [--models qwen2.5-coder-0.5b-instruct]
        [--quantizations Q4_0,Q8_0,F16] [--windows 16] [--smoke]

The speed of each quantization is ``real_model.py --quantizations``'s; this
says what each costs in answers. The shipped file and each quantization
made here from it (``common/engines.py``: llama.cpp's quantizer, the same
files) read the same texts through llama-cpp-python, as llama.cpp's
``llama-perplexity`` reads them: windows of 512 tokens, each scored on its
second half (every token there predicted from at least 256 before it).
Two texts no one here wrote:

* ``code``: the new files of ``common/edits.py``'s release pairs (what the
  ``apply-edit`` workload asks a model to write), one package after another;
* ``prose``: the held-out Gutenberg books (no cache here holds them).

Per file and text: perplexity; the mean and 99th percentile of the KL
divergence of its next-token distribution from the shipped file's (nats,
as ``llama-perplexity --kl-divergence`` reports it); and the share of
positions where its most likely token is the shipped file's, which is
where greedy answers part. A requantized file holds the shipped weights at
another precision, so these figures bound what that precision costs;
a file quantized from the full-precision weights loses less. Nothing is
timed: every file runs in this one process, window by window, so that only
the shipped file's distributions of one window are kept at a time.
Results: ``benchmarks/results/quality/STAMP.{md,json}``.
"""

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, edits, engines, harness

WINDOW = 512
TEXTS = ("code", "prose")


def text(kind: str, n_chars: int) -> str:
    """The first ``n_chars`` characters (about) of the ``code`` or ``prose`` text."""
    if kind == "prose":
        return corpora.test_text(n_chars)
    parts, size = [], 0
    for pair in edits.in_turn():
        parts.append(pair[5])
        size += len(pair[5])
        if size >= n_chars:
            break
    return "\n\n".join(parts)


def windows(llama, kind: str, n: int, width: int) -> list[list[int]]:
    """``n`` consecutive windows of ``width`` tokens of a text, in the model's tokens."""
    tokens = llama.tokenize(text(kind, 8 * n * width).encode(), add_bos=False, special=False)
    if len(tokens) < n * width:
        raise RuntimeError(f"the {kind} text has {len(tokens)} tokens, fewer than {n * width}")
    return [tokens[i * width : (i + 1) * width] for i in range(n)]


def log_probs(llama, window: list[int]) -> np.ndarray:
    """Log-probabilities of the next token at each position of the window's second half."""
    llama.reset()
    llama.eval(window)
    first = len(window) // 2
    logits = np.array(llama.scores[first - 1 : len(window) - 1], dtype=np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    logits -= np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return logits


def measure(files: dict[str, Path], n_windows: int, width: int) -> list[dict]:
    """Per (file, text): perplexity, KL from the first file's (the shipped), same top token."""
    from ngramdraft.integrations.llama_cpp import plain_llama

    llamas = {
        label: plain_llama(
            path,
            n_ctx=width,
            n_batch=width,
            logits_all=True,
            n_threads=engines.THREADS,
            n_threads_batch=engines.THREADS,
        )
        for label, path in files.items()
    }
    shipped = next(iter(llamas.values()))
    rows = []
    for kind in TEXTS:
        nll = {label: [] for label in files}
        kl = {label: [] for label in files}
        same = {label: [] for label in files}
        for window in windows(shipped, kind, n_windows, width):
            targets = np.array(window[width // 2 :])
            reference = p_reference = top = None
            for label, llama in llamas.items():
                lp = log_probs(llama, window)
                nll[label].append(-lp[np.arange(len(targets)), targets])
                if reference is None:
                    reference, p_reference, top = lp, np.exp(lp), lp.argmax(axis=1)
                kl[label].append((p_reference * (reference - lp)).sum(axis=1))
                same[label].append(lp.argmax(axis=1) == top)
        for label, path in files.items():
            divergence = np.concatenate(kl[label])
            rows.append(
                {
                    "file": label,
                    "bytes": path.stat().st_size,
                    "text": kind,
                    "tokens": int(sum(len(x) for x in nll[label])),
                    "perplexity": float(np.exp(np.concatenate(nll[label]).mean())),
                    "kl_mean": float(divergence.mean()),
                    "kl_p99": float(np.percentile(divergence, 99)),
                    "same_top": float(np.concatenate(same[label]).mean()),
                }
            )
    return rows


def markdown(result: dict) -> str:
    lines = [
        "# Answer quality of each quantization",
        "",
        f"Windows of {result['window']} tokens, each scored on its second half "
        f"({result['windows']} windows per text); KL divergence and same top token against "
        "the file as shipped.",
    ]
    for model in result["models"]:
        lines += [
            "",
            f"## {model['model']} (shipped: `{model['shipped']}`)",
            "",
            "| text | file | size | perplexity | KL mean (nats) | KL p99 | same top token |",
            "|---|---|---:|---:|---:|---:|---:|",
        ]
        for r in model["rows"]:
            lines.append(
                f"| {r['text']} | {r['file']} | {r['bytes'] / 1e6:.0f} MB "
                f"| {r['perplexity']:.3f} | {r['kl_mean']:.4f} | {r['kl_p99']:.3f} "
                f"| {100 * r['same_top']:.1f}% |"
            )
    return "\n".join(lines) + "\n"


def main():
    ap = harness.parser(__doc__.splitlines()[0], rounds=None)
    ap.add_argument("--models", default="qwen2.5-coder-0.5b-instruct", help="model names")
    ap.add_argument("--quantizations", default="Q4_0,Q8_0,F16", help="made here from the shipped")
    ap.add_argument("--windows", type=int, default=16, help="windows per text")
    args = ap.parse_args()
    started = time.time()
    width = WINDOW
    if args.smoke:
        smoke_model = str(engines.smoke_gguf())  # seconds, where a trained model takes minutes
        args.models, args.quantizations, args.windows, width = smoke_model, "Q8_0", 1, 128
    models = []
    for model in args.models.split(","):
        shipped = engines.gguf(model)
        files = {"as shipped": shipped}
        for q in filter(None, args.quantizations.split(",")):
            files[q] = engines.gguf(model, q)
        rows = measure(files, args.windows, width)
        models.append({"model": model, "shipped": shipped.name, "rows": rows})
    result = {"window": width, "windows": args.windows, "models": models}
    harness.save("quality", result, markdown, smoke=args.smoke, as_json=args.json, started=started)


if __name__ == "__main__":
    main()
