"""llama-cpp-python: ngramdraft as the ``draft_model`` of ``llama_cpp.Llama``.

llama-cpp-python's speculative decoding calls its draft model with the whole
accepted sequence before every forward pass and verifies what it returns in
that same pass (``Llama.generate``). :class:`NgramDraftModel` implements that
protocol (``LlamaDraftModel``) over one :class:`~ngramdraft.Drafter`, kept in
step with the sequence in time proportional to the new tokens.

One thing the host leaves to its user: with a draft model it keeps logits
for every position, but sizes that buffer by the constructor's ``logits_all``
(default False: ``n_batch`` rows), so a sequence longer than ``n_batch`` fails
deep inside ``eval``. :func:`load_llama` passes ``logits_all=True`` for you
and checks the caches against the model's vocabulary.

Needs ``pip install 'ngramdraft[llama]'``.
"""

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..drafting.drafter import Drafter
from ..errors import InvalidParameterError, ModelFileError
from ..files.kinds import check_gguf
from ..optional import require
from ..tokenizers.gguf import LlamaVocab, model_name


def _llama_cpp() -> Any:
    return require("llama_cpp", "llama", "llama-cpp-python drafting")


def _draft_model_base() -> type:
    # The host's abstract base, so that isinstance checks in the host pass;
    # without llama-cpp-python the adapter still works as a plain callable.
    try:
        from llama_cpp.llama_speculative import LlamaDraftModel
    except ImportError:
        return object
    return LlamaDraftModel


_BASE: Any = _draft_model_base()


class NgramDraftModel(_BASE):
    """Prompt-lookup drafts for ``llama_cpp.Llama(..., draft_model=...)``.

    Parameters are :class:`~ngramdraft.Drafter`'s: ``static`` (a StaticCache
    or path), ``dynamic`` (an NgramCache or a path, loaded if it exists and
    saved when a sequence ends), ``n_draft``, ``ngram_min``, ``ngram_max``,
    ``policy``, ``rules`` (llama.cpp's by default; with ``"suffix"``, a
    suffix file and a requests file) and ``tokenizer`` to check the static
    cache against (a GGUF path checks it against that model's vocabulary).

    A call that extends the previous sequence accepts only the new tokens;
    any other sequence (a new prompt) finishes the previous one into the
    dynamic cache and starts anew. ``stats`` counts what drafting did since
    the model was made (what a server reports).
    """

    def __init__(
        self, static: Any = None, dynamic: Any = None, n_draft: int = 8, *args: Any, **kwargs: Any
    ) -> None:
        self.drafter = Drafter(static, dynamic, n_draft, *args, **kwargs)
        self.stats = DraftStats()
        self._seen = 0  # tokens of the sequence at the last call
        self._drafted = 0  # tokens that call drafted

    def __call__(self, input_ids: Any, /, **kwargs: Any) -> np.ndarray:
        if self.drafter.sync(input_ids):
            # The host verified the last draft and added what it accepted plus one
            # token of its own: every token past that one is an accepted draft.
            new = len(input_ids) - self._seen
            self.stats.accepted += max(0, min(new - 1, self._drafted))
        else:
            self.stats.sequences += 1
        draft = self.drafter.draft()  # int32 is np.intc on every platform llama.cpp builds for
        self.stats.passes += 1
        self.stats.drafted += len(draft)
        self._seen, self._drafted = len(input_ids), len(draft)
        return draft

    def check_model(self, llama: Any) -> None:
        """Raise if this drafter's caches cannot serve ``llama`` (vocabulary, tokenizer)."""
        self.drafter.check_vocabulary(llama.n_vocab())
        static = self.drafter.static
        if static is not None and static.meta.get("tokenizer") is not None:
            static.check_tokenizer(LlamaVocab(llama, model_name(llama)))

    def finish(self) -> None:
        """End the current sequence: merge it into the dynamic cache (and save that file)."""
        if self.drafter.started:
            self.drafter.finish()


@dataclass
class DraftStats:
    """What an :class:`NgramDraftModel` did: the figures vLLM's and llama.cpp's servers report.

    ``passes`` counts the forward passes after each prompt's (the host asks
    for a draft before each); ``accepted`` the drafted tokens the model
    confirmed, known at the next call (a sequence's last pass is not seen).
    """

    sequences: int = 0
    passes: int = 0
    drafted: int = 0
    accepted: int = 0

    @property
    def acceptance(self) -> float:
        """Share of drafted tokens accepted."""
        return self.accepted / self.drafted if self.drafted else 0.0

    @property
    def tokens_per_pass(self) -> float:
        """Tokens each forward pass produced: its own one plus the accepted drafts."""
        return (self.passes + self.accepted) / self.passes if self.passes else 0.0

    def as_dict(self) -> dict[str, float]:
        return {
            "sequences": self.sequences,
            "passes": self.passes,
            "drafted_tokens": self.drafted,
            "accepted_tokens": self.accepted,
            "acceptance": round(self.acceptance, 4),
            "tokens_per_pass": round(self.tokens_per_pass, 4),
        }


