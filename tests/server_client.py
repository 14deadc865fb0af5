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


def request(port, method, path, body=b"", headers=None, key=None):
    """(status, parsed body or raw bytes) over a new connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    sent = {"Content-Type": "application/json"} if body else {}
    if key is not None:
        sent["Authorization"] = f"Bearer {key}"
    sent.update(headers or {})
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    try:
        connection.request(method, path, data or None, sent)
        response = connection.getresponse()
        raw = response.read()
    finally:
        connection.close()
    try:
        return response.status, json.loads(raw)
    except ValueError:
        return response.status, raw


def streamed(port, key, body):
    """(status, events) of a streamed completion (a chat's, with messages): each event's
    JSON, [DONE] as None; a body that is no stream, as one event."""
    path = "/v1/completions" if "prompt" in body else "/v1/chat/completions"
    status, raw = request(port, "POST", path, body, key=key)
    if not isinstance(raw, bytes):
        return status, [raw]
    out = []
    for line in raw.split(b"\n"):
        if line.startswith(b"data: "):
            payload = line[6:].strip()
            out.append(None if payload == b"[DONE]" else json.loads(payload))
    return status, out


def stream(port, body):
    """The text of a streamed completion, read as server-sent events."""
    status, got = streamed(port, None, body)
    assert status == 200, got
    return "".join(event["choices"][0]["text"] for event in got if event)
