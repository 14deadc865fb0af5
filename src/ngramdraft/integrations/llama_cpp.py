"""llama-cpp-python: ngramdraft as the ``draft_model`` of ``llama_cpp.Llama``.

llama-cpp-python's speculative decoding calls its draft model with the whole
accepted sequence before every forward pass and verifies what it returns in
that same pass (``Llama.generate``). :class:`NgramDraftModel` implements that
protocol (``LlamaDraftModel``) over one :class:`~ngramdraft.Drafter`, kept in
step with the sequence in time proportional to the new tokens.

What the host's own loop costs: with a draft model it keeps the logits of
every position, the prompt's too (an 800-token prompt with a 152k-token
vocabulary takes 1.3x as long), and a ``Llama`` given a draft model after
it was made without one aborts the process at its first draft
(``GGML_ASSERT(logits != nullptr)``). :func:`load_llama` therefore makes a
:func:`DraftingLlama <drafting_llama>`: the host's ``Llama``, whose
``generate`` (and so ``create_completion``, ``create_chat_completion`` and
the server) verifies drafts with ngramdraft's own loop
(:mod:`~ngramdraft.integrations.llama_cpp_decode`) whenever it has a draft
model: logits only for the rows verification reads, nothing copied.

Needs ``pip install 'ngramdraft[llama]'``.
"""

import contextlib
import functools
import inspect
import os
import platform
from collections import Counter
from typing import Any

import numpy as np

from ..drafting.drafter import MAX_DRAFT
from ..drafting.policy import TIMED_TO_TRUST
from ..errors import ModelFileError
from ..files import passtimes
from ..files.kinds import check_gguf
from ..optional import require
from ..tokenizers.gguf import LlamaVocab, model_name
from ..validation import check_int
from . import llama_cpp_host as host
from .core import DraftStep, engine_drafter
from .llama_cpp_decode import decoder_of, speculative_generate
from .llama_cpp_detokenize import Detokenizer

# Positions before the passes timed at load: a short prompt, as a 512-token one
# takes longer on a CPU than all the passes after it (4.5 s against 3 s for a
# 0.5B model on 2 cores), and the requests' own passes replace these timings.
LOAD_CONTEXT = 64
# Kept pass timings whose one-token pass took this many times what it takes now are timed
# again: above the spread of quiet loads (within 10%), below a shared core's (1.6x).
BUSIER = 1.25
# The longest context load_llama takes (0: the model's own): above any model's, and
# the int32 array ngramdraft's loop keeps of a sequence's tokens stays under 64 MiB.
MAX_CONTEXT = 1 << 24
# The context's settings that change what attention costs (those this host has).
ATTENTION_FIELDS = ("flash_attn_type", "flash_attn", "type_k", "type_v")


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

    Defaults by rule set (:mod:`~ngramdraft.integrations.core`): llama.cpp's
    rules draft as llama.cpp does (8 tokens, no policy); the suffix rules
    draft up to 64 tokens and submit what the engine's measured pass costs
    make worth it (``CostAwareLength()``, which learns those costs from the
    time between this model's calls, one forward pass each, and from the
    passes :meth:`time_passes` times when :func:`load_llama` or the server
    loads the model). ``policy=None`` submits whole drafts.

    A call that extends the previous sequence accepts only the new tokens;
    any other sequence (a new prompt) finishes the previous one into the
    dynamic cache and starts anew. ``stats`` counts what drafting did since
    the model was made (what a server reports).
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

    def __call__(self, input_ids: Any, /, **kwargs: Any) -> np.ndarray:
        return self._step(input_ids)  # int32 is np.intc on every platform llama.cpp builds for

    def check_model(self, llama: Any) -> None:
        """Raise if this drafter's caches cannot serve ``llama`` (vocabulary, tokenizer)."""
        self.drafter.check_vocabulary(llama.n_vocab())
        static = self.drafter.static
        if static is not None and static.meta.get("tokenizer") is not None:
            static.check_tokenizer(LlamaVocab(llama, model_name(llama)))

    def time_passes(self, llama: Any) -> None:
        """For a policy that learns the engine's pass costs, time ``llama``'s passes now.

        Learned from requests alone, the costs of long passes stay unknown
        where answers are short (a conversation's turns): the policy, which
        takes an untimed size to cost what the largest timed one did, goes
        on submitting whole 32-token drafts that each cost several passes.
        So the passes of :func:`sizes_timed_at_load` are timed
        ``TIMED_TO_TRUST`` times each on ``llama``'s own context (reset
        afterwards), once per model file and machine: the timings are kept
        (:mod:`ngramdraft.files.passtimes`) and the next load reads them, unless
        they were timed on a busier moment than this one
        (:func:`kept_on_a_busier_moment`). The requests' passes go on refining
        them. Nothing is timed for any other policy.
        """
        drafter = self.drafter
        if not drafter.learns_pass_costs:
            return
        sizes = sizes_timed_at_load(drafter.n_draft)
        name = passtimes.key(_pass_facts(llama, sizes))
        timed = passtimes.read(name, sizes, TIMED_TO_TRUST)
        decoder = decoder_of(llama)
        if timed is None or kept_on_a_busier_moment(timed, decoder):
            timed = decoder.time_passes(sizes, context=LOAD_CONTEXT, reps=TIMED_TO_TRUST)
            passtimes.write(name, timed)
        for k, seconds in timed.items():
            for s in seconds:
                drafter.observe_pass(k, s)

    def finish(self) -> None:
        """End the current sequence: merge it into the dynamic cache (and save that file)."""
        self._step.finish()


