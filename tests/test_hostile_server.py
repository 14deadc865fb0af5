"""Hostile clients against a real `ngramdraft serve`: no request takes it down or gets a 500.

One server (a tiny random model, a key, a dynamic file) takes a sweep of
several hundred requests an attacker or a careless client would send: ids
outside the vocabulary, grammars llama.cpp cannot parse (each once killed
the process), text that is not Unicode, nulls, wrong types, integers C cannot
hold, numbers that are not finite, bodies that are not JSON or nest past
Python's recursion limit, wrong media types, wrong methods, routes it does
not serve, bad keys, prompts past the context, streams that fail, 16 clients
at once, clients that leave mid-stream. Afterwards it answers the same greedy
request with the same text as before the sweep, and SIGTERM saves a dynamic
file that loads.
"""

import json
import signal
import socket
import threading

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ngramdraft import NgramCache
from server_client import request, stop, streamed

pytestmark = pytest.mark.engine

KEY = "k3y"
# What a refusal may be: a 4xx a client can act on, or 501 for what is not served.
REFUSALS = {400, 401, 404, 405, 413, 415, 422, 501}
GREEDY = {"prompt": "the old man and the sea, and the man who was old", "max_tokens": 24,
          "temperature": 0}  # fmt: skip
COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"


def _wrong_values():
    return [None, "x", [], {}, 2**40, -(2**40), 1.5, True, {"a": [1]}]


