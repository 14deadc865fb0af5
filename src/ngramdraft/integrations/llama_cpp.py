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

import contextlib
import io
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..drafter import Drafter
from ..errors import InvalidParameterError, ModelFileError
from ..optional import require

GGUF_MAGIC = b"GGUF"


def _llama_cpp():
    return require("llama_cpp", "llama", "llama-cpp-python drafting")


def check_gguf(path):
    """``path`` as a Path if it is a GGUF file, else ModelFileError saying what it is."""
    path = Path(path)
    if not path.exists():
        raise ModelFileError(f"{path}: no such model file")
    if not path.is_file():
        raise ModelFileError(f"{path}: is a directory, not a GGUF model file")
    with open(path, "rb") as f:
        head = f.read(4)
    if head != GGUF_MAGIC:
        raise ModelFileError(
            f"{path}: not a GGUF model file (llama.cpp models start with 'GGUF'; "
            "convert other formats with llama.cpp's convert_hf_to_gguf.py)"
        )
    return path


def _draft_model_base():
    # The host's abstract base, so that isinstance checks in the host pass;
    # without llama-cpp-python the adapter still works as a plain callable.
    try:
        from llama_cpp.llama_speculative import LlamaDraftModel
    except ImportError:
        return object
    return LlamaDraftModel


class NgramDraftModel(_draft_model_base()):
    """Prompt-lookup drafts for ``llama_cpp.Llama(..., draft_model=...)``, llama.cpp's rules.

    Parameters are :class:`~ngramdraft.Drafter`'s: ``static`` (a StaticCache
    or path), ``dynamic`` (an NgramCache or a path, loaded if it exists and
    saved when a sequence ends), ``n_draft``, ``ngram_min``, ``ngram_max``,
    and ``tokenizer`` to check the static cache against (a GGUF path checks
    it against that model's vocabulary).

    A call that extends the previous sequence accepts only the new tokens;
    any other sequence (a new prompt) finishes the previous one into the
    dynamic cache and starts anew.
    """

    def __init__(self, static=None, dynamic=None, n_draft=8, *args, **kwargs):
        self.drafter = Drafter(static, dynamic, n_draft, *args, **kwargs)

    def __call__(self, input_ids, /, **kwargs):
        self.drafter.sync(input_ids)
        return self.drafter.draft()  # int32 is np.intc on every platform llama.cpp builds for

    def check_model(self, llama):
        """Raise if this drafter's caches cannot serve ``llama`` (vocabulary, tokenizer)."""
        self.drafter.check_vocabulary(llama.n_vocab())
        static = self.drafter.static
        if static is not None and static.meta.get("tokenizer") is not None:
            static.check_tokenizer(LlamaVocab(llama, _model_name(llama)))

    def finish(self):
        """End the current sequence: merge it into the dynamic cache (and save that file)."""
        if self.drafter._started:
            self.drafter.finish()


def load_llama(model_path, *, draft_model=None, n_ctx=4096, verbose=False, **kwargs):
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


def measure_pass_cost(llama, n_tokens, *, context=512, reps=5):
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


def _model_name(llama):
    return llama.metadata.get("general.name") or Path(llama.model_path).name


class LlamaVocab:
    """A loaded model's vocabulary as an ngramdraft tokenizer (see :mod:`ngramdraft.tokenizer`)."""

    kind = "gguf"

    def __init__(self, llama, name):
        self._llama = llama
        self.name = name
        self.n_vocab = llama.n_vocab()

    def encode_batch(self, texts):
        pieces = [
            self._llama.tokenize(t.encode("utf-8"), add_bos=False, special=False) for t in texts
        ]
        offsets = np.zeros(len(pieces) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in pieces], out=offsets[1:])
        ids = np.fromiter((i for p in pieces for i in p), dtype=np.int32, count=int(offsets[-1]))
        return ids, offsets


class GGUFTokenizer(LlamaVocab):
    """The vocabulary of a GGUF model file (``--tokenizer MODEL.gguf``), as llama-lookup-create -m.

    llama.cpp itself tokenizes (the model is loaded vocabulary only), so a
    cache built with it holds exactly the ids the model will see; its
    identity records the model's name and a fingerprint of its tokenization.
    """

    def __init__(self, path):
        llama_cpp = _llama_cpp()
        path = check_gguf(path)
        # A vocabulary-only model has no training context, which llama.cpp
        # reports at error level through the host's logger (Python's stderr);
        # nothing is wrong, so it is kept out of the user's terminal.
        with contextlib.redirect_stderr(io.StringIO()):
            try:
                llama = llama_cpp.Llama(str(path), vocab_only=True, verbose=False)
            except ValueError as e:
                raise ModelFileError(
                    f"{path}: llama.cpp cannot read this model's vocabulary ({e})"
                ) from e
        super().__init__(llama, _model_name(llama))
        self.path = os.fspath(path)


@dataclass
class Generation:
    """One greedy generation and what drafting did in it (``ngramdraft generate`` prints it)."""

    tokens: list
    text: str
    seconds: float  # prompt processing included
    passes: int  # forward passes (the prompt's counts as one)
    drafted: int
    accepted: int

    @property
    def tokens_per_s(self):
        return len(self.tokens) / self.seconds if self.seconds else 0.0

    @property
    def tokens_per_pass(self):
        return len(self.tokens) / self.passes if self.passes else 0.0


def generate(llama, prompt_tokens, n, draft_model=None):
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

    def __init__(self, inner):
        self.inner = inner
        self.n_calls = 0
        self.n_drafted = 0

    def __call__(self, input_ids, /, **kwargs):
        draft = self.inner(input_ids, **kwargs)
        self.n_calls += 1
        self.n_drafted += len(draft)
        return draft