def kept_on_a_busier_moment(timed: dict[int, list[float]], decoder: Any) -> bool:
    """Whether kept timings were taken while the machine was busier than now: their one-token
    pass, timed again now, is ``BUSIER`` times as fast as it was.

    A busy moment makes every size look dearer, and the policy does not submit the sizes it
    prices too dear, so no request's pass ever corrects them: timings kept from a busy
    load made the suffix rules submit nothing for 30 passes of a copy the model then made
    whole (Qwen2.5-Coder-1.5B, 64 tokens timed at 1.52 s against 1.04 s).
    """
    now = decoder.time_passes([1], context=LOAD_CONTEXT, reps=TIMED_TO_TRUST)[1]
    return min(timed[1]) > BUSIER * min(now)


def _pass_facts(llama: Any, sizes: list[int]) -> dict[str, object]:
    """What the cost of ``llama``'s passes timed at load depends on, as far as the host tells:
    the key of the timings kept (:mod:`ngramdraft.files.passtimes`)."""
    path = os.path.realpath(llama.model_path)
    st = os.stat(path)
    return {
        "model": [path, st.st_size, st.st_mtime_ns],
        "threads": [llama.n_threads, llama.n_threads_batch],
        "batch": [llama.n_batch, llama.context_params.n_ubatch],
        "n_ctx": llama.n_ctx(),
        "attention": [getattr(llama.context_params, f, None) for f in ATTENTION_FIELDS],
        "llama_cpp": _llama_cpp().__version__,
        # Not platform.processor(): on Linux it runs `uname -p`, a process per load.
        "cpu": [platform.machine(), os.cpu_count(), _cpu_model()],
        "sizes": sizes,
        "reps": TIMED_TO_TRUST,
        "context": LOAD_CONTEXT,
    }


def _cpu_model() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return ""


def physical_cores() -> int:
    """The CPU cores of this machine, hyperthreads counted once: llama.cpp's own default
    thread count (its ``cpu_get_num_physical_cores``: the distinct thread-sibling sets).

    llama-cpp-python's default is half the logical CPUs, one thread on a 2-core machine,
    which decodes at about half the speed llama-server's default does there.
    """
    siblings = set()
    for cpu in range(os.cpu_count() or 1):
        path = f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings"
        with contextlib.suppress(OSError), open(path) as f:
            siblings.add(f.read().strip())
    return len(siblings) or os.cpu_count() or 1


