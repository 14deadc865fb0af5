"""Lossless with trained weights: SmolLM2-135M-Instruct's greedy output with ngramdraft's
drafts equals its output without them, on llama-cpp-python (ngramdraft's loop and the
host's completion API) and on transformers, for both rule sets. Random models hold the
protocol; a trained model answers with the near-ties and long copies real text has."""

import pytest

pytest.importorskip("llama_cpp")

from conftest import EDIT_REQUEST
from ngramdraft.integrations.llama_cpp import (
    NgramDraftModel,
    chat_prompt,
    load_llama,
    plain_llama,
)
from ngramdraft.integrations.llama_cpp_measure import generate

pytestmark = pytest.mark.engine

N = 200
RULES = ["llamacpp", "suffix"]


@pytest.fixture(scope="module")
def plain(smollm):
    return plain_llama(smollm, n_ctx=2048)


@pytest.fixture(scope="module")
def prompt(plain):
    return chat_prompt(plain, [{"role": "user", "content": EDIT_REQUEST}])


@pytest.fixture(scope="module")
def reference(plain, prompt):
    out = generate(plain, prompt, N)
    assert out.passes == len(out.tokens)
    return out.tokens


def _first_difference(got, want):
    n = min(len(got), len(want))
    where = next((i for i in range(n) if got[i] != want[i]), n)
    return f"outputs differ from token {where} ({len(got)} and {len(want)} tokens)"


@pytest.mark.parametrize("rules", RULES)
def test_drafting_keeps_a_trained_models_greedy_output(smollm, prompt, reference, rules):
    ours = load_llama(smollm, n_ctx=2048)
    out = generate(ours, prompt, N, NgramDraftModel(rules=rules, policy=None))
    assert out.tokens == reference, _first_difference(out.tokens, reference)
    # the answer copies the request: a good share of its tokens come from accepted drafts
    assert out.accepted >= len(out.tokens) // 4


@pytest.mark.parametrize("rules", RULES)
def test_the_hosts_chat_api_keeps_a_trained_models_output(smollm, plain, rules):
    draft = NgramDraftModel(rules=rules, policy=None)
    ours = load_llama(smollm, n_ctx=2048, draft_model=draft)
    request = {"messages": [{"role": "user", "content": EDIT_REQUEST}], "max_tokens": N}
    want = plain.create_chat_completion(**request, temperature=0.0)
    got = ours.create_chat_completion(**request, temperature=0.0)
    assert got["choices"][0]["message"] == want["choices"][0]["message"]
    assert draft.stats.accepted > 0


@pytest.mark.parametrize("rules", RULES)
def test_transformers_with_drafts_keeps_a_trained_models_output(smollm, rules):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from ngramdraft.integrations.transformers import NgramDraft

    folder, name = str(smollm.parent), smollm.name
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=name, dtype=torch.float32
    ).eval()
    messages = [{"role": "user", "content": EDIT_REQUEST}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt")
    ids = ids if isinstance(ids, torch.Tensor) else ids["input_ids"]
    settings = {"max_new_tokens": N, "do_sample": False}
    with torch.inference_mode():
        want = model.generate(ids, **settings)
        draft = NgramDraft(rules=rules, policy=None)
        got = model.generate(ids, **settings, custom_generate=draft)
    new_got, new_want = got[0, ids.shape[1] :].tolist(), want[0, ids.shape[1] :].tolist()
    assert new_got == new_want, _first_difference(new_got, new_want)
    assert draft.stats.passes < len(new_got)  # a pass made more than one token: drafts held
