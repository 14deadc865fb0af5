"""ngramdraft inside llama-cpp-python: lossless greedy decoding, the adapter's protocol, errors.

Every test runs the real engine on a tiny random-weight GGUF written by the
test session (no download). Greedy output with any draft model must equal
the output without one, token for token.
"""

import json

import numpy as np
import pytest

llama_cpp = pytest.importorskip("llama_cpp")

from ngramdraft import (  # noqa: E402
    AdaptiveLength,
    CostAwareLength,
    NgramCache,
    StaticCache,
    TokenizerMismatchError,
    build_static,
    build_suffix_corpus,
)
from ngramdraft.errors import (  # noqa: E402
    ModelFileError,
    VocabularyError,
)
from ngramdraft.integrations import llama_cpp as llama_cpp_adapter  # noqa: E402
from ngramdraft.integrations.llama_cpp import (  # noqa: E402
    NgramDraftModel,
    load_llama,
    plain_llama,
)
from ngramdraft.integrations.llama_cpp_decode import Decoder, decoder_of  # noqa: E402
from ngramdraft.integrations.llama_cpp_measure import (  # noqa: E402
    first_difference,
    generate,
    measure_pass_cost,
)
from ngramdraft.tokenizers.gguf import GGUFTokenizer  # noqa: E402
from random_gguf import TINY, write_random_gguf  # noqa: E402

pytestmark = pytest.mark.engine

N = 640  # generated tokens: with the prompt, past the default n_batch of 512
PROMPT = b"the old man and the sea, and the man who was old; the sea was old"


@pytest.fixture(scope="module")
def llama(tiny_gguf):
    return load_llama(tiny_gguf, draft_model=NgramDraftModel(), n_ctx=2048)


@pytest.fixture(scope="module")
def prompt(llama):
    return llama.tokenize(PROMPT, add_bos=True)


@pytest.fixture(scope="module")
def reference(llama, prompt):
    """Greedy output without drafting."""
    out = generate(llama, prompt, N)
    assert out.passes == N and out.accepted == 0
    return out.tokens


class Oracle:
    """Drafts the true continuation: every draft is accepted."""

    def __init__(self, prompt, reference, n_draft=8):
        self.full = np.array(list(prompt) + reference, dtype=np.intc)
        self.n_draft = n_draft

    def __call__(self, input_ids, /, **kwargs):
        n = len(input_ids)
        return self.full[n : n + self.n_draft]


class Garbage:
    """Drafts random in-vocabulary tokens: (nearly) every draft is rejected."""

    def __init__(self, n_vocab, seed=0):
        self.rng = np.random.default_rng(seed)
        self.n_vocab = n_vocab

    def __call__(self, input_ids, /, **kwargs):
        return self.rng.integers(0, self.n_vocab, 8).astype(np.intc)


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_ngramdraft_is_lossless_and_drafts(llama, prompt, reference, rules):
    # No policy: what the engine default learns (CostAwareLength() timing the passes)
    # depends on the machine's load, which a test must not (it is lossless below).
    out = generate(llama, prompt, N, NgramDraftModel(rules=rules, policy=None))
    assert out.tokens == reference
    assert out.accepted > 50 and out.passes < N


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_the_engine_defaults_are_lossless(llama, prompt, reference, rules):
    """Each rule set's engine default (the suffix rules: 32 tokens, costs learned)."""
    draft = NgramDraftModel(rules=rules)
    assert generate(llama, prompt, N, draft).tokens == reference


def test_suffix_rules_with_a_policy_and_earlier_requests_are_lossless(llama, prompt, reference):
    draft = NgramDraftModel(rules="suffix", n_draft=8, policy=CostAwareLength([1.0] + [1.3] * 8))
    first = generate(llama, prompt, N, draft)
    again = generate(llama, prompt, N, draft)  # a new sequence: the first is remembered
    assert first.tokens == again.tokens == reference
    assert again.accepted > first.accepted