def sizes_timed_at_load(n_draft: int) -> list[int]:
    """The pass sizes :meth:`NgramDraftModel.time_passes` times for drafts of up to
    ``n_draft`` tokens: powers of two, and a whole draft's pass (n_draft + 1) unless
    it is one past the largest of them.

    On a CPU llama.cpp's pass cost rises as a staircase: a pass over 2m tokens
    costs about what one over 2m - 1 does (the 0.5B model: 16 tokens 7.9x one,
    17 tokens 9.2x). Interpolated from sizes on a step's upper side (2**i + 1,
    as timed before), the cheap sizes between look dearer than they are, and a
    size thought dear is never submitted, so never timed: replayed over the
    model's own answers at its curve, the suffix rules lost up to 10% to the
    costs given. From powers of two the sizes between look cheaper than they
    are, are submitted, and their costs are learned: within 0-4% of the costs
    given, as many passes timed (policy/2026-12-04-102536 before,
    policy/2026-12-04-102727 after).

    A whole draft's pass one past a power of two (33 for the suffix rules' 32
    tokens, 9 for llama.cpp's 8) is left to the requests: until it is timed it
    costs what the power did (a hope, so it is submitted and learned). The
    replay is the same for the suffix rules (policy/2026-12-04-114640), and
    the 0.5B model loads in 3.0 s, not 4.0 s (ab/2026-12-04-120323).
    """
    largest = check_int(n_draft, "n_draft", 1, MAX_DRAFT) + 1
    powers = [2**i for i in range(largest.bit_length())]
    return powers if largest - powers[-1] <= 1 else [*powers, largest]


