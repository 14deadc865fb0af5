"""What `ngramdraft serve` checks of a request before llama-cpp-python or llama.cpp sees it.

llama.cpp ends the process on some inputs (a token id outside the vocabulary
given to detokenize: an uncaught ``std::out_of_range``; a grammar that does
not parse: a null sampler dereferenced), and llama-cpp-python's server
answers 500 to many others (a lone surrogate, a null where a number goes, an
integer C cannot hold, a body nested past Python's recursion limit). A
request may fail; the server may not, and a client's mistake is never a 500.
So every body is checked here first, and each refusal names the field and
what to send instead:

* 400 for a body that is not a JSON object, text that is not Unicode
  (a lone surrogate), a grammar llama.cpp cannot parse, a prompt longer
  than the context, or a feature this server does not serve (logprobs);
* 422 for a field of the wrong type, a null where the field has a
  default, a number that is not finite or that llama.cpp's C types cannot
  hold, a token id outside the vocabulary.

:func:`check_body` is pure apart from the two callables it is given (the
model's tokenizer and its grammar parser), so the tests drive it directly
as well as through a server.
"""

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The widest integer any request field reaches llama.cpp as (int32_t: top_k, seeds
# after the host's masking, token ids, mirostat modes).
INT32 = (-(2**31), 2**31 - 1)
# Fields an OpenAI client sends as null to mean "the default": accepted as left out.
NULL_MEANS_DEFAULT = frozenset({"model", "user", "stop", "seed", "suffix", "logit_bias_type"})


@dataclass(frozen=True)
class Refusal(Exception):
    """A request refused: the HTTP status, what is wrong and how to mend it, the field."""

    status: int
    message: str
    param: str | None = None


@dataclass(frozen=True)
class Model:
    """What a check needs of the model: its vocabulary size, its context, its tokenizer
    (text to token ids, special tokens parsed as the host does) and whether llama.cpp
    parses a grammar (``grammar_error``: None, or the reason it does not)."""

    n_vocab: int
    n_ctx: int
    tokenize: Callable[[str], list[int]]
    grammar_error: Callable[[str], str | None]


def parse_json(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or a 400 Refusal saying why it is not one."""
    try:
        data = json.loads(body)
    except RecursionError:
        raise Refusal(400, "the request body is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise Refusal(400, f"the request body is not JSON ({e})") from None
    if not isinstance(data, dict):
        raise Refusal(400, "the request body must be a JSON object")
    return data


def check_values(value: Any, where: str = "") -> None:
    """Every string encodable as UTF-8, every number finite and every integer within what
    llama.cpp's C types hold, anywhere in ``value`` (a parsed JSON document)."""
    stack = [(value, where)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            if not _encodable(item):
                raise Refusal(400, f"{at or 'body'}: the text holds a lone surrogate "
                              "(not Unicode): send UTF-8 text", at or None)  # fmt: skip
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int):
            if not INT32[0] <= item <= INT32[1]:
                raise Refusal(422, f"{at}: {item} is out of range (a 32-bit integer)", at)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise Refusal(422, f"{at}: {item} is not a finite number", at)
        elif isinstance(item, dict):
            for key, v in item.items():
                if not _encodable(key):
                    raise Refusal(400, f"{at or 'body'}: a key holds a lone surrogate", at)
                stack.append((v, f"{at}.{key}" if at else key))
        elif isinstance(item, list):
            stack.extend((v, f"{at}[{i}]") for i, v in enumerate(item))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_fields(data: dict[str, Any], schema: Any) -> dict[str, Any]:
    """``data`` checked against the host's pydantic model of the route's body: a 422 naming
    the first bad field. A null given for a field with a non-null default is refused
    too (the host passes it on, and fails), except where OpenAI's API means "the
    default" by it (:data:`NULL_MEANS_DEFAULT`), which is dropped."""
    data = {k: v for k, v in data.items() if not (v is None and k in NULL_MEANS_DEFAULT)}
    for name, field in schema.model_fields.items():
        if name in data and data[name] is None and field.default is not None:
            raise Refusal(422, f"{name}: null is not allowed; leave the field out for its "
                          f"default ({field.default!r})", name)  # fmt: skip
    try:
        schema(**data)
    except ValueError as e:  # pydantic's ValidationError is one
        errors: list[dict[str, Any]] = getattr(e, "errors", list)()
        first = errors[0] if errors else {}
        param = ".".join(str(p) for p in first.get("loc", ())) or None
        raise Refusal(422, f"{param}: {first.get('msg')}" if first else str(e), param) from None
    return data


def check_tokens(tokens: Any, n_vocab: int, param: str) -> None:
    """Token ids a llama.cpp call will index its vocabulary with: each in [0, n_vocab)."""
    for i, t in enumerate(tokens):
        if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < n_vocab:
            raise Refusal(422, f"{param}[{i}]: {t!r} is not a token of this model (ids are "
                          f"0 to {n_vocab - 1})", f"{param}[{i}]")  # fmt: skip


def check_generation(data: dict[str, Any], model: Model, chat: bool) -> None:
    """The fields of a completion or chat request that reach llama.cpp: grammar, logit
    bias, logprobs and (for a completion) the prompt's length."""
    for param in ("logprobs", "top_logprobs"):
        if data.get(param):
            raise Refusal(400, f"{param}: not served here: the server computes logits only "
                          "where drafts are verified, not at every position; ask "
                          "without it", param)  # fmt: skip
    grammar = data.get("grammar")
    if grammar is not None:
        error = model.grammar_error(grammar)
        if error is not None:
            raise Refusal(400, f"grammar: llama.cpp cannot parse it ({error})", "grammar")
    bias = data.get("logit_bias") or {}
    if data.get("logit_bias_type") != "tokens":  # keys are token ids
        for key in bias:
            try:
                token = int(key)
            except ValueError:
                raise Refusal(422, f"logit_bias: {key!r} is not a token id (send "
                              '"logit_bias_type": "tokens" to bias by text)',
                              "logit_bias") from None  # fmt: skip
            if not 0 <= token < model.n_vocab:
                raise Refusal(422, f"logit_bias: {key!r} is not a token of this model (ids "
                              f"are 0 to {model.n_vocab - 1})", "logit_bias")  # fmt: skip
    if not chat:
        prompt = data.get("prompt", "")
        if not isinstance(prompt, str):
            raise Refusal(422, "prompt: one string (a list of prompts is not served: send "
                          "one request each)", "prompt")  # fmt: skip
        n = len(model.tokenize(prompt))
        room = model.n_ctx - n
        if room < 1:
            raise Refusal(400, f"prompt: {n} tokens do not fit the context ({model.n_ctx}): "
                          "shorten it, or serve with a larger -c", "prompt")  # fmt: skip


def check_body(route: str, data: dict[str, Any], schema: Any, model: Model) -> dict[str, Any]:
    """A parsed body for ``route`` checked throughout (:class:`Refusal` if it must not reach
    the host); returns it as the host should get it."""
    check_values(data)
    data = check_fields(data, schema)
    if route == "detokenize":
        check_tokens(data["tokens"], model.n_vocab, "tokens")
    elif route in ("completion", "chat"):
        check_generation(data, model, chat=route == "chat")
    return data
