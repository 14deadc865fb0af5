"""`ngramdraft serve`: llama-cpp-python's OpenAI-compatible server drafting with ngramdraft.

Started as a user would (a child process on 127.0.0.1) and asked over real
HTTP; its greedy completions must equal the engine's own without drafting.
"""

import http.client
import json
import random
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ngramdraft import NgramCache, RequestMemory
from ngramdraft.integrations.llama_cpp import load_llama
from server_client import ask, post, stop, stream

pytestmark = pytest.mark.engine

PROMPTS = ["the old man and the sea, and the man who was old", "a good book of the sea"]


@pytest.fixture
def server(servers, tiny_gguf, tmp_path):
    proc, port, dynamic = servers(tiny_gguf, tmp_path, "--save-every", "0")
    yield port, dynamic
    stop(proc)


def test_completions_over_http_equal_greedyoutput(server, tiny_gguf):
    port, dynamic = server
    plain = load_llama(tiny_gguf, n_ctx=2048, flash_attn=True)  # serve's default
    for prompt in PROMPTS:
        params = {"max_tokens": 300, "temperature": 0, "repeat_penalty": 1.1}
        got = post(port, "/v1/completions", {"prompt": prompt, **params})
        want = plain.create_completion(prompt, **params)
        assert got["choices"][0]["text"] == want["choices"][0]["text"]
        assert got["usage"]["completion_tokens"] == want["usage"]["completion_tokens"] > 100
    assert dynamic.exists()  # the second prompt finished the first sequence, saved


def test_malformed_requests_get_4xx_with_an_openai_error_and_the_server_goes_on(server):
    port, _ = server
    completions, chat = "/v1/completions", "/v1/chat/completions"
    for path, body, status, words in [
        (completions, b"{not json", 400, "not JSON"),
        (completions, b"[1, 2]", 400, "JSON object"),
        (completions, {"prompt": "the sea", "max_tokens": -5}, 422, "max_tokens"),
        (completions, {"prompt": "the sea", "temperature": "hot"}, 422, "temperature"),
        (chat, {"messages": "not a list"}, 422, "messages"),
    ]:
        got, answer = ask(port, path, body)
        assert got == status, (body, answer)
        assert answer["error"]["type"] == "invalid_request_error" and words in json.dumps(answer)
    got, answer = ask(port, "/v1/completions", {"prompt": "the sea", "max_tokens": 4})
    assert got == 200 and answer["usage"]["completion_tokens"] == 4


def test_an_api_key_guards_every_route_and_a_bad_body_without_it_gets_401(
    servers, tiny_gguf, tmp_path
):
    proc, port, _ = servers(tiny_gguf, tmp_path, env={"NGRAMDRAFT_API_KEY": "s3cret"})
    try:
        body = {"prompt": "the old man", "max_tokens": 3}
        assert ask(port, "/v1/completions", body)[0] == 401
        assert ask(port, "/v1/completions", body, key="wrong")[0] == 401
        assert ask(port, "/v1/completions", b"{not json")[0] == 401
        assert ask(port, "/metrics")[0] == 401
        assert ask(port, "/v1/completions", body, key="s3cret")[0] == 200
        assert ask(port, "/v1/completions", b"{not json", key="s3cret")[0] == 400
        assert ask(port, "/ngramdraft/stats", key="s3cret")[0] == 200
        assert ask(port, "/health")[0] == 200  # as llama-server: probed without a key
    finally:
        stop(proc)


def test_listening_beyond_loopback_without_a_key_is_said_atstart(servers, tiny_gguf, tmp_path):
    proc, _, _ = servers(tiny_gguf, tmp_path, "--host", "0.0.0.0")
    _, out = stop(proc)
    assert "ngramdraft: warning: serving on 0.0.0.0" in out and "--api-key" in out


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_every_request_runs_ngramdraft_loop_and_temperature_zero_is_greedy(
    servers, tiny_gguf, tmp_path, rules
):
    """The host's own server keeps every position's logits (its ModelSettings' logits_all),
    which once sent every request of `serve` to the host's loop, and applies a repeat
    penalty of 1.1 to a request that names none. Neither may happen: greedy, streamed,
    chat and sampled requests all run ngramdraft's loop, and `temperature: 0` alone is
    the model's greedy output (llama-server's default, repeat_penalty 1.0)."""
    # Whole drafts: a policy that learns pass costs may, on a busy machine, submit none.
    proc, port, _ = servers(tiny_gguf, tmp_path, "--rules", rules, "--no-policy")
    plain = load_llama(tiny_gguf, n_ctx=2048, flash_attn=True)  # serve's default
    try:
        for prompt in PROMPTS:
            got = post(
                port, "/v1/completions", {"prompt": prompt, "max_tokens": 80, "temperature": 0}
            )
            want = plain.create_completion(prompt, max_tokens=80, temperature=0, repeat_penalty=1.0)
            assert got["choices"][0]["text"] == want["choices"][0]["text"]
        chat = {"messages": [{"role": "user", "content": PROMPTS[0]}], "max_tokens": 20}
        post(port, "/v1/chat/completions", {**chat, "temperature": 0})
        post(port, "/v1/completions", {"prompt": PROMPTS[1], "max_tokens": 20, "seed": 7})
        stream(port, {"prompt": PROMPTS[0], "max_tokens": 20, "temperature": 0, "stream": True})
        _, stats = ask(port, "/ngramdraft/stats")
        assert stats["generations_host_loop"] == 0
        assert stats["generations_ngramdraft_loop"] == len(PROMPTS) + 3
        assert stats["drafted_tokens"] > 0
        # One thread made every pass (decode_thread.py): the host's server ran each on
        # whichever worker was free, a quarter slower a token than on one thread.
        assert stats["generation_threads"] == 1
    finally:
        stop(proc)


