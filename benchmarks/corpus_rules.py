"""The corpus constants of the suffix rules, measured: teacher-forced on held-out prose.

For each (shortest match, fewest occurrences, least share) of the corpus
search (``rulesets/suffix/step.py``: ``CORPUS_MIN_MATCH``, ``CORPUS_MIN_COUNT``,
``CORPUS_MIN_SHARE``), a ``Drafter(rules="suffix", static=...)`` over the
541 MB Gutenberg training text's suffix file drafts held-out Gutenberg text
(the parity test stream, which e2e.py's open-ended workload reads):
tokens per pass, drafted per pass and the share accepted at k = 8, the
sequence and earlier requests as usual. Quality only (deterministic): one
process, one round.

    python benchmarks/corpus_rules.py [--tokens 20000] [--smoke]

The thresholds are the suffix drafter's ``corpus_min_match``,
``corpus_min_count`` and ``corpus_min_share``. Results:
``benchmarks/results/corpus_rules/STAMP.{md,json}``.
"""

import itertools
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import corpora, harness

MIN_MATCH = (2, 3, 4, 6)
MIN_COUNT = (1, 2, 4, 8)
MIN_SHARE = (50, 70, 90)  # the search needs 50 or more
K = 8
CHOSEN = (2, 4, 50)  # the suffix rules' defaults (docs/suffix.md; a test keeps them equal)


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

    ap = harness.parser(__doc__.split("\n")[0], rounds=1)
    ap.add_argument("--tokens", type=int, default=20000)
    args = ap.parse_args()
    started = time.time()
    corpora.SMOKE = args.smoke
    mb = 1 if args.smoke else corpora.FULL_MB
    grid = list(itertools.product(MIN_MATCH, MIN_COUNT, MIN_SHARE))
    if args.smoke:
        args.tokens, grid = 300, grid[:2]
    corpus = corpora.suffix_corpus(mb)
    stream = corpora.test_stream(512 + args.tokens)
    prompt, output = stream[:512], stream[512:]
    rows = []
    for match, count, share in [(0, 0, 0), *grid]:
        if match:
            drafter = Drafter(
                rules="suffix",
                static=corpus,
                n_draft=K,
                corpus_min_match=match,
                corpus_min_count=count,
                corpus_min_share=share,
            )
        else:
            drafter = Drafter(rules="suffix", n_draft=K)
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
    result = {"corpus_mb": mb, "tokens": len(output), "k": K, "chosen": CHOSEN, "rows": rows}
    harness.save(
        "corpus_rules", result, markdown, smoke=args.smoke, as_json=args.json, started=started
    )


def markdown(result):
    lines = [
        "# The suffix rules' corpus constants on held-out prose",
        "",
        f"{result['tokens']} held-out tokens, the "
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
