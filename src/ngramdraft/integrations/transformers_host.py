"""Every private part of transformers that ngramdraft's adapter touches, in one place.

transformers takes a custom candidate source only through
``custom_generate`` callables that run its assisted-decoding loop
themselves: that loop (``_assisted_decoding``), the hook it asks for its
candidate generator (``_get_candidate_generator``) and the EOS tensor it
prepares on the generation config (``_eos_token_tensor``) are private. They
are reached here alone, checked before a call with one named error
(:func:`check`), so that a release that renames one fails by name, not
inside ``generate``.

Written against transformers :data:`WRITTEN_FOR` (the version CI installs).
"""

from typing import Any

from ..errors import EngineVersionError
from ..optional import require

WRITTEN_FOR = "5.25.0"


def check(model: Any) -> None:
    """Raise EngineVersionError if ``model``'s class lacks the assisted-decoding loop."""
    if not hasattr(type(model), "_assisted_decoding"):
        version = getattr(require("transformers", "transformers", "transformers drafting"),
                          "__version__", "?")  # fmt: skip
        raise EngineVersionError(
            f"transformers {version}: {type(model).__name__} has no _assisted_decoding; "
            f"ngramdraft's adapter was written for {WRITTEN_FOR}: "
            f"pip install transformers=={WRITTEN_FOR}"
        )


def eos_tokens(generation_config: Any) -> set[int]:
    """The end-of-sequence token ids ``generate`` prepared on its config (none: empty)."""
    eos = getattr(generation_config, "_eos_token_tensor", None)
    return set() if eos is None else {int(t) for t in eos.reshape(-1).tolist()}


def assisted_decoding(model: Any, generator: Any, input_ids: Any, **kwargs: Any) -> Any:
    """Run ``model``'s own assisted-decoding loop with ``generator`` as its candidates.

    The loop asks the model's ``_get_candidate_generator`` for them: shadowed on
    the instance for this call alone, the loop runs unchanged.
    """
    model._get_candidate_generator = lambda **_: generator
    try:
        return type(model)._assisted_decoding(model, input_ids, **kwargs)
    finally:
        del model._get_candidate_generator