def test_logprobs_are_refused_with_a_400_naming_the_field(server):
    port, _ = server
    status, body = ask(port, "/v1/completions", {"prompt": "a", "logprobs": 2})
    assert status == 400 and body["error"]["param"] == "logprobs"
    chat = {"messages": [{"role": "user", "content": "a"}], "logprobs": True}
    status, body = ask(port, "/v1/chat/completions", chat)
    assert status == 400 and body["error"]["param"] == "logprobs"


def test_stats_count_drafts_since_start_at_metrics_and_in_the_log(servers, tiny_gguf, tmp_path):
    proc, port, _ = servers(tiny_gguf, tmp_path)
    prompt = "the old man and the sea, and the man who was old"
    for _ in range(2):
        post(port, "/v1/completions", {"prompt": prompt, "max_tokens": 120, "temperature": 0})
    _, stats = ask(port, "/ngramdraft/stats")
    assert stats["passes"] > 0 and 0 < stats["accepted_tokens"] <= stats["drafted_tokens"]
    assert stats["tokens_per_pass"] == pytest.approx(
        (stats["passes"] + stats["accepted_tokens"]) / stats["passes"], abs=1e-3
    )
    _, metrics = ask(port, "/metrics")
    name = "ngramdraft:spec_decode_num_draft_tokens_total"
    drafted = re.search(rf"^{name} (\d+)$", metrics, re.M)
    assert drafted and int(drafted.group(1)) == stats["drafted_tokens"]
    _, out = stop(proc)
    assert out.count("ngramdraft: since start:") == 2


def test_sigterm_saves_every_pending_count_and_exits_cleanly(servers, tiny_gguf, tmp_path):
    proc, port, dynamic = servers(
        tiny_gguf, tmp_path, "--rules", "llamacpp", "--save-every", "3600"
    )
    prompts = ["one two three four five six seven", "eight nine ten eleven twelve"]
    tokens = [post(port, "/extras/tokenize", {"input": p})["tokens"] for p in prompts]
    for p in prompts:
        post(port, "/v1/completions", {"prompt": p, "max_tokens": 8, "temperature": 0})
    assert not dynamic.exists()  # an hour between saves: everything is pending
    status, out = stop(proc)
    # uvicorn shuts down, then raises SIGTERM again so that a supervisor sees it.
    assert status in (0, -signal.SIGTERM) and "Traceback" not in out, out
    saved = NgramCache.load(dynamic)
    for t in tokens:  # both sequences: the one the second ended, and the one shutdown ended
        assert t[4] in saved.followers(tuple(t[:4]))[0].tolist()


def test_the_suffix_rules_serve_greedy_output_and_save_their_requests_at_sigterm(
    servers, tiny_gguf, tmp_path
):
    """`serve --rules suffix`: completions equal the engine's own, drafts are made and
    accepted, and SIGTERM writes both sequences to the requests file, which a second server
    then starts from."""
    plain = load_llama(tiny_gguf, n_ctx=2048, flash_attn=True)  # serve's default
    params = {"max_tokens": 200, "temperature": 0, "repeat_penalty": 1.1}
    # --no-policy: what the learned costs submit depends on the machine's load.
    proc, port, requests = servers(
        tiny_gguf, tmp_path, "--rules", "suffix", "--no-policy", "--save-every", "3600"
    )
    tokens = [post(port, "/extras/tokenize", {"input": p})["tokens"] for p in PROMPTS]
    for prompt in PROMPTS:
        got = post(port, "/v1/completions", {"prompt": prompt, **params})
        assert (
            got["choices"][0]["text"]
            == plain.create_completion(prompt, **params)["choices"][0]["text"]
        )
    _, stats = ask(port, "/ngramdraft/stats")
    assert 0 < stats["accepted_tokens"] <= stats["drafted_tokens"]
    assert not requests.exists()  # an hour between saves: both sequences are pending
    status, out = stop(proc)
    assert status in (0, -signal.SIGTERM) and "Traceback" not in out, out
    held = RequestMemory.load(requests).index.tokens
    assert (held == -1).sum() == 2
    for t in tokens:  # each prompt (after the BOS both begin with) is held whole
        assert any((held[i : i + len(t) - 1] == t[1:]).all() for i in range(len(held)))
    proc, port, _ = servers(tiny_gguf, tmp_path, "--rules", "suffix")
    try:
        got = post(port, "/v1/completions", {"prompt": PROMPTS[0], **params})
        want = plain.create_completion(PROMPTS[0], **params)
        assert got["choices"][0]["text"] == want["choices"][0]["text"]
    finally:
        stop(proc)


