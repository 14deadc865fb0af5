"""ngramdraft as vLLM's proposer: lossless greedy output on vLLM itself, and row following.

The engine tests start vLLM (the CPU build, in its own environment: it pins
numba and numpy) in a subprocess on a tiny random LlamaForCausalLM written
here, once without drafting and once with NgramProposer, and compare the
tokens. The simulation tests drive the
proposer as vLLM's runner does, packing rows as requests end, and compare
every draft with one Drafter per request.
"""

import json
import os
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from ngramdraft import (
    CostAwareLength,
    Drafter,
    InvalidParameterError,
    NgramCache,
    RequestMemory,
    build_suffix_corpus,
)
from ngramdraft.integrations.vllm import NgramProposer

VOCAB = 512
N_REQUESTS = 12

# The tiny model, in float32, on a small machine: eager (no compiling) and a small cache.
SMALL_MACHINE = (
    'dtype="float32", max_model_len=1024, enforce_eager=True, gpu_memory_utilization=0.05'
)
ENGINE = """
import json, os, sys
import numpy as np
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt

model, method, n_requests = sys.argv[1], sys.argv[2], int(sys.argv[3])
spec = None
if method != "none":
    spec = {"method": "custom_class", "model": method, "num_speculative_tokens": 5}
llm = LLM(model, speculative_config=spec, max_num_seqs=4, seed=0, SMALL_MACHINE)
rng = np.random.default_rng(1)
prompts, params = [], []
for i in range(n_requests):
    motif = rng.integers(3, 500, int(rng.integers(2, 9))).tolist()
    prompt = (motif * 12)[: int(rng.integers(8, 80))] + rng.integers(3, 500, 5).tolist()
    prompts.append(TokensPrompt(prompt_token_ids=prompt))
    params.append(SamplingParams(temperature=0, max_tokens=int(rng.integers(30, 160)),
                                 ignore_eos=True))
outputs = llm.generate(prompts, params, use_tqdm=False)
result = {"prompts": [p["prompt_token_ids"] for p in prompts],
          "tokens": [list(o.outputs[0].token_ids) for o in outputs]}
if spec:
    runner = llm.llm_engine.model_executor.driver_worker.worker.model_runner
    result["stats"] = runner.drafter.stats.as_dict()
print("RESULT " + json.dumps(result), flush=True)
""".replace("SMALL_MACHINE", SMALL_MACHINE)


def _tiny_model(path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=128,  # vLLM's CPU attention needs heads of 32 and more
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=1,
        eos_token_id=2,
    )
    transformers.LlamaForCausalLM(config).eval().save_pretrained(path)
    vocab = {f"<{i}>": i for i in range(VOCAB)}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<0>"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<1>", eos_token="<2>", unk_token="<0>"
    ).save_pretrained(path)


def _engine_env(root, vllm_python):
    """The environment of a vLLM run in ``root``, a tiny model made there."""
    _tiny_model(root / "model")
    (root / "tmp").mkdir()
    return {
        **os.environ,
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",  # one process: starts in seconds
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "TMPDIR": str(root / "tmp"),
        "VLLM_CACHE_ROOT": str(root / "cache"),
        "NGRAMDRAFT_DYNAMIC": str(root / "requests.ngd"),
        # vLLM's numba is another version: a cache of its own, not this one's recompiled.
        "NUMBA_CACHE_DIR": str(Path(vllm_python).parents[1] / "numba-cache"),
    }


