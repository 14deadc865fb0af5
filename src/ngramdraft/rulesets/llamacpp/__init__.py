"""llama.cpp's rules, bit for bit (``docs/rules.md``): the rule set by default."""

from .batch import LlamaCppBatch as BATCH
from .drafter import LlamaCppDrafter as DRAFTER
from .exercise import exercise
from .replay import replay

ENGINE_N_DRAFT = 8  # llama.cpp's own --draft default


def engine_policy() -> None:
    """No policy in an engine either: the drafts submitted are llama.cpp's."""
    return None


__all__ = ["BATCH", "DRAFTER", "ENGINE_N_DRAFT", "engine_policy", "exercise", "replay"]
