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

from ..drafting.drafter import Drafter
from ..errors import InvalidParameterError
from ..optional import require
from .passes import PassClock, engine_drafter

_candidates = require(
    "transformers.generation.candidate_generator", "transformers", "transformers drafting"
)
torch = require("torch", "transformers", "transformers drafting")
_GENERATOR: Any = _candidates.CandidateGenerator


class NgramCandidateGenerator(_GENERATOR):
    """transformers' CandidateGenerator protocol over a :class:`~ngramdraft.Drafter`.

    ``get_candidates(input_ids)`` returns ``input_ids`` extended by the draft
    (and no logits: the drafts are tokens, verified by the model), cut so that
    generation never runs past ``max_length`` and never drafts past an EOS
    token, as transformers' own prompt lookup does.
    """

    def __init__(self, drafter: Drafter, generation_config: Any) -> None:
        self.drafter = drafter
        self.max_length = generation_config.max_length
        eos = getattr(generation_config, "_eos_token_tensor", None)
        self.eos = set() if eos is None else {int(t) for t in eos.reshape(-1).tolist()}
        self.n_calls = 0
        self.n_drafted = 0
        self._seen: int | None = None  # tokens at the last call (None: none yet)
        self._clock = PassClock()

    def get_candidates(self, input_ids: Any, **kwargs: Any) -> tuple[Any, None]:
        n = input_ids.shape[1]
        new = None if self._seen is None else n - self._seen
        if self.drafter.sync(input_ids[0].cpu().numpy()):
            self._clock.called(self.drafter.observe_pass, new)
        draft = self.drafter.draft()[: max(0, self.max_length - n - 1)]
        for i, token in enumerate(draft.tolist()):
            if token in self.eos:
                draft = draft[:i]
                break
        self.n_calls += 1
        self.n_drafted += len(draft)
        self._seen = n
        self._clock.returned(len(draft))
        if len(draft) == 0:
            return input_ids, None
        extra = torch.from_numpy(draft.astype(np.int64)).to(input_ids.device)[None]
        return torch.cat((input_ids, extra), dim=1), None

    def update_candidate_strategy(self, input_ids: Any, scores: Any, num_matches: Any) -> None:
        pass  # the next get_candidates syncs the accepted tokens: the drafter learns there

    @property
    def num_drafting_tokens(self) -> int:
        """The most tokens one call drafts: how many past positions the host's cache keeps
        ready to roll back (transformers 5.25 and later ask every candidate generator)."""
        return int(self.drafter.n_draft)


class NgramDraft:
    """A ``custom_generate`` callable: assisted decoding with ngramdraft's candidates.

    Parameters are :class:`~ngramdraft.Drafter`'s (``static``, ``dynamic``,
    ``n_draft``, ``ngram_min``, ``ngram_max``, ``tokenizer``, ``policy``,
    ``rules``), with an engine's defaults for the rule set
    (:mod:`~ngramdraft.integrations.passes`: the suffix rules draft up to 64
    tokens and learn what the model's passes cost). Each
    ``generate`` call is one sequence; when it returns, the sequence is merged
    into the dynamic cache (and a dynamic path is saved), so later calls learn
    from earlier ones. ``last`` is the candidate generator of the latest call
    (``n_calls``, ``n_drafted``).
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
        self.last: NgramCandidateGenerator | None = None

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
        vocab = model.config.get_text_config().vocab_size
        self.drafter.check_vocabulary(vocab)
        generator = NgramCandidateGenerator(self.drafter, generation_config)
        self.last = generator
        # The host's assisted loop asks this hook for its candidate generator;
        # shadowing it on the instance for this call runs the loop unchanged.
        model._get_candidate_generator = lambda **_: generator
        try:
            return type(model)._assisted_decoding(
                model,
                input_ids,
                logits_processor=logits_processor,
                stopping_criteria=stopping_criteria,
                generation_config=generation_config,
                synced_gpus=synced_gpus,
                streamer=streamer,
                **model_kwargs,
            )
        finally:
            del model._get_candidate_generator
            if self.drafter.started:
                self.drafter.finish()
