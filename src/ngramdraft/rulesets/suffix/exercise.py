"""The suffix rules' every kernel, run once on tiny inputs: building and reading a corpus,
the requests file, replay, a Drafter with and without its policy, batches."""

from pathlib import Path

from ...build.suffixes import build_suffix_corpus
from ...caches.requests import RequestMemory
from ...caches.suffix_corpus import SuffixCorpus
from ...drafting.batch import BatchDrafter
from ...drafting.drafter import Drafter
from ...drafting.policy import CostAwareLength
from ...drafting.practice import drive_batch, drive_drafter, practice_tokens
from ...drafting.replay import replay


def exercise(folder: Path) -> None:
    """Run every kernel of the rule set on tiny inputs in ``folder`` (files written
    there): what ``cli/compiled.py`` compiles once for an installation."""
    stream = practice_tokens()
    build_suffix_corpus(stream, folder / "c.ngd")
    corpus = SuffixCorpus.open(folder / "c.ngd")
    corpus.verify(deep=True)
    memory = RequestMemory()
    memory.add(stream[:500])
    memory.save(folder / "r.ngd")
    replay(stream, 256, 8, corpus, folder / "r.ngd", rules="suffix", dump=True)
    for policy in (None, CostAwareLength()):
        drive_drafter(Drafter(corpus, folder / "r.ngd", rules="suffix", policy=policy), stream)
    drive_drafter(Drafter(rules="suffix", n_draft=32), stream)
    for n in (4, 40):
        drive_batch(BatchDrafter(corpus, memory, rules="suffix", max_seqs=n), stream, n)