def _sweep(n_vocab):
    """(method, path, body, headers, key) of every hostile request."""
    out = []
    chat = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 4}
    completion = {"prompt": "the sea", "max_tokens": 4}
    # Every field of both generation routes, given each wrong value.
    fields = ["prompt", "suffix", "max_tokens", "min_tokens", "temperature", "top_p", "min_p",
              "echo", "stop", "stream", "logprobs", "presence_penalty", "frequency_penalty",
              "logit_bias", "seed", "n", "best_of", "user", "top_k", "repeat_penalty",
              "logit_bias_type", "mirostat_mode", "mirostat_tau", "mirostat_eta", "grammar",
              "model"]  # fmt: skip
    for field in fields:
        for value in _wrong_values():
            out.append(("POST", COMPLETIONS, {**completion, field: value}, None, KEY))
    for field in [*fields[1:], "messages", "functions", "tools", "tool_choice",
                  "response_format", "top_logprobs"]:  # fmt: skip
        for value in _wrong_values():
            out.append(("POST", CHAT, {**chat, field: value}, None, KEY))
    for content in [None, 5, ["a"], {"a": 1}, "\ud800", "x" * 10]:
        for role in ["user", "robot", None, 3]:
            body = {"messages": [{"role": role, "content": content}], "max_tokens": 4}
            out.append(("POST", CHAT, body, None, KEY))
    # Token ids: llama.cpp aborts on one outside the vocabulary.
    for tokens in [[-1], [n_vocab], [n_vocab + 5], [2**31], [2**63], ["a"], [1.5], [None],
                   [True], "1 2", None, [1, 2, 3], list(range(min(n_vocab, 300)))]:  # fmt: skip
        out.append(("POST", "/extras/detokenize", {"tokens": tokens}, None, KEY))
    for value in [5, None, [], {"a": 1}, "\udfff", "fine text", "x" * 5000]:
        out.append(("POST", "/extras/tokenize", {"input": value}, None, KEY))
        out.append(("POST", "/extras/tokenize/count", {"input": value}, None, KEY))
    # Grammars: llama.cpp once dereferenced the null sampler of one that does not parse.
    for grammar in ["root ::= [", "root ::= x", "foo ::= \"a\"", "root ::= (", "::=", "root",
                    'root ::= "a" | ', "root ::= [^", "\x00", 'root ::= "yes" | "no"']:  # fmt: skip
        out.append(("POST", COMPLETIONS, {**completion, "grammar": grammar}, None, KEY))
        out.append(("POST", CHAT, {**chat, "grammar": grammar}, None, KEY))
    # Logit bias keyed by what is not a token id, and values that are not numbers.
    for bias in [{"abc": 1}, {"-1": 1}, {str(n_vocab): 1}, {"99999999999": 1}, {"1": "x"},
                 {"1": None}, [1, 2], {"1": 1e308}, {"\ud800": 1}]:  # fmt: skip
        out.append(("POST", COMPLETIONS, {**completion, "logit_bias": bias}, None, KEY))
        out.append(("POST", CHAT, {**chat, "logit_bias": bias}, None, KEY))
    # Bodies that are not what the route reads.
    raw = [b"", b"{", b"{not json", b"[]", b"null", b"123", b'"text"', b"\xff\xfe\x00",
           b'{"prompt": NaN}', b'{"temperature": Infinity, "prompt": "a"}',
           b'{"prompt": "\\ud800"}', b'{"prompt": "a", "prompt": 5}', b"[" * 100_000,
           b'{"a":' * 50_000 + b"1" + b"}" * 50_000, b"\xef\xbb\xbf{}",
           json.dumps({"prompt": [["a"]]}).encode()]  # fmt: skip
    for body in raw:
        for path in (COMPLETIONS, CHAT, "/extras/tokenize", "/extras/detokenize"):
            out.append(("POST", path, body, {"Content-Type": "application/json"}, KEY))
    # Media types.
    for media in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                  "\x00\x01junk", "application/json; charset=latin-1", "APPLICATION/JSON",
                  "image/png"]:  # fmt: skip
        for path in (COMPLETIONS, CHAT, "/extras/tokenize"):
            out.append(("POST", path, completion, {"Content-Type": media}, KEY))
    # Routes, methods and keys.
    for method, path in [("POST", "/v1/embeddings"), ("GET", "/nowhere"), ("GET", COMPLETIONS),
                         ("PUT", COMPLETIONS), ("DELETE", CHAT), ("POST", "/v1/models"),
                         ("GET", "/v1/models"), ("GET", "/metrics"), ("GET", "/health"),
                         ("GET", "/ngramdraft/stats"), ("POST", "/health"),
                         ("GET", "/docs"), ("GET", "/openapi.json")]:  # fmt: skip
        body = {"input": "x"} if method == "POST" else b""
        out.append((method, path, body, None, KEY))
    for key in [None, "", "wrong", KEY + " ", "x" * 10_000]:
        for path in (COMPLETIONS, "/metrics", "/ngramdraft/stats", "/extras/tokenize"):
            body = completion if path != "/metrics" and "stats" not in path else b""
            out.append(("POST" if body else "GET", path, body, None, key))
    for header in [f"bearer {KEY}", f"BEARER {KEY}", f"Basic {KEY}", KEY, "Bearer", "Bearer "]:
        out.append(("POST", COMPLETIONS, completion, {"Authorization": header}, None))
    # Past the context, and sizes.
    out.append(("POST", COMPLETIONS, {"prompt": "the sea " * 3000, "max_tokens": 4}, None, KEY))
    out.append(("POST", COMPLETIONS, {"prompt": "a", "max_tokens": 10**6}, None, KEY))
    out.append(("POST", COMPLETIONS, b'{"prompt": "' + b"a" * (33 << 20) + b'"}', None, KEY))
    return out


def test_a_hostile_sweep_gets_no_500_and_the_server_lives(servers, tiny_gguf, tmp_path):
    proc, port, dynamic = servers(tiny_gguf, tmp_path, "--rules", "llamacpp", "--api-key", KEY)
    try:
        status, before = request(port, "POST", COMPLETIONS, GREEDY, key=KEY)
        assert status == 200
        n_vocab = 32_000  # the tiny model's (tests/random_gguf.py)
        sweep = _sweep(n_vocab)
        assert len(sweep) >= 600
        seen = {}
        for method, path, body, headers, key in sweep:
            status, answer = request(port, method, path, body, headers, key)
            assert proc.poll() is None, f"the server died at {method} {path} {body!r:.200}"
            assert status < 500 or status == 501, (method, path, f"{body!r:.200}", answer)
            if status >= 400:
                assert status in REFUSALS, (status, path)
                # Not HTTP at all (a control character in a header): uvicorn's plain 400,
                # before any route runs.
                invalid_http = answer == b"Invalid HTTP request received."
                if path != "/nowhere" and method in ("GET", "POST") and not invalid_http:
                    error = answer.get("error") if isinstance(answer, dict) else None
                    assert error and error["message"], (status, path, answer)
            seen[status] = seen.get(status, 0) + 1
        assert seen.get(200, 0) > 50 and seen.get(422, 0) > 100 and seen.get(400, 0) > 30
        _streams_that_fail_say_so(port)
        _sixteen_clients_and_some_leave(port)
        status, after = request(port, "POST", COMPLETIONS, GREEDY, key=KEY)
        assert status == 200
        assert after["choices"][0]["text"] == before["choices"][0]["text"]
    finally:
        code, out = stop(proc)
    # uvicorn shuts down cleanly on SIGTERM, then raises it again (a supervisor sees how).
    assert code in (0, -signal.SIGTERM) and "Traceback" not in out, out[-3000:]
    assert len(NgramCache.load(dynamic)) > 0  # saved whole, and it loads


