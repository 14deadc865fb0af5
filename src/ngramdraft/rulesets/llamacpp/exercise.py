"""llama.cpp's rules' every kernel, run once on tiny inputs: building, reading and merging
both cache kinds, replay, a Drafter under each policy, batches on one thread and many."""

from pathlib import Path

from ...build.static import build_static, merge_static, static_from_llamacpp
from ...caches.ngram import NgramCache
from ...caches.static import StaticCache
from ...drafting.batch import BatchDrafter
from ...drafting.drafter import Drafter
from ...drafting.policy import AdaptiveLength, CostAwareLength
from ...drafting.practice import drive_batch, drive_drafter, practice_tokens
from ...drafting.replay import replay


def exercise(folder: Path) -> None:
    """Run every kernel of the rule set on tiny inputs in ``folder`` (files written
    there): what ``cli/compiled.py`` compiles once for an installation."""
    stream = practice_tokens()
    build_static(stream, folder / "s.ngd")
    static = StaticCache.open(folder / "s.ngd")
    static.verify(deep=True)
    merge_static([static, folder / "s.ngd"], folder / "m.ngd")
    dynamic = NgramCache()
    dynamic.update(stream)
    dynamic.save(folder / "d.ngd")
    dynamic.save(folder / "d.bin", "llamacpp")
    NgramCache.load(folder / "d.bin").merge(NgramCache.load(folder / "d.ngd"))
    static_from_llamacpp(folder / "d.bin", folder / "c.ngd")
    replay(stream, 256, 8, static, folder / "d.ngd", dump=True)
    replay(stream, 256, 8, folder / "c.ngd")
    for policy in (None, AdaptiveLength(), CostAwareLength([1.0] + [1.2] * 8)):
        drive_drafter(Drafter(static, folder / "d.ngd", policy=policy), stream)
    for n in (4, 40):
        drive_batch(BatchDrafter(static, NgramCache(), max_seqs=n), stream, n)
