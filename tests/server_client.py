"""A client of `ngramdraft serve` for the tests: a server started as a user would (a child
process on a free loopback port, its output in a file), and requests over real HTTP."""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, path, body, timeout=60, key=None):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, headers=headers)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def ask(port, path, body=None, key=None):
    """(HTTP status, JSON body) of a request that may fail."""
    try:
        if body is None:
            headers = {"Authorization": f"Bearer {key}"} if key else {}
            request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
            with urllib.request.urlopen(request, timeout=60) as response:
                raw = response.read()
                return response.status, json.loads(raw) if path != "/metrics" else raw.decode()
        return 200, post(port, path, body, key=key)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def start(tiny_gguf, tmp_path, *extra, env=None):
    """A `ngramdraft serve` child answering on a free loopback port: (process, port, dynamic)."""
    port = free_port()
    dynamic = tmp_path / "seen.ngd"
    command = [sys.executable, "-m", "ngramdraft", "serve", str(tiny_gguf), "--dynamic",
               str(dynamic), "--port", str(port), "-c", "2048", *extra]  # fmt: skip
    # Output to a file, not a pipe: a pipe nobody reads fills, and the server blocks on it.
    log = open(tmp_path / "server.log", "w+b")  # noqa: SIM115 (closed by stop)
    proc = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})}
    )
    proc.log = log
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                break
        except urllib.error.HTTPError:  # 401: up, and wanting a key
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"server did not start:\n{output(proc)}")
            time.sleep(0.2)
    return proc, port, dynamic


def output(proc):
    proc.log.seek(0)
    return proc.log.read().decode(errors="replace")


def stop(proc):
    """SIGTERM, as a service manager stops a server; returns its exit status and output."""
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    out = output(proc)
    proc.log.close()
    return proc.returncode, out


def stream(port, body):
    """The text of a streamed completion, read as server-sent events."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request(
        "POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"}
    )
    text = ""
    for line in connection.getresponse():
        line = line.strip()
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            text += json.loads(line[6:])["choices"][0]["text"]
    connection.close()
    return text
