"""The corpus constants of the suffix rules, measured: teacher-forced on held-out prose.

For each (shortest match, fewest occurrences, least share) of the corpus
search (``rules/suffix.py``: ``CORPUS_MIN_MATCH``, ``CORPUS_MIN_COUNT``,
``CORPUS_MIN_SHARE``), a ``Drafter(rules="suffix", static=...)`` over the
541 MB Gutenberg training text's suffix file drafts held-out Gutenberg text
(the parity test stream, which e2e.py's open-ended workload reads):
tokens per pass, drafted per pass and the share accepted at k = 8, the
sequence and earlier requests as usual. Quality only (deterministic): one
process, one round.

    python benchmarks/corpus_rules.py [--quick] [--tokens 20000]
"""

import argparse
import itertools
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import corpora  # noqa: E402

MIN_MATCH = (2, 3, 4, 6)
MIN_COUNT = (1, 2, 4, 8)
MIN_SHARE = (50, 70, 90)  # the search needs 50 or more (kernels/suffixsearch.py)
K = 8


def replay(drafter, prompt, output):
    passes = drafted = accepted = i = 0
    drafter.start(prompt)
    while i < len(output):
        draft = drafter.draft()
        a = 0
        while a < len(draft) and i + a < len(output) and draft[a] == output[i + a]:
            a += 1
        drafter.accept(output[i : i + a + 1].tolist())
        i += a + 1
        passes += 1
        drafted += len(draft)
        accepted += a
    return passes, drafted, accepted


def main():
    from ngramdraft import Drafter
    from ngramdraft.kernels import suffixsearch as S
    from ngramdraft.rules import suffix as R

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="25 MB corpus, 2,000 tokens")
    ap.add_argument("--tokens", type=int, default=20000)
    args = ap.parse_args()
    mb = corpora.FULL_MB
    if args.quick:
        corpora.QUICK, mb, args.tokens = True, 25, 2000
    path, _ = corpora.suffix_corpus(mb)
    stream = corpora.test_stream(512 + args.tokens)
    prompt, output = stream[:512], stream[512:]
    rows = []
    t0 = time.perf_counter()
    for match, count, share in [(0, 0, 0), *itertools.product(MIN_MATCH, MIN_COUNT, MIN_SHARE)]:
        drafter = Drafter(rules="suffix", static=None if match == 0 else str(path), n_draft=K)
        if match:  # the search's parameters in the drafter's state (rules/suffix.py)
            params = drafter._st[R.CORPUS_ARGS : R.CORPUS_ARGS + 4]
            params[[S.MIN_MATCH, S.MIN_COUNT, S.MIN_SHARE]] = match, count, share
        passes, drafted, accepted = replay(drafter, prompt, output)
        rows.append(
            {
                "min_match": match,
                "min_count": count,
                "min_share": share,
                "tokens_per_pass": len(output) / passes,
                "drafted_per_pass": drafted / passes,
                "accepted_share": accepted / drafted if drafted else 0.0,
            }
        )
    result = {
        "corpus_mb": mb,
        "tokens": len(output),
        "k": K,
        "chosen": [R.CORPUS_MIN_MATCH, R.CORPUS_MIN_COUNT, R.CORPUS_MIN_SHARE],
        "rows": rows,
        "seconds": time.perf_counter() - t0,
    }
    corpora.save_results("corpus-rules", result, markdown)


def markdown(result):
    lines = [
        "# The suffix rules' corpus constants on held-out prose",
        "",
        f"`python benchmarks/corpus_rules.py`: {result['tokens']} held-out tokens, the "
        f"{result['corpus_mb']} MB corpus, k = {result['k']}; chosen (match, count, share): "
        f"{tuple(result['chosen'])}. Row 0: no corpus.",
        "",
        "| min match | min count | min share % | tokens/pass | drafted/pass | accepted |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['min_match']} | {r['min_count']} | {r['min_share']} | "
            f"{r['tokens_per_pass']:.3f} | {r['drafted_per_pass']:.3f} | "
            f"{r['accepted_share']:.1%} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
