"""Corpus suffix indexes side by side: ngramdraft's suffix file, infini-gram, libdivsufsort.

For prefixes of the Gutenberg training corpus (Llama-3 tokens), each variant
builds an index of the same tokens in a fresh process, interleaved over
rounds; per variant: build seconds, peak resident memory (the process's
ru_maxrss) and bytes per corpus token on disk. Then queries on the largest
prefix, over held-out text (64-token contexts): the longest suffix of the
context found in the corpus and what follows it.

* ``ngramdraft``: ``build_suffix_corpus``, the file the suffix rules draft
  from: tokens and a suffix array ordered to 64 tokens; queries:
  ``SuffixCorpus.longest_match``, and one 8-token draft of a
  ``Drafter(rules="suffix")`` from the corpus (``start`` on the context,
  not timed, then ``draft``).
* ``infini-gram``: the registry's ``infini-gram`` (2.6), its own indexer
  (``indexing.build_sa``, the Rust ``rust_indexing``) over the same tokens
  in its compact u16 layout (the corpus's 62,344 distinct Llama-3 ids
  renumbered densely: its u32 layout's indexer allocates a 32 GiB table,
  more than these machines have); query: ``InfiniGramEngine.infgram_ntd``,
  its longest-suffix next-token distribution.
* ``ngramdraft-2G``: the same with ``memory_limit`` 2 GiB (``--memory-limit
  2G``): shards sorted apart and merged, the same bytes.
* ``divsufsort``: ``pydivsufsort.divsufsort`` (libdivsufsort) alone, which
  ngramdraft's build sorts with (token ids as big-endian bytes, its only
  way): what joining, ordering ties to the depth and writing the file add.

    python benchmarks/corpus_index.py [--sizes 25 100 541] [--rounds 3] [--smoke]

Results: ``benchmarks/results/corpus_index/STAMP.{md,json}``.
"""

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, harness

VARIANTS = ("ngramdraft", "ngramdraft-2G", "infini-gram", "divsufsort")
CONTEXT = 64
SEPARATOR_U16 = 0xFFFF


def build_ngramdraft(tokens_path, out_dir, memory_limit=None):
    from ngramdraft import build_suffix_corpus

    out = out_dir / "corpus.ngd"
    build_suffix_corpus(tokens_path, out, memory_limit=memory_limit)
    return out.stat().st_size


def _dense_ids(tokens_path):
    """The corpus's ids, in order: infini-gram's u16 layout holds a token as its rank here."""
    return np.unique(np.fromfile(tokens_path, dtype="<i4"))


def build_infinigram(tokens_path, out_dir):
    from infini_gram import indexing

    ids = _dense_ids(tokens_path)
    if len(ids) >= SEPARATOR_U16:
        raise SystemExit(f"{len(ids)} distinct ids: more than infini-gram's u16 layout holds")
    tokens = np.searchsorted(ids, np.fromfile(tokens_path, dtype="<i4")).astype("<u2")
    save = out_dir / "ig"
    save.mkdir()
    np.save(out_dir / "ids.npy", ids)
    # Its layout: one document, opened by its separator; the document offsets file.
    with open(save / "tokenized.0", "wb") as f:
        f.write(np.array([SEPARATOR_U16], dtype="<u2").tobytes())
        f.write(tokens.tobytes())
    np.array([0], dtype="<u8").tofile(save / "offset.0")
    args = argparse.Namespace(
        save_dir=str(save),
        temp_dir=str(out_dir / "ig-tmp"),
        shards=1,
        workers=1,
        worker_id=0,
        cpus=os.cpu_count(),
        mem=16,
        token_width=2,
    )
    os.makedirs(args.temp_dir)
    cwd = os.getcwd()
    try:
        indexing.build_sa(args)
    finally:
        os.chdir(cwd)
    return sum(p.stat().st_size for p in save.iterdir())


def build_divsufsort(tokens_path, out_dir):
    from pydivsufsort import divsufsort

    sa = divsufsort(np.fromfile(tokens_path, dtype="<i4"))
    return len(sa) * sa.dtype.itemsize + os.path.getsize(tokens_path)