def test_suffix_rules_with_a_corpus_are_lossless(llama, prompt, reference, tmp_path):
    # No policy, as above: on this tiny model a pass over two tokens costs twice one
    # (per-row work dominates), so what a learning policy submits depends on the load;
    # under load on CI it once submitted nothing in 640 tokens.
    corpus = build_suffix_corpus(reference[: N // 2], tmp_path / "corpus.ngd")
    draft = NgramDraftModel(rules="suffix", static=corpus, policy=None)
    out = generate(llama, prompt, N, draft)
    assert out.tokens == reference
    assert out.accepted > 50


def test_opt_in_policies_are_lossless(llama, prompt, reference):
    for policy in (
        AdaptiveLength(),
        CostAwareLength([1.0, 1.4, 2.0, 1.9, 2.5, 2.3, 2.9, 2.5, 3.3]),
    ):
        out = generate(llama, prompt, N, NgramDraftModel(policy=policy))
        assert out.tokens == reference
        assert out.accepted > 0


def test_oracle_and_garbage_drafts_are_lossless(llama, prompt, reference):
    oracle = generate(llama, prompt, N, Oracle(prompt, reference))
    assert oracle.tokens == reference
    assert oracle.passes <= N // 9 + 2  # 8 drafted + 1 own token per pass
    garbage = generate(llama, prompt, N, Garbage(llama.n_vocab()))
    assert garbage.tokens == reference
    assert garbage.drafted >= 8 * (N - 2)


def test_static_and_dynamic_caches_are_lossless(llama, prompt, reference, tmp_path):
    other = generate(llama, llama.tokenize(b"a man, a sea", add_bos=True), N).tokens
    static = build_static(np.array(other + reference[: N // 2]), tmp_path / "s.ngd")
    dynamic = tmp_path / "d.ngd"
    draft = NgramDraftModel(static=static, dynamic=dynamic)
    out = generate(llama, prompt, N, draft)
    assert out.tokens == reference
    draft.finish()
    assert len(NgramCache.load(dynamic)) > 0
    again = generate(llama, prompt, N, NgramDraftModel(static=static, dynamic=dynamic))
    assert again.tokens == reference
    assert again.accepted > out.accepted  # the dynamic cache holds this very sequence


def test_the_hosts_own_loop_needs_logits_all_past_n_batch(tiny_gguf, prompt):
    """What load_llama's Llama does not need: the host's loop, given a draft model, fails
    past n_batch positions without logits_all (and, given one later, aborts)."""
    plain = llama_cpp.Llama(
        str(tiny_gguf), n_ctx=2048, draft_model=NgramDraftModel(), verbose=False
    )
    with pytest.raises(ValueError, match="broadcast"):
        generate(plain, prompt, N, NgramDraftModel())


def test_a_draft_model_given_later_drafts_past_n_batch(tiny_gguf, prompt, reference):
    """A Llama made without a draft model, given one later (the host aborts the process at
    its first draft: GGML_ASSERT(logits != nullptr)), with a prompt past n_batch."""
    later = load_llama(tiny_gguf, n_ctx=2048)
    long = [*prompt, *reference[:600]]
    plain = generate(later, long, 100).tokens
    later.draft_model = NgramDraftModel()
    out = generate(later, long, 100, later.draft_model)
    assert out.tokens == plain and out.accepted > 0


def test_the_hosts_completion_api_drafts_through_ngramdrafts_loop(tiny_gguf):
    """create_completion (and so the server) verifies drafts with ngramdraft's loop: the same
    text as a plain Llama's, greedy and sampled with a seed, and the drafts accepted."""
    plain = llama_cpp.Llama(str(tiny_gguf), n_ctx=2048, verbose=False)
    draft = NgramDraftModel(rules="suffix", policy=None)  # what it accepts, whatever the load
    ours = load_llama(tiny_gguf, draft_model=draft, n_ctx=2048)
    text = PROMPT.decode()
    for settings in ({"temperature": 0.0}, {"temperature": 0.8, "seed": 7, "top_k": 20}):
        expected = plain.create_completion(text, max_tokens=300, **settings)["choices"][0]
        got = ours.create_completion(text, max_tokens=300, **settings)["choices"][0]
        assert got["text"] == expected["text"]
        assert draft.stats.drafted > 0
    assert draft.stats.accepted > 0  # the greedy output repeats itself; the sampled one less
    chunks = ours.create_completion(text, max_tokens=100, temperature=0.0, stream=True)
    streamed = "".join(c["choices"][0]["text"] for c in chunks)
    assert (
        streamed
        == plain.create_completion(text, max_tokens=100, temperature=0.0)["choices"][0]["text"]
    )


def test_detokenize_gives_the_hosts_text_however_the_tokens_come(llama):
    """The kept text is joined to only where it is the host's: a list that extends the last
    one (grown in place, as the host grows its completion), not a shorter or another list,
    nor a BOS token where the new tokens begin (the host drops the space its text may
    begin with, at the start of a list)."""
    rng = np.random.default_rng(5)
    bos = llama.token_bos()
    tokens = rng.integers(0, llama.n_vocab(), 200).tolist()
    tokens[40] = tokens[120] = bos

    def same(tokens, special=False):
        got = llama.detokenize(tokens, special=special)
        assert got == llama_cpp.Llama.detokenize(llama, tokens, special=special)

    for special in (False, True):
        grown = []
        for token in tokens:
            grown.append(token)
            same(grown, special)
            same(grown[-3:], special)  # a stream's unsent tail between two
    for other in (tokens[:100], tokens[:60], tokens[5:90], [bos, *tokens[:50]], tokens):
        same(other)
        same(other, special=True)


def test_a_completion_looks_up_each_tokens_text_once_not_once_per_token_after(
    tiny_gguf, monkeypatch
):
    """The host's completion loop asks for its whole completion's text after every token:
    n**2 / 2 token lookups over n tokens (0.2 ms a token over a 300-token answer, a few
    percent of a drafted answer's decode on a CPU). Here each token's text is looked up
    about once, and the text is the host's."""
    ours = load_llama(tiny_gguf, draft_model=NgramDraftModel(), n_ctx=2048)
    plain = llama_cpp.Llama(str(tiny_gguf), n_ctx=2048, verbose=False)
    text = PROMPT.decode()
    expected = plain.create_completion(text, max_tokens=200, temperature=0.0)["choices"][0]
    model, looked_up = ours._model, []
    host_detokenize = model.detokenize

    def counted(tokens, special=False):
        looked_up.append(len(tokens))
        return host_detokenize(tokens, special)

    monkeypatch.setattr(model, "detokenize", counted)
    got = ours.create_completion(text, max_tokens=200, temperature=0.0)["choices"][0]
    assert got["text"] == expected["text"] and got["finish_reason"] == "length"  # 200 tokens
    assert sum(looked_up) < 2 * 200  # the host's own: 20,300


def test_no_pass_drafts_past_the_tokens_a_completion_asked_for(tiny_gguf, prompt, reference):
    """A pass yields its token and the draft's accepted ones; those past max_tokens are never
    read, and on a CPU a longer pass costs more: each draft stops at what is still wanted."""
    ours = load_llama(tiny_gguf, draft_model=Oracle(prompt, reference, n_draft=16), n_ctx=2048)
    decoder = decoder_of(ours)
    sizes = []
    real = decoder.decode

    def decode(tokens, rows):
        sizes.append(len(tokens))
        return real(tokens, rows)

    decoder.decode = decode
    for max_tokens in (20, 37):
        sizes.clear()
        ours.create_completion(list(prompt), max_tokens=max_tokens, temperature=0.0)
        # The prompt's pass picks the first token; then passes of 1 + 16 drafted, each
        # yielding its length, the last one cut to what is left.
        passes = sizes[1:]
        assert sum(passes) == max_tokens - 1 and max(passes) == 17, passes
    sizes.clear()  # `ngramdraft generate`'s loop, the same
    generate(ours, prompt, 20, ours.draft_model)
    assert sum(sizes[1:]) == 19, sizes
    # A completion refused before it generates leaves no cap for a later generate.
    with pytest.raises(ValueError):
        ours.create_completion(list(prompt) * 200, max_tokens=3)
    sizes.clear()
    generate(ours, prompt, 40, ours.draft_model)
    assert sum(sizes[1:]) == 39 and max(sizes[1:]) == 17, sizes


def test_a_longer_prompt_reuses_the_model_state_and_stays_lossless(
    tiny_gguf, prompt, reference, monkeypatch
):
    """A conversation's next turn extends the last sequence: its common prefix is not
    evaluated again, and the output is a fresh model's."""
    from ngramdraft.integrations.llama_cpp_decode import Decoder

    evaluated = []  # each prompt's positions that ngramdraft's loop evaluates
    real = Decoder.prompt

    def prompt_pass(self, tokens):
        evaluated.append(len(tokens))
        return real(self, tokens)

    monkeypatch.setattr(Decoder, "prompt", prompt_pass)
    ours = load_llama(tiny_gguf, draft_model=NgramDraftModel(), n_ctx=2048)
    first = generate(ours, prompt, 100, ours.draft_model)
    turn = [*prompt, *first.tokens, *prompt]
    again = generate(ours, turn, 100, ours.draft_model)
    fresh = generate(load_llama(tiny_gguf, n_ctx=2048), turn, 100)
    assert again.tokens == fresh.tokens
    # The first turn whole; of the second only what follows the state kept (the last
    # generated token was never evaluated, and the prompt's last position is, for its logits).
    assert evaluated == [len(prompt), evaluated[1]] and evaluated[1] <= len(prompt) + 2


def test_stopping_criteria_see_each_tokens_row(tiny_gguf, prompt, reference):
    seen = []

    def stop(ids, logits):
        seen.append((len(ids), int(np.argmax(logits))))
        return len(seen) == 50

    ours = load_llama(tiny_gguf, draft_model=NgramDraftModel(), n_ctx=2048)
    tokens = list(ours.generate(prompt, temp=0.0, stopping_criteria=stop))
    assert tokens == reference[:49]
    # Each call: the sequence so far and the row that picks the next token.
    assert seen[:49] == [(len(prompt) + i, t) for i, t in enumerate(reference[:49])]


def test_adapter_follows_extension_and_restarts_on_a_new_sequence():
    draft = NgramDraftModel()
    seq = np.array([5, 6, 7, 5, 6, 7, 5, 6], dtype=np.intc)
    assert draft(seq[:4]).tolist() == []
    assert draft(seq).tolist() == [7, 5, 6, 7, 5, 6, 7, 5]  # only seq[4:] accepted
    assert draft.drafter.tokens.tolist() == seq.tolist()
    other = seq.copy()
    other[0] = 9  # same length and tail, another sequence
    draft(other)
    assert draft.drafter.tokens.tolist() == other.tolist()
    tokens, counts = draft.drafter.dynamic.followers((5, 6))  # the first sequence, finished
    assert tokens.tolist() == [7] and counts.tolist() == [2]
    fresh = NgramDraftModel()
    fresh(other)
    assert draft.drafter.context.arrays()[0].tolist() == fresh.drafter.context.arrays()[0].tolist()


def test_tokenizer_from_gguf_is_recorded_and_checked(tiny_gguf, tmp_path, cli):
    text = tmp_path / "corpus.txt"
    text.write_text("the old man and the sea\n\nthe man who was old\n" * 50)
    cache = tmp_path / "c.ngd"
    assert cli("build-static", text, "--tokenizer", tiny_gguf, "-o", cache, "-q")[0] == 0
    tokenizer = StaticCache.open(cache).meta["tokenizer"]
    assert tokenizer["kind"] == "gguf" and tokenizer["n_vocab"] == TINY.n_vocab
    StaticCache.open(cache, tokenizer=tiny_gguf)  # the same vocabulary passes

    other = write_random_gguf(
        tmp_path / "other.gguf", TINY.__class__(**{**TINY.__dict__, "n_vocab": 259 + 40})
    )
    with pytest.raises(TokenizerMismatchError):
        StaticCache.open(cache, tokenizer=other)
    with pytest.raises(TokenizerMismatchError):
        load_llama(other, draft_model=NgramDraftModel(static=cache))
    ids, _ = GGUFTokenizer(tiny_gguf).encode_batch(["the old man"])
    assert len(ids) > 0


def test_cache_with_ids_beyond_the_vocabulary_is_refused(tiny_gguf, tmp_path):
    cache = build_static(np.array([1, 2, 3, TINY.n_vocab + 5, 1, 2]), tmp_path / "big.ngd")
    with pytest.raises(VocabularyError, match="vocabulary"):
        load_llama(tiny_gguf, draft_model=NgramDraftModel(static=cache))


def test_model_paths_get_named_errors(tmp_path):
    with pytest.raises(ModelFileError, match="no such model"):
        load_llama(tmp_path / "missing.gguf")
    with pytest.raises(ModelFileError, match="directory"):
        load_llama(tmp_path)
    (tmp_path / "x.gguf").write_bytes(b"not a model")
    with pytest.raises(ModelFileError, match="not a GGUF"):
        load_llama(tmp_path / "x.gguf")
    (tmp_path / "trunc.gguf").write_bytes(b"GGUF\x03\x00")
    with pytest.raises(ModelFileError, match="cannot load"):
        load_llama(tmp_path / "trunc.gguf")


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_generate_cli_compares_and_is_lossless(tiny_gguf, tmp_path, cli, rules):
    status, out, err = cli(
        "generate",
        tiny_gguf,
        "-p",
        PROMPT.decode(),
        "-n",
        200,
        "-c",
        1024,
        "--compare",
        "--json",
        "--rules",
        rules,
    )
    assert status == 0, err
    figures = json.loads(out)
    assert figures["identical"] is True and figures["first_difference"] is None
    assert figures["ngramdraft"]["n_tokens"] == 200
    assert figures["ngramdraft"]["drafted"] > 0
    if rules == "llamacpp":  # the suffix rules' policy finds a tiny model's long passes dear
        assert figures["ngramdraft"]["forward_passes"] < figures["plain Llama"]["forward_passes"]
    assert figures["ngramdraft"]["prompt_s"] > 0 and figures["speedup"] > 0
    status, out, _ = cli("generate", tiny_gguf, "-p", "the sea", "-n", 20, "-c", 512)
    assert status == 0 and "tokens/s" in out and "forward passes" in out


def test_generate_cli_with_the_cost_aware_policy_is_lossless(tiny_gguf, cli, capsys):
    args = ("generate", tiny_gguf, "-p", PROMPT.decode(), "-n", 120, "-c", 1024, "--compare")
    for policy in ("--cost-aware", "--no-policy"):
        status, out, err = cli(*args, policy, "--rules", "suffix", "--json")
        assert status == 0, err
        assert json.loads(out)["identical"] is True
    with pytest.raises(SystemExit) as usage:
        cli(*args, "--cost-aware", "--adaptive")
    assert usage.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_where_two_outputs_part_the_plain_models_logits_are_weighed(tiny_gguf, prompt):
    plain = plain_llama(tiny_gguf, n_ctx=1024)
    out = generate(plain, prompt, 60).tokens
    assert first_difference(plain, prompt, out, list(out)) is None
    other = list(out)
    other[37] = (out[37] + 1) % plain.n_vocab()
    d = first_difference(plain, prompt, out, other)
    assert (d.position, d.tokens) == (37, (out[37], other[37]))
    # The plain model chose out[37] greedily there: its logit leads every other token's.
    assert d.margin >= d.top_gap >= 0
    reference = plain_llama(tiny_gguf, n_ctx=1024, logits_all=True)
    reference.eval(list(prompt) + out[:37])  # in one batch: the same logits, nearly
    row = np.asarray(reference.scores[reference.n_tokens - 1])
    assert row.argmax() == out[37]
    assert d.logits == pytest.approx((row[out[37]], row[other[37]]), abs=1e-3)
    # Outputs that only stop at different lengths have no token to weigh.
    assert first_difference(plain, prompt, out, out[:10]) is None


def test_pass_costs_are_measured_per_batch_size(llama, tiny_gguf):
    costs = measure_pass_cost(llama, 5, context=64, reps=2)
    assert len(costs) == 5 and min(costs) > 0
    assert llama.n_tokens == 0  # reset for the caller
    small = load_llama(tiny_gguf, n_ctx=48)  # a context shorter than asked for: clipped
    assert len(measure_pass_cost(small, 9, context=1024, reps=1)) == 9


def test_a_policy_that_learns_pass_costs_has_them_timed_at_load(tiny_gguf, prompt, reference):
    """The suffix rules' engine default learned pass costs from requests alone: where
    answers are short the long passes stayed untimed, and whole long drafts kept going
    out (a trained model's conversation: 0.84x of plain decoding in the passes it made)."""
    draft = NgramDraftModel(rules="suffix")
    llama = load_llama(tiny_gguf, draft_model=draft, n_ctx=2048)
    timed = draft.drafter.policy._timed
    assert sorted(timed) == [1, 2, 4, 8, 16, 32, 64] and {n for n, _ in timed.values()} == {3}
    assert llama.n_tokens == 0  # the timing's positions are gone
    assert generate(llama, prompt, N, draft).tokens == reference
    for nothing_to_learn in (None, CostAwareLength([1.0] * 33), AdaptiveLength()):
        other = NgramDraftModel(rules="suffix", policy=nothing_to_learn)
        load_llama(tiny_gguf, draft_model=other, n_ctx=2048)
        policy = other.drafter.policy
        assert policy is None or not getattr(policy, "_timed", {})


def test_passes_timed_at_load_are_kept_and_read_at_the_next_load(tiny_gguf, tmp_path, monkeypatch):
    """Timed at every load, the passes cost a one-shot `generate` about 2.5 s before its
    first token (Qwen2.5-Coder-0.5B, 2 threads), often more than drafting a short answer
    saves. Now the first load with a model and settings times them and keeps them; the
    next reads them. Other settings are timed apart, and a damaged file is timed again."""
    monkeypatch.setenv("NGRAMDRAFT_CACHE", str(tmp_path))
    monkeypatch.setattr(llama_cpp_adapter, "BUSIER", 1e6)  # a test run's timings are not quiet
    timings, time_passes = [], Decoder.time_passes

    def counted(self, sizes, **kwargs):
        if len(sizes) > 1:  # not the one-token pass that checks a kept file
            timings.append(list(sizes))
        return time_passes(self, sizes, **kwargs)

    monkeypatch.setattr(Decoder, "time_passes", counted)

    def load(**settings):
        draft = NgramDraftModel(rules="suffix")
        load_llama(tiny_gguf, draft_model=draft, n_ctx=2048, **settings)
        return dict(draft.drafter.policy._timed)

    first = load()
    kept = sorted((tmp_path / "passes").glob("*.json"))
    assert len(timings) == 1 and len(kept) == 1
    assert load() == first and len(timings) == 1  # read, not timed
    load(n_batch=64)  # another batch size: timed and kept apart
    assert len(timings) == 2 and len(list((tmp_path / "passes").glob("*.json"))) == 2
    kept[0].write_text('{"sizes": {"1": [NaN, 0.1, 0.1]}}')
    again = load()  # damaged: timed again and kept anew
    assert len(timings) == 3 and sorted(again) == [1, 2, 4, 8, 16, 32, 64]
    assert load() == again and len(timings) == 3


def test_passes_kept_from_a_busier_moment_are_timed_again(tiny_gguf, tmp_path, monkeypatch):
    """Timings kept from a load on a busy machine priced every size too dear, and the
    policy never submitted the sizes that would have corrected them: the suffix rules
    drafted nothing through 30 passes of a copy Qwen2.5-Coder-1.5B then made whole. Now a
    kept file whose one-token pass is far slower than one timed at this load is timed
    again and rewritten."""
    monkeypatch.setenv("NGRAMDRAFT_CACHE", str(tmp_path))

    def load():
        draft = NgramDraftModel(rules="suffix")
        load_llama(tiny_gguf, draft_model=draft, n_ctx=2048)
        return dict(draft.drafter.policy._timed)

    load()
    (kept,) = (tmp_path / "passes").glob("*.json")
    sizes = json.loads(kept.read_text())["sizes"]
    busy = {k: [30.0 * int(k)] * len(v) for k, v in sizes.items()}  # 30 s a token
    kept.write_text(json.dumps({"sizes": busy}))
    timed = load()
    assert all(seconds < 30.0 for _, seconds in timed.values())
    assert json.loads(kept.read_text())["sizes"]["1"][0] < 30.0  # rewritten


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("missing.gguf", "-p", "x"), "no such model file"),
        (("{tiny}", "-p", "x", "-n", 600, "-c", 512), "exceeds the context"),
        (("{tiny}", "-p", "x", "--static", "missing.ngd"), "missing.ngd"),
    ],
)
def test_generate_cli_errors_are_one_line(tiny_gguf, cli, args, message):
    args = [str(tiny_gguf) if a == "{tiny}" else a for a in args]
    status, _, err = cli("generate", *args)
    assert status == 1
    assert err.startswith("ngramdraft: error:") and message in err and "Traceback" not in err