@functools.cache
def drafting_llama() -> type:
    """``DraftingLlama``: the host's ``Llama``, drafting through ngramdraft's own loop.

    With a ``draft_model`` (given to the constructor or set later, any of the
    host's draft models), ``generate`` is
    :func:`~ngramdraft.integrations.llama_cpp_decode.speculative_generate`;
    without one, or with ``logits_all=True`` (a user who asks for every
    position's logits, for logprobs, gets them from the host's own loop), or
    a recurrent model (whose state cannot roll a draft back), it is the
    host's. The draft model is never handed to the host's constructor, which
    would keep every position's logits for it. ``detokenize`` gives the host's
    text, and the host's completion loop, which asks for its whole completion's
    text after every token, pays only for the new tokens
    (:mod:`~ngramdraft.integrations.llama_cpp_detokenize`).
    """
    llama_cpp = _llama_cpp()
    host_generate = llama_cpp.Llama.generate
    signature = inspect.signature(host_generate)
    completion = inspect.signature(llama_cpp.Llama.create_completion)

    class DraftingLlama(llama_cpp.Llama):  # type: ignore[name-defined]
        def __init__(self, *args: Any, draft_model: Any = None, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.draft_model = draft_model

        def drafts_in_own_loop(self) -> bool:
            """Whether ``generate`` verifies drafts with ngramdraft's loop: a draft model set,
            and a model whose logits and state that loop can serve."""
            return (
                self.draft_model is not None
                and not host.keeps_every_logit(self)
                and host.rolls_back(self)
            )

        @functools.wraps(llama_cpp.Llama.create_completion)  # its signature, for its callers
        def create_completion(self, *args: Any, **kwargs: Any) -> Any:
            # generate's protocol has no max_tokens; its caller stops taking tokens there,
            # and a draft past it is a dearer pass for nothing. create_chat_completion and
            # the server complete through here.
            bound = completion.bind(self, *args, **kwargs)
            bound.apply_defaults()
            self.__dict__["max_tokens"] = bound.arguments["max_tokens"]
            try:
                return super().create_completion(*args, **kwargs)
            except BaseException:  # no generate took it: no later one may
                self.__dict__.pop("max_tokens", None)
                raise

        def detokenize(self, tokens: Any, prev_tokens: Any = None, special: bool = False) -> bytes:
            # The host's completion loop detokenizes its whole completion after every token:
            # the text of what it already had is kept (llama_cpp_detokenize.py).
            if not host.own_tokenizer(self):
                return super().detokenize(tokens, prev_tokens=prev_tokens, special=special)
            if "detokenizer" not in self.__dict__:  # as generations: see generate
                self.__dict__["detokenizer"] = Detokenizer()
            return self.__dict__["detokenizer"](host.vocab(self), tokens, special)

        def generate(self, *args: Any, max_tokens: int | None = None, **kwargs: Any) -> Any:
            # max_tokens, not the host's: the most tokens the caller will take (a completion's).
            max_tokens = self.__dict__.pop("max_tokens", max_tokens)
            loop = "ngramdraft" if self.drafts_in_own_loop() else "host"
            # Counted so that a server can say (and a test hold) which loop its requests ran;
            # kept in __dict__, as a Llama made before it became a DraftingLlama has none.
            self.__dict__.setdefault("generations", Counter())[loop] += 1
            if loop == "host":
                return host_generate(self, *args, **kwargs)
            bound = signature.bind(self, *args, **kwargs)
            settings = dict(bound.arguments)
            del settings["self"]
            tokens = settings.pop("tokens")
            return speculative_generate(
                self, tokens, self.draft_model, max_tokens=max_tokens, **settings
            )

    DraftingLlama.__doc__ = drafting_llama.__doc__
    return DraftingLlama


def load_llama(
    model_path: str | os.PathLike[str],
    *,
    draft_model: Any = None,
    n_ctx: int = 4096,
    verbose: bool = False,
    **kwargs: Any,
) -> Any:
    """A :func:`DraftingLlama <drafting_llama>` for ``model_path`` drafting with ``draft_model``.

    As ``Llama(model_path, draft_model=..., **kwargs)``: drafts are verified
    by ngramdraft's own loop (the prompt costs what it costs without
    drafting), a path that is not a GGUF model is a named error, and an
    :class:`NgramDraftModel`'s caches are checked against the model's
    vocabulary and, if its policy learns pass costs, a few passes timed
    (:meth:`NgramDraftModel.time_passes`). ``draft_model`` may also be set
    or changed later (call its ``time_passes(llama)`` then, if it learns).
    """
    cls = drafting_llama()
    path = check_gguf(model_path)
    n_ctx = check_int(n_ctx, "n_ctx", 0, MAX_CONTEXT)
    try:
        llama = cls(str(path), draft_model=draft_model, n_ctx=n_ctx, verbose=verbose, **kwargs)
    except ValueError as e:  # the host's word for any model it cannot load
        raise ModelFileError(f"{path}: llama.cpp cannot load this model ({e})") from e
    host.check(llama)
    if isinstance(draft_model, NgramDraftModel):
        draft_model.check_model(llama)
        draft_model.time_passes(llama)
    return llama


def plain_llama(model_path: str | os.PathLike[str], *, verbose: bool = False, **kwargs: Any) -> Any:
    """The host's own ``llama_cpp.Llama`` for ``model_path``, as a user without ngramdraft
    makes it (what ``generate --compare`` measures against); named errors as load_llama's."""
    llama_cpp = _llama_cpp()
    path = check_gguf(model_path)
    try:
        return llama_cpp.Llama(str(path), verbose=verbose, **kwargs)
    except ValueError as e:
        raise ModelFileError(f"{path}: llama.cpp cannot load this model ({e})") from e


def chat_prompt(llama: Any, messages: list[dict[str, str]]) -> list[int]:
    """The prompt tokens of chat ``messages`` in the model's own chat template (its GGUF's).

    What ``create_chat_completion`` feeds the model for the same messages, the
    generation prompt added; a model without a template is a named error.
    """
    text, added_special = chat_text(llama, messages)
    return list(llama.tokenize(text.encode("utf-8"), add_bos=not added_special, special=True))


def chat_text(llama: Any, messages: list[dict[str, str]]) -> tuple[str, bool]:
    """Chat ``messages`` rendered by the model's own chat template, as text a completion
    request can send, and whether the template wrote the model's BOS itself."""
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        raise ModelFileError(
            f"{llama.model_path}: the model has no chat template (tokenizer.chat_template): "
            "give it a plain prompt"
        )
    chat_format = _llama_cpp().llama_chat_format
    vocab = host.vocab(llama)
    bos, eos = llama.token_bos(), llama.token_eos()
    formatter = chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=vocab.token_get_text(eos) if eos != -1 else "",
        bos_token=vocab.token_get_text(bos) if bos != -1 else "",
    )
    rendered = formatter(messages=messages)
    return rendered.prompt, bool(rendered.added_special)