def _streams_that_fail_say_so(port):
    """A stream whose request fails after the response began ends with an error event; one
    refused before it begins gets the plain refusal."""
    long_chat = {"messages": [{"role": "user", "content": "sea " * 3000}], "stream": True,
                 "max_tokens": 4}  # fmt: skip
    status, events = streamed(port, KEY, long_chat)
    if status == 200:  # the host takes the chat before it renders it: its failure is an event
        assert events and isinstance(events[-1], dict) and "error" in events[-1], events[-2:]
    else:
        assert status == 400, events
    status, events = streamed(port, KEY, {"prompt": "sea " * 3000, "stream": True})
    assert status == 400 and "context" in events[0]["error"]["message"]
    status, events = streamed(port, KEY, {"prompt": "\ud800", "stream": True})
    assert status == 400


def _sixteen_clients_and_some_leave(port):
    failures = []

    def client(i):
        try:
            if i % 4 == 0:  # leaves after the first bytes of a stream
                with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
                    body = json.dumps({**GREEDY, "stream": True, "max_tokens": 64}).encode()
                    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                              b"Content-Type: application/json\r\n"
                              + f"Authorization: Bearer {KEY}\r\n".encode()
                              + b"Content-Length: %d\r\n\r\n" % len(body) + body)  # fmt: skip
                    s.recv(100)
                return
            body = {**GREEDY, "max_tokens": 8, "stream": i % 2 == 1}
            status, _ = request(port, "POST", COMPLETIONS, body, key=KEY)
            if status != 200:
                failures.append((i, status))
        except OSError as e:
            failures.append((i, repr(e)))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures, failures


def test_the_draft_counts_come_back_in_each_response_and_at_metrics(servers, tiny_gguf, tmp_path):
    """llama-server's `timings` (draft_n, draft_n_accepted) in each completion, streamed or
    not, and the counters under the names vLLM and llama-server publish."""
    proc, port, _ = servers(tiny_gguf, tmp_path, "--rules", "llamacpp")
    try:
        body = {**GREEDY, "max_tokens": 120}
        status, whole = request(port, "POST", COMPLETIONS, body, key=None)
        assert status == 200
        timings = whole["timings"]
        assert 0 < timings["draft_n_accepted"] <= timings["draft_n"]
        status, events = streamed(port, KEY, {**body, "stream": True})
        last = [e for e in events if e and e.get("timings")]
        assert status == 200 and len(last) == 1 and last[0]["choices"][0]["finish_reason"]
        assert 0 <= last[0]["timings"]["draft_n_accepted"] <= last[0]["timings"]["draft_n"]
        status, metrics = request(port, "GET", "/metrics", key=None)
        text = metrics.decode()
        for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            assert f"ngramdraft:spec_decode_{name}_total " in text
        per_position = [line for line in text.splitlines() if "per_pos_total{" in line]
        assert per_position and per_position[0].startswith(
            'ngramdraft:spec_decode_num_accepted_tokens_per_pos_total{position="0"}'
        )
        status, health = request(port, "GET", "/health", key=None)
        assert status == 200 and health == {"status": "ok"}
    finally:
        _, out = stop(proc)
    # Quiet by default: the address on a line of its own, no llama.cpp loading log.
    lines = out.splitlines()
    assert f"ngramdraft serve: listening on http://127.0.0.1:{port}" in lines
    assert not any(line.startswith(("llama_model_loader", "print_info", "load_tensors"))
                   for line in lines)  # fmt: skip