BUILDERS = {
    "ngramdraft": build_ngramdraft,
    "ngramdraft-2G": lambda tokens, out: build_ngramdraft(tokens, out, 2 << 30),
    "infini-gram": build_infinigram,
    "divsufsort": build_divsufsort,
}


def build_worker(spec):
    tokens_path = Path(spec["tokens"])
    out_dir = Path(spec["out"])
    t0 = time.perf_counter()
    size = BUILDERS[spec["variant"]](tokens_path, out_dir)
    seconds = time.perf_counter() - t0
    n = os.path.getsize(tokens_path) // 4
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"seconds": seconds, "peak_bytes": rss, "bytes_per_token": size / n, "n_tokens": n}


def _contexts(n):
    held = corpora.test_stream(200_000)
    rng = np.random.default_rng(0)
    starts = rng.integers(0, len(held) - CONTEXT, n)
    return [held[s : s + CONTEXT] for s in starts]


def query_worker(spec):
    contexts = _contexts(spec["queries"])
    out_dir = Path(spec["out"])
    if spec["variant"] == "ngramdraft":
        from ngramdraft import Drafter, SuffixCorpus

        t0 = time.perf_counter()
        corpus = SuffixCorpus.open(out_dir / "corpus.ngd")
        t_open = time.perf_counter() - t0
        corpus.prefault().wait()  # the pages mapped: queries, not page faults, are timed
        drafter = Drafter(rules="suffix", static=corpus, n_draft=8)
        corpus.longest_match(contexts[0])  # loads the kernels
        drafter.start(contexts[0])
        drafter.draft()
        t0 = time.perf_counter()
        lengths = [corpus.longest_match(c)[0] for c in contexts]
        t_longest = time.perf_counter() - t0
        t_draft = 0.0
        for c in contexts:
            drafter.start(c)  # a new sequence: unrelated contexts, no search to go on from
            t0 = time.perf_counter()
            drafter.draft()
            t_draft += time.perf_counter() - t0
            drafter.finish()
        return {
            "us_open": 1e6 * t_open,
            "us_longest": 1e6 * t_longest / len(contexts),
            "us_draft": 1e6 * t_draft / len(contexts),
            "mean_match": float(np.mean(lengths)),
        }
    from infini_gram.engine import InfiniGramEngine

    t0 = time.perf_counter()
    engine = InfiniGramEngine(index_dir=str(out_dir / "ig"), eos_token_id=0, token_dtype="u16")
    t_open = time.perf_counter() - t0
    dense = np.load(out_dir / "ids.npy")

    def rank(t):  # an id the corpus lacks: one past its ids, which no token holds
        i = int(np.searchsorted(dense, t))
        return i if i < len(dense) and dense[i] == t else len(dense)

    ids = [[rank(t) for t in c] for c in contexts]
    engine.infgram_ntd(prompt_ids=ids[0])
    t0 = time.perf_counter()
    answers = [engine.infgram_ntd(prompt_ids=c) for c in ids]
    seconds = time.perf_counter() - t0
    lengths = [a.get("suffix_len", 0) for a in answers]
    return {
        "us_open": 1e6 * t_open,
        "us_longest": 1e6 * seconds / len(ids),
        "mean_match": float(np.mean(lengths)),
    }


