"""ngramdraft inside transformers' assisted decoding: lossless greedy output on a real model.

A tiny random LlamaForCausalLM in float64 (built here, no download) generates
the same tokens with ngramdraft's candidates, with garbage and with oracle
candidates as without any.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from ngramdraft import build_static, build_suffix_corpus  # noqa: E402
from ngramdraft.errors import InvalidParameterError, VocabularyError  # noqa: E402
from ngramdraft.integrations.core import DraftStep  # noqa: E402
from ngramdraft.integrations.transformers import NgramCandidateGenerator, NgramDraft  # noqa: E402

pytestmark = pytest.mark.engine

N = 600


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        eos_token_id=None,
    )
    return transformers.LlamaForCausalLM(config).to(torch.float64).eval()


@pytest.fixture(scope="module")
def prompt():
    return torch.tensor([[1, 5, 9, 33, 5, 9, 12, 100, 5, 9, 33, 7]])


@pytest.fixture(scope="module")
def reference(model, prompt):
    return model.generate(prompt, max_new_tokens=N, do_sample=False)


class Scripted(NgramDraft):
    """NgramDraft whose candidates come from a function of the sequence (oracle, garbage)."""

    def __init__(self, propose):
        super().__init__()
        self.propose = propose
        self.drafter.draft = lambda: propose(self.drafter.tokens)


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_ngramdraft_candidates_are_lossless(model, prompt, reference, rules):
    draft = NgramDraft(rules=rules)
    out = model.generate(prompt, max_new_tokens=N, do_sample=False, custom_generate=draft)
    assert torch.equal(out, reference)
    assert draft.stats.drafted > 0 and draft.stats.passes < N


def test_oracle_and_garbage_candidates_are_lossless(model, prompt, reference):
    full = reference[0].numpy().astype(np.int32)
    oracle = Scripted(lambda seq: full[len(seq) : len(seq) + 8])
    out = model.generate(prompt, max_new_tokens=N, do_sample=False, custom_generate=oracle)
    assert torch.equal(out, reference)
    assert oracle.stats.passes <= N // 9 + 2
    rng = np.random.default_rng(0)
    garbage = Scripted(lambda seq: rng.integers(0, 300, 8).astype(np.int32))
    out = model.generate(prompt, max_new_tokens=N, do_sample=False, custom_generate=garbage)
    assert torch.equal(out, reference)


def test_suffix_rules_with_a_corpus_are_lossless(model, prompt, reference, tmp_path):
    corpus = build_suffix_corpus(reference[0, : N // 2].numpy(), tmp_path / "corpus.ngd")
    draft = NgramDraft(rules="suffix", static=corpus)
    out = model.generate(prompt, max_new_tokens=N, do_sample=False, custom_generate=draft)
    assert torch.equal(out, reference)
    assert draft.stats.drafted > 0


def test_static_and_dynamic_caches_are_lossless(model, prompt, reference, tmp_path):
    static = build_static(reference[0, : N // 2].numpy(), tmp_path / "s.ngd")
    draft = NgramDraft(static=static, dynamic=tmp_path / "d.ngd")
    for _ in range(2):  # the second call drafts from the first one's dynamic cache
        out = model.generate(prompt, max_new_tokens=N, do_sample=False, custom_generate=draft)
        assert torch.equal(out, reference)
    assert (tmp_path / "d.ngd").exists()


def test_batches_and_foreign_vocabularies_are_refused(model, prompt, tmp_path):
    with pytest.raises(InvalidParameterError, match="one sequence at a time"):
        model.generate(prompt.repeat(2, 1), max_new_tokens=5, custom_generate=NgramDraft())
    big = build_static(np.array([1, 2, 3, 500, 1, 2]), tmp_path / "big.ngd")
    with pytest.raises(VocabularyError):
        model.generate(prompt, max_new_tokens=5, custom_generate=NgramDraft(static=big))


def test_candidates_stop_at_eos_and_max_length():
    config = transformers.GenerationConfig(max_length=14)
    config._eos_token_tensor = torch.tensor([7])
    draft = NgramDraft()
    generator = NgramCandidateGenerator(DraftStep(draft.drafter), config)
    seq = torch.tensor([[5, 6, 8, 9, 5, 6, 8, 9, 5, 6]])
    out, logits = generator.get_candidates(seq)
    assert logits is None and out[0, 10:].tolist() == [8, 9, 5]  # max_length - 1 - 10
    seq = torch.tensor([[5, 6, 7, 9, 5, 6]])
    assert generator.get_candidates(seq)[0].shape[1] == 6  # the draft starts with EOS
