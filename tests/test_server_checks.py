"""The server's request checks, driven directly: each refusal names its field and status."""

import json

import pytest

pytest.importorskip("llama_cpp.server")

from llama_cpp.server import types

from ngramdraft.integrations import server_checks as checks

MODEL = checks.Model(
    n_vocab=100,
    n_ctx=16,
    tokenize=lambda text: list(range(len(text.split()))),
    grammar_error=lambda g: None if g.startswith("root ::=") else "does not parse",
)
COMPLETION, CHAT = types.CreateCompletionRequest, types.CreateChatCompletionRequest


def refusal(route, data, schema=COMPLETION):
    with pytest.raises(checks.Refusal) as got:
        checks.check_body(route, data, schema, MODEL)
    return got.value


@pytest.mark.parametrize(
    ("data", "status", "param"),
    [
        ({"prompt": "\ud800"}, 400, "prompt"),
        ({"prompt": "a", "stop": ["ok", "\udfff"]}, 400, "stop[1]"),
        ({"prompt": "a", "temperature": float("nan")}, 422, "temperature"),
        ({"prompt": "a", "top_k": 2**40}, 422, "top_k"),
        ({"prompt": "a", "presence_penalty": None}, 422, "presence_penalty"),
        ({"prompt": "a", "temperature": "hot"}, 422, "temperature"),
        ({"prompt": ["a", "b"]}, 422, "prompt"),
        ({"prompt": "a", "logit_bias": {"abc": 1.0}}, 422, "logit_bias"),
        ({"prompt": "a", "logit_bias": {"100": 1.0}}, 422, "logit_bias"),
        ({"prompt": "a", "grammar": "root ::= ["[:4]}, 400, "grammar"),
        ({"prompt": "a", "logprobs": 1}, 400, "logprobs"),
        ({"prompt": "w " * 16}, 400, "prompt"),
    ],
)
def test_a_completion_is_refused_naming_its_field(data, status, param):
    r = refusal("completion", data)
    assert (r.status, r.param) == (status, param) and param.split("[")[0] in r.message


def test_a_valid_body_passes_and_nulls_that_mean_the_default_are_dropped():
    data = {"prompt": "a b", "seed": None, "stop": None, "logit_bias": {"5": -1.0}}
    assert checks.check_body("completion", data, COMPLETION, MODEL) == {
        "prompt": "a b",
        "logit_bias": {"5": -1.0},
    }
    chat = {"messages": [{"role": "user", "content": "hi"}], "grammar": 'root ::= "a"'}
    assert checks.check_body("chat", chat, CHAT, MODEL) == chat


@pytest.mark.parametrize("tokens", [[-1], [100], [2**31], [True], ["1"]])
def test_detokenize_takes_only_ids_of_the_vocabulary(tokens):
    r = refusal("detokenize", {"tokens": tokens}, types.DetokenizeInputRequest)
    assert r.status == 422 and r.param.startswith("tokens")


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"[" * 100_000, "nested too deeply"),
        (b"{", "not JSON"),
        (b"[1]", "JSON object"),
        (b"\xff", "not JSON"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_a_400(body, words):
    with pytest.raises(checks.Refusal) as got:
        checks.parse_json(body)
    assert got.value.status == 400 and words in got.value.message


def test_every_value_is_walked_without_recursion():
    deep = json.loads("[" * 900 + "]" * 900)
    checks.check_values({"a": deep})  # no RecursionError: the walk keeps its own stack