def run(sizes, rounds, queries, variants):
    result = {"sizes_mb": sizes, "rounds": rounds, "builds": {}, "queries": {}}
    for mb in sizes:
        tokens = corpora.prefix_file(mb)
        rows = {v: [] for v in variants}
        for _, variant in harness.rounds(variants, rounds):
            with tempfile.TemporaryDirectory(dir=corpora.DATA) as tmp:
                spec = {"variant": variant, "tokens": str(tokens), "out": tmp}
                rows[variant].append(harness.fresh(__file__, {"build": spec}))
        result["builds"][str(mb)] = {
            v: {
                "n_tokens": runs[0]["n_tokens"],
                "bytes_per_token": runs[0]["bytes_per_token"],
                "seconds": harness.spread([x["seconds"] for x in runs]),
                "peak_gib": harness.spread([x["peak_bytes"] / 2**30 for x in runs]),
            }
            for v, runs in rows.items()
        }
    largest = corpora.prefix_file(sizes[-1])
    keep = Path(tempfile.mkdtemp(dir=corpora.DATA))
    try:
        queried = [v for v in ("ngramdraft", "infini-gram") if v in variants]
        for variant in queried:
            spec = {"variant": variant, "tokens": str(largest), "out": str(keep)}
            harness.fresh(__file__, {"build": spec})
        runs = {v: [] for v in queried}
        for _, variant in harness.rounds(queried, rounds):
            spec = {"variant": variant, "out": str(keep), "queries": queries}
            runs[variant].append(harness.fresh(__file__, {"query": spec}))
        result["queries"] = {
            v: {
                "mean_match": rs[0]["mean_match"],
                **{k: harness.spread([x[k] for x in rs]) for k in rs[0] if k.startswith("us_")},
            }
            for v, rs in runs.items()
        }
    finally:
        shutil.rmtree(keep)
    return result


def markdown(result):
    lines = [
        "# Corpus suffix indexes: ngramdraft, infini-gram, libdivsufsort",
        "",
        f"Gutenberg training prefixes (Llama-3 tokens); medians of {result['rounds']} rounds "
        "(range), each build a fresh process, interleaved. 2 cores. Queries after the pages "
        "are mapped; open: the first call, cold for the process.",
        "",
        "| corpus | index | tokens | bytes/token | build s | peak GiB |",
        "|---|---|---:|---:|---:|---:|",
    ]
    fmt = "{median:.1f} ({min:.1f}-{max:.1f})"
    for mb, builds in result["builds"].items():
        for v, b in builds.items():
            lines.append(
                f"| {mb} MB | {v} | {b['n_tokens']:,} | {b['bytes_per_token']:.2f} | "
                f"{fmt.format(**b['seconds'])} | {fmt.format(**b['peak_gib'])} |"
            )
    lines += [
        "",
        f"Queries on the {result['sizes_mb'][-1]} MB index: held-out 64-token contexts, the "
        "longest suffix found and what follows (us per query).",
        "",
        "| index | open (us) | longest match (us) | 8-token draft (us) | mean match length |",
        "|---|---:|---:|---:|---:|",
    ]
    qfmt = "{median:.2f} ({min:.2f}-{max:.2f})"
    for v, q in result["queries"].items():
        draft = qfmt.format(**q["us_draft"]) if "us_draft" in q else "-"
        lines.append(
            f"| {v} | {qfmt.format(**q['us_open'])} | {qfmt.format(**q['us_longest'])} | "
            f"{draft} | {q['mean_match']:.2f} |"
        )
    return "\n".join(lines) + "\n"


def work(spec):
    corpora.SMOKE = spec.get("smoke", False)
    return build_worker(spec["build"]) if "build" in spec else query_worker(spec["query"])


def main():
    ap = harness.parser(__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", help="corpus prefixes in MB (25 100 541)")
    ap.add_argument("--queries", type=int, default=2000)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    args = ap.parse_args()
    if harness.worker_main(args, work):
        return
    started, quiet = time.time(), harness.Quiet()
    corpora.SMOKE = args.smoke
    if args.smoke:  # infini-gram's indexer is an extra: the smoke run leaves it out
        args.rounds, args.sizes, args.queries, args.variants = 1, [1], 50, "ngramdraft,divsufsort"
    sizes = args.sizes or [25, 100, corpora.FULL_MB]
    result = run(sizes, args.rounds, args.queries, args.variants.split(","))
    harness.save(
        "corpus_index",
        result,
        markdown,
        smoke=args.smoke,
        as_json=args.json,
        started=started,
        quiet=quiet,
    )


if __name__ == "__main__":
    main()
