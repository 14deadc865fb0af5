"""`ngramdraft serve`: llama-cpp-python's OpenAI-compatible server drafting with ngramdraft.

Started as a user would (a child process on 127.0.0.1) and asked over real
HTTP; its greedy completions must equal the engine's own without drafting.
"""

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from ngramdraft.integrations.llama_cpp import load_llama

PROMPTS = ["the old man and the sea, and the man who was old", "a good book of the sea"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(port, path, body, timeout=60):
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


@pytest.fixture
def server(tiny_gguf, tmp_path):
    port = _free_port()
    dynamic = tmp_path / "seen.ngd"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ngramdraft",
            "serve",
            str(tiny_gguf),
            "--dynamic",
            str(dynamic),
            "--port",
            str(port),
            "-c",
            "2048",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"server did not start:\n{proc.stdout.read().decode()}")
            time.sleep(0.2)
    yield port, dynamic
    proc.terminate()
    proc.wait(timeout=30)


def test_completions_over_http_equal_greedy_output(server, tiny_gguf):
    port, dynamic = server
    plain = load_llama(tiny_gguf, n_ctx=2048)
    for prompt in PROMPTS:
        params = {"max_tokens": 300, "temperature": 0, "repeat_penalty": 1.1}
        got = _post(port, "/v1/completions", {"prompt": prompt, **params})
        want = plain.create_completion(prompt, **params)
        assert got["choices"][0]["text"] == want["choices"][0]["text"]
        assert got["usage"]["completion_tokens"] == want["usage"]["completion_tokens"] > 100
    assert dynamic.exists()  # the second prompt finished the first sequence, saved