@pytest.fixture(scope="module")
def engine_runs(tmp_path_factory, vllm_python):
    """(without drafting, with NgramProposer and a dynamic file, the dynamic file's path)."""
    root = tmp_path_factory.mktemp("vllm")
    env = _engine_env(root, vllm_python)
    runs = []
    proposer = "ngramdraft.integrations.vllm.NgramProposer"
    suffix_env = {**env, "NGRAMDRAFT_DYNAMIC": str(root / "requests-suffix.ngd")}
    suffix_env["NGRAMDRAFT_RULES"] = "suffix"
    # A corpus of the vocabulary's ids: its drafts are mostly wrong, which a lossless
    # engine must reject.
    corpus = np.random.default_rng(1).integers(3, VOCAB, 20_000)
    suffix_env["NGRAMDRAFT_STATIC"] = str(build_suffix_corpus(corpus, root / "corpus.ngd").path)
    for method, run_env in (("none", env), (proposer, env), (proposer, suffix_env)):
        args = [vllm_python, "-c", ENGINE, str(root / "model"), method, str(N_REQUESTS)]
        done = subprocess.run(args, env=run_env, capture_output=True, text=True, timeout=600)
        lines = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
        assert done.returncode == 0 and lines, done.stderr[-3000:]
        runs.append(json.loads(lines[0][len("RESULT ") :]))
    return runs[0], runs[1], root / "requests.ngd", runs[2]


@pytest.mark.engine
@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_greedy_output_is_identical_with_the_proposer(engine_runs, rules):
    plain, drafted, _, suffix = engine_runs
    drafted = drafted if rules == "llamacpp" else suffix
    assert drafted["tokens"] == plain["tokens"]
    assert [len(t) for t in plain["tokens"]] == [len(t) for t in drafted["tokens"]]
    stats = drafted["stats"]
    assert stats["drafted_tokens"] > 100  # it did draft: the random model repeats itself
    assert stats["sequences"] == N_REQUESTS  # each request followed once, packing and all


@pytest.mark.engine
def test_finished_requests_reach_the_suffix_rules_requests_file(engine_runs):
    _, _, path, suffix = engine_runs
    held = RequestMemory.load(path.with_name("requests-suffix.ngd")).index.tokens.tolist()
    sequences, seq = [], []
    for t in held:
        if t == -1:
            sequences.append(seq)
            seq = []
        else:
            seq.append(t)
    expected = [p + t for p, t in zip(suffix["prompts"], suffix["tokens"], strict=True)]
    # Each request once, as the proposer saw it: its output, and any drafts vLLM
    # accepted past the output's length before cutting it there.
    assert len(sequences) == len(expected)
    for e in expected:
        assert any(held[: len(e)] == e for held in sequences)


@pytest.mark.engine
def test_finished_requests_reach_the_dynamic_file(engine_runs):
    _, drafted, path, _ = engine_runs
    cache = NgramCache.load(path)  # the last requests were finished at exit
    for prompt, tokens in zip(drafted["prompts"], drafted["tokens"], strict=True):
        sequence = prompt + tokens
        expected = NgramCache()
        expected.update(np.array(sequence))
        for ngram, followers, _ in expected:
            assert set(followers.tolist()) <= set(cache.followers(ngram)[0].tolist())


