"""Hugging Face transformers: ngramdraft as the candidate generator of assisted decoding.

``model.generate(..., custom_generate=NgramDraft(static=...))`` runs
transformers' own assisted-decoding loop (``_assisted_decoding``: the model
verifies every candidate in one forward pass, greedy or sampled exactly as
without candidates) with ngramdraft proposing the candidates, in place of the
built-in ``prompt_lookup_num_tokens`` lookup.

transformers runs assisted decoding for batch size 1 only; a larger batch is
refused with a named error before any work is done. One ``NgramDraft`` serves
one ``generate`` call at a time: it holds the sequence's context cache.

Needs ``pip install 'ngramdraft[transformers]'`` (and torch; on CPU,
``pip install torch==2.13.0`` takes the CPU build).
"""

from typing import Any

import numpy as np

from ..errors import InvalidParameterError
from ..optional import require
from . import transformers_host as host
from .core import DraftStep, engine_drafter

_candidates = require(
    "transformers.generation.candidate_generator", "transformers", "transformers drafting"
)
torch = require("torch", "transformers", "transformers drafting")
_GENERATOR: Any = _candidates.CandidateGenerator


class NgramCandidateGenerator(_GENERATOR):
    """transformers' CandidateGenerator protocol over one sequence's :class:`DraftStep`.

    ``get_candidates(input_ids)`` returns ``input_ids`` extended by the draft
    (and no logits: the drafts are tokens, verified by the model), cut so that
    generation never runs past ``max_length`` and never drafts past an EOS
    token, as transformers' own prompt lookup does.
    """

    def __init__(self, step: DraftStep, generation_config: Any) -> None:
        self.step = step
        self.max_length = generation_config.max_length
        self.eos = host.eos_tokens(generation_config)

    def get_candidates(self, input_ids: Any, **kwargs: Any) -> tuple[Any, None]:
        room = max(0, self.max_length - input_ids.shape[1] - 1)
        draft = self.step(input_ids[0].cpu().numpy(), lambda d: self._cut(d[:room]))
        if len(draft) == 0:
            return input_ids, None
        extra = torch.from_numpy(draft.astype(np.int64)).to(input_ids.device)[None]
        return torch.cat((input_ids, extra), dim=1), None

    def _cut(self, draft: np.ndarray) -> np.ndarray:
        """The draft up to its first EOS token, which would end generation there."""
        for i, token in enumerate(draft.tolist()):
            if token in self.eos:
                return draft[:i]
        return draft

    def update_candidate_strategy(self, input_ids: Any, scores: Any, num_matches: Any) -> None:
        pass  # the next get_candidates syncs the accepted tokens: the drafter learns there

    @property
    def num_drafting_tokens(self) -> int:
        """The most tokens one call drafts: how many past positions the host's cache keeps
        ready to roll back (transformers 5.25 and later ask every candidate generator)."""
        return int(self.step.drafter.n_draft)


class NgramDraft:
    """A ``custom_generate`` callable: assisted decoding with ngramdraft's candidates.

    Parameters are :class:`~ngramdraft.Drafter`'s (``static``, ``dynamic``,
    ``n_draft``, ``ngram_min``, ``ngram_max``, ``tokenizer``, ``policy``,
    ``rules``), with an engine's defaults for the rule set
    (:mod:`~ngramdraft.integrations.core`: the suffix rules draft up to 64
    tokens and learn what the model's passes cost). Each
    ``generate`` call is one sequence; when it returns, the sequence is merged
    into the dynamic cache (and a dynamic path is saved), so later calls learn
    from earlier ones. ``stats`` counts what drafting did over every call
    (:class:`~ngramdraft.integrations.core.DraftStats`).
    """

    def __init__(
        self,
        static: Any = None,
        dynamic: Any = None,
        n_draft: int | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        self.drafter = engine_drafter(static, dynamic, n_draft, *args, **kwargs)
        self._step = DraftStep(self.drafter)
        self.stats = self._step.stats

    def __call__(
        self,
        model: Any,
        input_ids: Any,
        logits_processor: Any,
        stopping_criteria: Any,
        generation_config: Any,
        synced_gpus: bool = False,
        streamer: Any = None,
        **model_kwargs: Any,
    ) -> Any:
        if input_ids.shape[0] != 1:
            raise InvalidParameterError(
                f"transformers' assisted decoding runs one sequence at a time; got a batch of "
                f"{input_ids.shape[0]} (call generate once per sequence)"
            )
        host.check(model)
        vocab = model.config.get_text_config().vocab_size
        self.drafter.check_vocabulary(vocab)
        generator = NgramCandidateGenerator(self._step, generation_config)
        try:
            return host.assisted_decoding(
                model,
                generator,
                input_ids,
                logits_processor=logits_processor,
                stopping_criteria=stopping_criteria,
                generation_config=generation_config,
                synced_gpus=synced_gpus,
                streamer=streamer,
                **model_kwargs,
            )
        finally:
            self._step.finish()