def load_llama(
    model_path: str | os.PathLike[str],
    *,
    draft_model: Any = None,
    n_ctx: int = 4096,
    verbose: bool = False,
    **kwargs: Any,
) -> Any:
    """A ``llama_cpp.Llama`` for ``model_path`` that drafts with ``draft_model``.

    As ``Llama(model_path, draft_model=..., **kwargs)``, with what drafting
    needs: ``logits_all=True`` (the host sizes its logits buffer by it, and
    breaks past ``n_batch`` positions without it), a named error for a path
    that is not a GGUF model, and for an :class:`NgramDraftModel` a check that
    its caches fit the model's vocabulary.
    """
    llama_cpp = _llama_cpp()
    path = check_gguf(model_path)
    if draft_model is not None:
        if kwargs.get("logits_all") is False:
            raise InvalidParameterError(
                "logits_all=False cannot draft: llama-cpp-python verifies drafts from every "
                "position's logits (leave logits_all out, load_llama sets it)"
            )
        kwargs["logits_all"] = True
    try:
        llama = llama_cpp.Llama(
            str(path), draft_model=draft_model, n_ctx=n_ctx, verbose=verbose, **kwargs
        )
    except ValueError as e:  # the host's word for any model it cannot load
        raise ModelFileError(f"{path}: llama.cpp cannot load this model ({e})") from e
    if isinstance(draft_model, NgramDraftModel):
        draft_model.check_model(llama)
    return llama


def measure_pass_cost(
    llama: Any, n_tokens: int, *, context: int = 512, reps: int = 5
) -> list[float]:
    """Median seconds of one forward pass over k = 1 .. n_tokens tokens, after ``context`` tokens.

    What a draft of k - 1 tokens costs on this model and machine: the
    ``pass_cost`` of :class:`~ngramdraft.CostAwareLength` (``n_tokens`` =
    n_draft + 1). Token ids do not change the cost; the model's context is
    reset afterwards.
    """
    # input_ids is sized by the n_ctx asked for; llama.cpp may round its own up.
    context = max(1, min(context, len(llama.input_ids) - n_tokens - 1))
    ids = [1 + i % (llama.n_vocab() - 1) for i in range(context + n_tokens)]
    llama.reset()
    llama.eval(ids[:context])
    costs = []
    for k in range(1, n_tokens + 1):
        times = []
        for _ in range(reps):
            llama.n_tokens = context  # drop the last pass's positions, as a rejection does
            t0 = time.perf_counter()
            llama.eval(ids[context : context + k])
            times.append(time.perf_counter() - t0)
        costs.append(float(np.median(times)))
    llama.reset()
    return costs


@dataclass
class Generation:
    """One greedy generation and what drafting did in it (``ngramdraft generate`` prints it)."""

    tokens: list[int]
    text: str
    seconds: float  # prompt processing included
    passes: int  # forward passes (the prompt's counts as one)
    drafted: int
    accepted: int

    @property
    def tokens_per_s(self) -> float:
        return len(self.tokens) / self.seconds if self.seconds else 0.0

    @property
    def tokens_per_pass(self) -> float:
        return len(self.tokens) / self.passes if self.passes else 0.0


def generate(llama: Any, prompt_tokens: Any, n: int, draft_model: Any = None) -> Generation:
    """Generate ``n`` tokens greedily with ``llama`` (built by :func:`load_llama`), timing it.

    The host calls the draft model once before every forward pass after the
    prompt's, so passes are 1 + draft calls; every token past the first of a
    pass was an accepted draft.
    """
    counter = _CountingDraft(draft_model) if draft_model is not None else None
    llama.draft_model = counter
    llama.reset()
    tokens = []
    t0 = time.perf_counter()
    for token in llama.generate(list(prompt_tokens), temp=0.0, top_k=1, repeat_penalty=1.0):
        tokens.append(token)
        if len(tokens) >= n or token == llama.token_eos():
            break
    seconds = time.perf_counter() - t0
    llama.draft_model = draft_model
    calls = counter.n_calls if counter else len(tokens) - 1
    text = llama.detokenize(tokens).decode("utf-8", errors="replace")
    return Generation(
        tokens=tokens,
        text=text,
        seconds=seconds,
        passes=1 + calls,
        drafted=counter.n_drafted if counter else 0,
        accepted=len(tokens) - 1 - calls,
    )


class _CountingDraft:
    """Counts the host's draft calls and drafted tokens of any draft model."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.n_calls = 0
        self.n_drafted = 0

    def __call__(self, input_ids: Any, /, **kwargs: Any) -> Any:
        draft = self.inner(input_ids, **kwargs)
        self.n_calls += 1
        self.n_drafted += len(draft)
        return draft