@pytest.mark.engine
def test_the_readmes_vllm_snippet_runs_as_written(tmp_path, vllm_python):
    """The snippet in vLLM's environment, a tiny random model in place of the one it fetches
    (with the settings this test's other runs give vLLM on a small machine)."""
    env = _engine_env(tmp_path, vllm_python)
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    code = re.search(r"<!-- vllm -->\n```python\n(.*?)\n```", readme, re.S).group(1)
    fetched = '"Qwen/Qwen2.5-Coder-0.5B-Instruct",'
    assert fetched in code
    tiny = f"{str(tmp_path / 'model')!r}, {SMALL_MACHINE},"
    done = subprocess.run(
        [vllm_python, "-c", code.replace(fetched, tiny)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.endswith("\n")  # the reply was printed (a random model's may be empty)


def _proposer(max_seqs=6, max_len=400, n_draft=4, dynamic=None, **settings):
    config = SimpleNamespace(
        speculative_config=SimpleNamespace(num_speculative_tokens=n_draft),
        model_config=SimpleNamespace(max_model_len=max_len),
        scheduler_config=SimpleNamespace(max_num_seqs=max_seqs),
    )
    cls = type("Proposer", (NgramProposer,), {"dynamic": dynamic, **settings})
    return cls(config)


def _verified(draft, text, n):
    """What a greedy engine accepts after n tokens of ``text``: the draft's right prefix and
    the next token."""
    m = 0
    while m < len(draft) and n + m + 1 < len(text) and draft[m] == text[n + m]:
        m += 1
    return text[n : n + m + 1]


def test_the_suffix_rules_proposer_submits_what_its_policy_decides():
    """One request, as vLLM runs it alone: the drafts are one Drafter's with the same
    policy (here given pass costs that make only sure tokens worth a pass)."""
    costs = [1.0, 1.8, 2.6, 3.4, 4.2]
    rng = np.random.default_rng(0)
    text = np.tile(rng.integers(0, 50, 7), 60).astype(np.int32)
    text[rng.random(len(text)) < 0.1] = 51  # a copy with slips
    proposer = _proposer(rules="suffix", policy=CostAwareLength(costs))
    single = Drafter(rules="suffix", n_draft=4, policy=CostAwareLength(costs))
    whole = Drafter(rules="suffix", n_draft=4)
    token_ids = np.zeros((6, 400), dtype=np.int32)
    n = 20
    token_ids[0, :n] = text[:n]
    lengths = np.array([n, 0, 0, 0, 0, 0], dtype=np.int32)
    sampled, cut = [[int(text[n - 1])]], 0
    while n < 300:
        drafts = proposer.propose(sampled, lengths, token_ids)
        for drafter in (single, whole):
            drafter.sync(text[:n])
        assert drafts[0] == single.draft().tolist()
        cut += len(drafts[0]) < len(whole.draft())
        new = _verified(drafts[0], text, n)
        token_ids[0, n : n + len(new)] = new
        n += len(new)
        lengths[0], sampled = n, [new.tolist()]
    assert cut > 10  # the policy did cut


def test_a_step_of_one_request_times_its_pass_for_the_policy():
    proposer = _proposer(rules="suffix")  # its rules' engine policy: CostAwareLength()
    told = []
    proposer.batch.observe_pass = lambda seq_id, k, seconds: told.append((seq_id, k, seconds))
    token_ids = np.zeros((6, 400), dtype=np.int32)
    token_ids[0, :12] = [1, 2, 3, 4] * 3
    lengths = np.array([12, 0, 0, 0, 0, 0], dtype=np.int32)
    drafts = proposer.propose([[4]], lengths, token_ids)
    for _ in range(3):  # the draft accepted whole and one more token
        new = [*drafts[0], 9]
        token_ids[0, lengths[0] : lengths[0] + len(new)] = new
        lengths[0] += len(new)
        passed = len(drafts[0]) + 1
        drafts = proposer.propose([new], lengths, token_ids)
        assert told[-1][:2] == (0, passed) and told[-1][2] > 0
    # Two requests share a step: no pass is timed, nor the first after it.
    token_ids[1, :5] = [7, 7, 7, 7, 7]
    lengths[1] = 5
    proposer.propose([[9], [7]], lengths, token_ids)
    lengths[1] = 0
    for _ in range(2):
        token_ids[0, lengths[0]] = 9
        lengths[0] += 1
        proposer.propose([[9]], lengths, token_ids)
    assert len(told) == 4
    # llama.cpp's rules draft whole, bit for bit: a policy is refused by name.
    with pytest.raises(InvalidParameterError, match="takes no policy"):
        _proposer(policy=CostAwareLength())


@pytest.mark.parametrize("seed", range(3))
def test_rows_packed_as_vllm_packs_them_draft_as_one_drafter_per_request(seed):
    """vLLM's runner, simulated: requests join at the end, leave holes that the
    last rows move into, accept drafts in part, and some rows fill their
    prompt for a step (no sampled tokens, no draft)."""
    rng = np.random.default_rng(seed)
    max_seqs, max_len, n_draft = 6, 400, 4
    proposer = _proposer(max_seqs, max_len, n_draft)
    shared = NgramCache()  # the reference drafters share a dynamic cache as the batch does
    token_ids = np.zeros((max_seqs, max_len), dtype=np.int32)
    lengths = np.zeros(max_seqs, dtype=np.int32)
    batch = []  # per row: [request id, Drafter, remaining steps]
    next_id = 0
    for _ in range(150):
        sampled = []
        for row, request in enumerate(batch):
            sampled.append([])
            if request[2] > 0 and rng.random() < 0.85:
                k = int(rng.integers(1, 4))
                if lengths[row] + k < max_len:
                    new = rng.integers(0, 6, k)  # a small vocabulary: drafts happen
                    token_ids[row, lengths[row] : lengths[row] + k] = new
                    lengths[row] += k
                    sampled[-1] = new.tolist()
            request[2] -= 1
        # Requests that end leave holes; vLLM moves the last rows into them.
        ended = [row for row, r in enumerate(batch) if r[2] < 0]
        for row in ended:
            batch[row][1].finish()
        keep = [row for row in range(len(batch)) if row not in ended]
        while ended and keep and keep[-1] > ended[0]:
            hole, last = ended.pop(0), keep.pop()
            token_ids[hole], lengths[hole] = token_ids[last], lengths[last]
            batch[hole], sampled[hole] = batch[last], sampled[last]
            keep.append(hole)
            keep.sort()
        batch, sampled = [batch[r] for r in keep], [sampled[r] for r in keep]
        while len(batch) < max_seqs and rng.random() < 0.5:
            prompt = rng.integers(0, 6, int(rng.integers(1, 40)))
            row = len(batch)
            token_ids[row, : len(prompt)], lengths[row] = prompt, len(prompt)
            drafter = Drafter(dynamic=shared, n_draft=n_draft)
            drafter.start(prompt)
            batch.append([next_id, drafter, int(rng.integers(1, 40))])
            sampled.append([int(prompt[-1])] if rng.random() < 0.8 else [])
            next_id += 1
        drafts = proposer.propose(sampled, lengths, token_ids)
        assert len(drafts) == len(batch)
        for row, request in enumerate(batch):
            request[1].sync(token_ids[row, : lengths[row]])
            expected = request[1].draft().tolist() if sampled[row] else []
            expected = expected[: max_len - lengths[row]]
            assert drafts[row] == expected, (row, request[0])
    assert proposer.stats.sequences == next_id


def test_a_row_with_a_negative_id_gets_no_draft_and_is_followed_again_later():
    proposer = _proposer()
    token_ids = np.zeros((6, 400), dtype=np.int32)
    token_ids[0, :6] = [1, 2, 3, 1, 2, 3]
    lengths = np.array([6, 0, 0, 0, 0, 0], dtype=np.int32)
    assert proposer.propose([[3]], lengths, token_ids) == [[1, 2, 3, 1]]
    token_ids[0, 6] = -1  # a placeholder, as vLLM's asynchronous scheduling writes
    lengths[0] = 7
    assert proposer.propose([[-1]], lengths, token_ids) == [[]]
    token_ids[0, 6] = 1
    assert proposer.propose([[1]], lengths, token_ids) == [[2, 3, 1, 2]]
    assert proposer.stats.sequences == 2 and proposer.stats.finished == 1


def test_drafts_stop_at_the_model_length():
    proposer = _proposer(max_len=9)
    token_ids = np.zeros((6, 9), dtype=np.int32)
    token_ids[0, :7] = [1, 2, 3, 1, 2, 3, 1]
    lengths = np.array([7, 0, 0, 0, 0, 0], dtype=np.int32)
    assert proposer.propose([[1]], lengths, token_ids) == [[2, 3]]
    lengths[0] = 9
    token_ids[0, 7:9] = [2, 3]
    assert proposer.propose([[2, 3]], lengths, token_ids) == [[]]


def test_close_finishes_every_followed_request_into_the_dynamic_file(tmp_path):
    path = tmp_path / "dyn.ngd"
    proposer = _proposer(dynamic=str(path))
    token_ids = np.zeros((6, 400), dtype=np.int32)
    token_ids[0, :4], token_ids[1, :3] = [7, 8, 9, 10], [20, 21, 22]
    lengths = np.array([4, 3, 0, 0, 0, 0], dtype=np.int32)
    proposer.propose([[10], [22]], lengths, token_ids)
    proposer.close()
    cache = NgramCache.load(path)
    assert cache.followers((8, 9))[0].tolist() == [10]
    assert cache.followers((20, 21))[0].tolist() == [22]