def _rss(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) << 10 for line in f if line.startswith("VmRSS:"))


def test_load_with_streams_and_cancellations_keeps_serving_and_loses_nothing(
    servers, tiny_gguf, tmp_path
):
    """Eight clients for a bounded time: mixed lengths, a third streamed, half of those dropped
    mid-stream. Every request completes or gets a clean error, memory stays bounded, and after
    SIGTERM the dynamic file holds every completed request's n-grams."""
    proc, port, dynamic = servers(tiny_gguf, tmp_path, "--rules", "llamacpp", "--save-every", "2")
    outcomes, finished, lock = [], [], threading.Lock()
    deadline = time.monotonic() + 25
    rss = []

    def client(seed):
        rng = random.Random(seed)
        n = 0
        while time.monotonic() < deadline:
            n += 1
            prompt = f"client {seed} request {n} " + " ".join(
                rng.choice(["sea", "old", "man", "boat", "fish", "sun"]) for _ in range(12)
            )
            body = {"prompt": prompt, "max_tokens": rng.randint(1, 48), "temperature": 0}
            stream = rng.random() < 1 / 3
            cancel = stream and rng.random() < 0.5
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
            try:
                conn.request("POST", "/v1/completions", json.dumps({**body, "stream": stream}),
                             {"Content-Type": "application/json"})  # fmt: skip
                response = conn.getresponse()
                if cancel:
                    response.read1(64)  # the first bytes, then the client goes away
                    outcome = "cancelled"
                else:
                    raw = response.read()
                    done = response.status == 200 and (stream or json.loads(raw)["choices"])
                    outcome = "ok" if done else f"status {response.status}: {raw[:200]}"
                    if done and not stream:
                        with lock:
                            finished.append(prompt)
            except (OSError, http.client.HTTPException) as e:
                outcome = f"client error {e!r}"
            finally:
                conn.close()
            with lock:
                outcomes.append(outcome)

    threads = [threading.Thread(target=client, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        rss.append(_rss(proc.pid))
        time.sleep(1)
    for t in threads:
        t.join()
    assert ask(port, "/v1/models")[0] == 200  # still answering
    bad = [o for o in outcomes if o not in ("ok", "cancelled")]
    assert not bad and outcomes.count("ok") > 20, (bad[:5], len(outcomes))
    half = len(rss) // 2
    assert max(rss[half:]) < max(rss[:half]) + (64 << 20), "memory grew under load"
    tokens = [post(port, "/extras/tokenize", {"input": p})["tokens"] for p in finished]
    status, out = stop(proc)
    assert status in (0, -signal.SIGTERM) and "Traceback" not in out, out[-2000:]
    saved = NgramCache.load(dynamic)
    # Each prompt ends in words drawn at random: its last 5-gram is its own.
    missing = [t for t in tokens if t[-1] not in saved.followers(tuple(t[-5:-1]))[0].tolist()]
    assert not missing, f"{len(missing)} of {len(tokens)} finished requests not in the file"


@pytest.mark.parametrize("rules", ["llamacpp", "suffix"])
def test_a_trained_model_serves_its_own_greedy_chat_answer(servers, smollm, tmp_path, rules):
    """SmolLM2-135M over HTTP: the chat answer equals the plain engine's, drafts accepted."""
    from conftest import EDIT_REQUEST
    from ngramdraft.integrations.llama_cpp import plain_llama

    # The server's request model defaults repeat_penalty to 1.1, the Python API to 1.0.
    request = {
        "messages": [{"role": "user", "content": EDIT_REQUEST}],
        "max_tokens": 200,
        "repeat_penalty": 1.0,
    }
    want = plain_llama(smollm, n_ctx=2048).create_chat_completion(**request, temperature=0.0)
    proc, port, _ = servers(smollm, tmp_path, "--rules", rules, "--no-policy")
    try:
        got = post(port, "/v1/chat/completions", {**request, "temperature": 0}, timeout=300)
        _, stats = ask(port, "/ngramdraft/stats")
    finally:
        stop(proc)
    assert got["choices"][0]["message"]["content"] == want["choices"][0]["message"]["content"]
    assert stats["accepted_tokens"] > 0


def test_an_empty_api_key_is_a_start_up_error(tiny_gguf):
    """`--api-key ""` once started a server that refused everyone."""
    done = subprocess.run(
        [sys.executable, "-m", "ngramdraft", "serve", str(tiny_gguf), "--api-key", ""],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "--api-key is empty" in done.stderr
