"""The suffix rules (``docs/suffix.md``): opt-in, what followed the longest earlier match."""

from ...drafting.policy import CostAwareLength
from .batch import SuffixBatch as BATCH
from .drafter import SuffixDrafter as DRAFTER
from .exercise import exercise
from .replay import replay

# A match copies long stretches, and an engine verifies them at a cost it
# learns (CostAwareLength): drafting up to 64 lets it submit what pays. On an
# edit llama-server's ngram-mod submits 48-64 tokens, nearly all accepted; at
# 32 a draft's pass was the cap (docs/serving.md, "Against llama-server").
ENGINE_N_DRAFT = 64


def engine_policy() -> CostAwareLength:
    """A policy learning the engine's pass costs, which submits what they make worth it."""
    return CostAwareLength()


__all__ = ["BATCH", "DRAFTER", "ENGINE_N_DRAFT", "engine_policy", "exercise", "replay"]
