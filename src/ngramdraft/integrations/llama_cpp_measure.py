"""Measuring a llama-cpp-python model: its pass costs, a timed greedy generation, and
where two greedy outputs part.

What ``ngramdraft generate`` prints and the benchmarks record; none of it
runs in a decoding loop or a server, so it lives apart from the adapter
(:mod:`~ngramdraft.integrations.llama_cpp`).
"""

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import llama_cpp_host as host
from .llama_cpp import drafting_llama
from .llama_cpp_decode import decoder_of


def measure_pass_cost(
    llama: Any, n_tokens: int, *, context: int = 512, reps: int = 5
) -> list[float]:
    """Median seconds of one verification pass over k = 1 .. n_tokens tokens, after ``context``.

    What a draft of k - 1 tokens costs on this model and machine, as
    ngramdraft's loop verifies it: the ``pass_cost`` of
    :class:`~ngramdraft.CostAwareLength` (``n_tokens`` = n_draft + 1). Token
    ids do not change the cost; the model's context is reset afterwards.
    """
    return decoder_of(llama).pass_cost(n_tokens, context=context, reps=reps)


@dataclass
class Generation:
    """One greedy generation and what drafting did in it (``ngramdraft generate`` prints it)."""

    tokens: list[int]
    text: str
    prompt_seconds: float  # the prompt's pass, to the first token
    decode_seconds: float  # every later token
    passes: int  # forward passes (the prompt's counts as one)
    drafted: int
    accepted: int
    draft_lengths: list[int]  # the draft of each pass after the prompt's, as the model got it

    @property
    def seconds(self) -> float:
        return self.prompt_seconds + self.decode_seconds

    @property
    def tokens_per_s(self) -> float:
        """Tokens over the whole request, the prompt's time included."""
        return len(self.tokens) / self.seconds if self.seconds else 0.0

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens after the first over the time after it: what drafting speeds up."""
        return (len(self.tokens) - 1) / self.decode_seconds if self.decode_seconds else 0.0

    @property
    def tokens_per_pass(self) -> float:
        return len(self.tokens) / self.passes if self.passes else 0.0


def generate(llama: Any, prompt_tokens: Any, n: int, draft_model: Any = None) -> Generation:
    """Generate up to ``n`` tokens greedily with ``llama``, timing the prompt and the rest.

    ``llama`` is any ``Llama``: one :func:`load_llama` made drafts through
    ngramdraft's loop, a plain one through the host's; both keep what the
    model's state shares with the prompt, as a server does. Generation stops
    at ``n`` tokens or an end-of-generation token. A draft model is called once
    before every forward pass after the prompt's, so passes are 1 + draft
    calls, and every token past the first of a pass was an accepted draft.
    """
    counter = _CountingDraft(draft_model) if draft_model is not None else None
    # A drafting Llama (load_llama's) caps its drafts at what is still wanted; the host's
    # generate takes no such argument.
    wanted = {"max_tokens": n} if isinstance(llama, drafting_llama()) else {}
    llama.draft_model = counter
    tokens: list[int] = []
    t0 = time.perf_counter()
    t_first = t0
    try:
        for token in llama.generate(list(prompt_tokens), temp=0.0, repeat_penalty=1.0, **wanted):
            if not tokens:
                t_first = time.perf_counter()
            tokens.append(token)
            if len(tokens) >= n or host.is_end(llama, token):
                break
    finally:
        llama.draft_model = draft_model
    t_end = time.perf_counter()
    calls = len(counter.lengths) if counter else len(tokens) - 1
    text = llama.detokenize(tokens).decode("utf-8", errors="replace")
    return Generation(
        tokens=tokens,
        text=text,
        prompt_seconds=t_first - t0,
        decode_seconds=t_end - t_first,
        passes=1 + calls,
        drafted=sum(counter.lengths) if counter else 0,
        accepted=len(tokens) - 1 - calls,
        draft_lengths=counter.lengths if counter else [0] * calls,
    )


@dataclass
class Divergence:
    """Where two greedy outputs of one prompt first part, as the plain model saw it there."""

    position: int  # the index, in the outputs, of the first token that differs
    tokens: tuple[int, int]  # (the plain model's token there, the other output's)
    logits: tuple[float, float]  # the plain model's logits of those two tokens there
    top_gap: float  # the gap between the plain model's two largest logits there

    @property
    def margin(self) -> float:
        """How far the plain model's choice was ahead of the other output's token."""
        return self.logits[0] - self.logits[1]


def first_difference(
    llama: Any, prompt_tokens: Any, plain_tokens: list[int], other_tokens: list[int]
) -> Divergence | None:
    """Where ``other_tokens`` first part from ``plain_tokens``, or None if they never do.

    Both are greedy outputs of ``prompt_tokens``; ``plain_tokens`` a plain
    ``Llama``'s (:func:`plain_llama`), ``llama`` that same plain model. Its
    logits at the first differing position are computed again as plain
    decoding computed them (the prompt in one go, then each output token
    alone), so a small margin there says the outputs part at a near-tie, which
    a verification pass's batched arithmetic may tip the other way. The
    model's state is reset. Outputs that stop at different lengths without
    differing before (``n`` tokens against an end of generation) are None too:
    there is no token to weigh.
    """
    position = next(
        (i for i, (a, b) in enumerate(zip(plain_tokens, other_tokens, strict=False)) if a != b),
        None,
    )
    if position is None:
        return None
    # The decoder's batches are the host's own eval's: the last position's logits only.
    decoder = decoder_of(llama)
    llama.reset()
    logits = decoder.prompt(list(prompt_tokens))[0]
    for token in plain_tokens[:position]:
        logits = decoder.decode([token], 1)[0]
    a, b = plain_tokens[position], other_tokens[position]
    top2 = np.sort(logits)[-2:]
    return Divergence(
        position=position,
        tokens=(a, b),
        logits=(float(logits[a]), float(logits[b])),
        top_gap=float(top2[1] - top2[0]),
    )


class _CountingDraft:
    """Records the length of every draft of any draft model, as the model is given it."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.lengths: list[int] = []

    def __call__(self, input_ids: Any, /, **kwargs: Any) -> Any:
        draft = self.inner(input_ids, **kwargs)
        self.lengths.append(len(draft))
        return draft
