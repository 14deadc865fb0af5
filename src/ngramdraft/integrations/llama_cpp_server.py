"""An OpenAI-compatible server (llama-cpp-python's) whose model drafts with ngramdraft.

``llama_cpp.server`` builds its model from settings that can name only its
own prompt-lookup draft model. :func:`create_app` lets it build the app and
load the model as usual, then makes the loaded ``Llama`` a
:func:`DraftingLlama <ngramdraft.integrations.llama_cpp.drafting_llama>` (its
class, not a copy: the subclass adds no state) with an
:class:`NgramDraftModel`, so that drafts are verified by ngramdraft's own
loop and a prompt costs what it costs without drafting. The server handles
one request at a time (its own lock), so one drafter serves every request:
a request whose prompt does not extend the previous sequence finishes that
sequence into the dynamic cache, which is saved to ``--dynamic`` if given.

What the app adds to the host's:

* malformed completion requests (a body that is not JSON, a field out of
  range) get 400 or 422 with an OpenAI-style error body, checked against the
  host's own request models before the host sees them (its handler turns
  every exception, validation included, into a 500);
* requests queue for the model and each completes: the host's
  ``interrupt_requests`` is off (on, a stream is cut short, with ``[DONE]``
  and an unterminated response, whenever another request arrives);
* ``api_key``, the host's own setting: every route but the docs wants
  ``Authorization: Bearer KEY``;
* what drafting did since start, at ``GET /metrics`` (Prometheus text, as
  vLLM's and llama.cpp's servers have) and ``GET /ngramdraft/stats`` (JSON),
  and one log line per completion request.

Needs ``pip install 'ngramdraft[server]'``.
"""

import ipaddress
import json
import logging
import socket
import warnings
from collections.abc import Awaitable, Callable
from typing import Any

from ..errors import NgramdraftWarning
from ..files.kinds import check_gguf
from ..optional import require
from .llama_cpp import DraftStats, NgramDraftModel, drafting_llama

log = logging.getLogger("ngramdraft.server")

MAX_BODY = 32 << 20  # bytes: a request body larger than this gets 413

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _error_body(status: int, message: str, param: str | None = None) -> bytes:
    kind = {401: "authentication_error"}.get(status, "invalid_request_error")
    error = {"message": message, "type": kind, "param": param, "code": None}
    return json.dumps({"error": error}).encode()


async def _answer(send: Send, status: int, body: bytes, content_type: bytes) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class RequestCheck:
    """ASGI middleware: completion requests checked before the host, logged after it.

    ``models`` maps a POST path to the host's pydantic model of its body.
    Requests to those paths without ``api_key`` get 401 here (the host would
    parse the body first, and fail on a bad one with a 500).
    """

    def __init__(
        self, app: Any, models: dict[str, Any], api_key: str | None, on_done: Callable[[], None]
    ) -> None:
        self.app = app
        self.models = models
        self.api_key = api_key
        self.on_done = on_done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        model = self.models.get(scope.get("path", "")) if scope["type"] == "http" else None
        if model is None or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        if not self._authorized(scope):
            error = _error_body(401, "invalid API key: send 'Authorization: Bearer KEY'")
            await _answer(send, 401, error, b"application/json")
            return
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > MAX_BODY:
                error = _error_body(413, f"the request body is over {MAX_BODY} bytes")
                await _answer(send, 413, error, b"application/json")
                return
            if not message.get("more_body", False):
                break
        body, problem = _checked(body, model)
        if problem is not None:
            await _answer(send, *problem, b"application/json")
            return
        sent = False

        async def replay() -> dict[str, Any]:
            # The body once, then the client's own messages: the host still sees a
            # client that goes away mid-stream.
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        try:
            await self.app(scope, replay, send)
        finally:
            self.on_done()

    def _authorized(self, scope: Scope) -> bool:
        if self.api_key is None:
            return True
        headers = dict(scope.get("headers", []))
        return headers.get(b"authorization", b"") == f"Bearer {self.api_key}".encode()


class OnShutdown:
    """ASGI middleware: ``callback`` runs when the server shuts down (its lifespan's end).

    Here rather than after ``uvicorn.run``: on SIGTERM uvicorn shuts down, then
    raises the signal again, which ends the process before ``run`` returns.
    """

    def __init__(self, app: Any, callback: Callable[[], None]) -> None:
        self.app = app
        self.callback = callback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def watched() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                self.callback()
            return message

        await self.app(scope, watched, send)


# What a client that leaves a sampling field out gets, where the host's default is not
# llama-server's: llama-cpp-python's server applies a repeat penalty of 1.1, so that a
# request sending only `temperature: 0` was not greedy, and drafts copying the prompt
# were refused. llama-server's default is 1.0, and so is this server's.
DEFAULTS = {"repeat_penalty": 1.0}


def _checked(body: bytes, model: Any) -> tuple[bytes, tuple[int, bytes] | None]:
    """(the body the host gets, None), or (body, (status, error body)) for one it must not.

    A valid body gains :data:`DEFAULTS` for the fields it leaves out.
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        return body, (400, _error_body(400, f"the request body is not JSON ({e})"))
    if not isinstance(data, dict):
        return body, (400, _error_body(400, "the request body must be a JSON object"))
    try:
        model(**data)
    except ValueError as e:  # pydantic's ValidationError is one
        errors: list[dict[str, Any]] = getattr(e, "errors", list)()
        first = errors[0] if errors else {}
        param = ".".join(str(p) for p in first.get("loc", ())) or None
        message = f"{param}: {first.get('msg')}" if first else str(e)
        return body, (422, _error_body(422, message, param))
    if data.get("logprobs") or data.get("top_logprobs"):
        param = "logprobs" if data.get("logprobs") else "top_logprobs"
        message = (
            f"{param}: not served here: the server computes logits only where drafts are "
            "verified, not at every position; ask without logprobs"
        )
        return body, (400, _error_body(400, message, param))
    missing = {k: v for k, v in DEFAULTS.items() if k not in data}
    if missing:
        body = json.dumps({**data, **missing}).encode()
    return body, None


def _prometheus(stats: dict[str, float]) -> str:
    lines = []
    for name, value in stats.items():
        counter = name in ("sequences", "passes", "drafted_tokens", "accepted_tokens")
        metric = f"ngramdraft_{name}" + ("_total" if counter else "")
        lines += [f"# TYPE {metric} {'counter' if counter else 'gauge'}", f"{metric} {value}"]
    return "\n".join(lines) + "\n"


def create_app(
    model_path: str,
    *,
    draft_model: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_key: str | None = None,
    **model_settings: Any,
) -> Any:
    """The FastAPI app of ``llama_cpp.server`` serving ``model_path`` with ``draft_model``."""
    fastapi = require("fastapi", "server", "ngramdraft serve")
    responses = require("fastapi.responses", "server", "ngramdraft serve")
    server_app = require("llama_cpp.server.app", "server", "ngramdraft serve")
    settings = require("llama_cpp.server.settings", "server", "ngramdraft serve")
    types = require("llama_cpp.server.types", "server", "ngramdraft serve")
    path = check_gguf(model_path)
    # logits_all: the host's server keeps every position's logits by default (for
    # logprobs), and a DraftingLlama with them hands every request to the host's loop.
    model = settings.ModelSettings(model=str(path), logits_all=False, **model_settings)
    server = settings.ServerSettings(
        host=host, port=port, api_key=api_key, interrupt_requests=False
    )
    app = server_app.create_app(server_settings=server, model_settings=[model])
    llama = server_app._llama_proxy()  # the model create_app just loaded (the only one)
    llama.__class__ = drafting_llama()
    llama.draft_model = draft_model
    if draft_model is not None and not llama.drafts_in_own_loop():
        # The host's loop would need every position's logits, which this server does not
        # keep; a recurrent model's state cannot roll a rejected draft back.
        warnings.warn(
            f"{path.name}: a recurrent or hybrid model cannot roll a draft back: serving "
            "without drafting",
            NgramdraftWarning,
            stacklevel=2,
        )
        llama.draft_model = draft_model = None
    if isinstance(draft_model, NgramDraftModel):
        draft_model.check_model(llama)
        draft_model.time_passes(llama)

    def stats() -> dict[str, float]:
        drafted = draft_model.stats if isinstance(draft_model, NgramDraftModel) else DraftStats()
        loops = llama.__dict__.get("generations", {})
        return {
            **drafted.as_dict(),
            "generations_ngramdraft_loop": loops.get("ngramdraft", 0),
            "generations_host_loop": loops.get("host", 0),
        }

    guarded = {"dependencies": [fastapi.Depends(server_app.authenticate)]}
    app.add_api_route("/ngramdraft/stats", stats, methods=["GET"], **guarded)
    app.add_api_route(
        "/metrics",
        lambda: responses.PlainTextResponse(_prometheus(stats())),
        methods=["GET"],
        **guarded,
    )
    completions = types.CreateCompletionRequest
    models = {
        "/v1/completions": completions,
        "/v1/engines/copilot-codex/completions": completions,
        "/v1/chat/completions": types.CreateChatCompletionRequest,
    }
    app.add_middleware(
        RequestCheck,
        models=models,
        api_key=api_key,
        on_done=lambda: log.info("ngramdraft: since start: %s", json.dumps(stats())),
    )
    return app


def loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine."""
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addresses)


def serve(
    model_path: str,
    *,
    draft_model: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_key: str | None = None,
    **model_settings: Any,
) -> None:
    """Run the server until interrupted or terminated (``ngramdraft serve``).

    SIGINT and SIGTERM stop it cleanly (uvicorn's shutdown): the current
    sequence is finished into the dynamic cache and every pending count saved
    before the process ends (by the signal, which uvicorn raises again).
    """
    uvicorn = require("uvicorn", "server", "ngramdraft serve")
    finished = False

    def finish() -> None:
        nonlocal finished
        if isinstance(draft_model, NgramDraftModel) and not finished:
            finished = True
            draft_model.finish()
            draft_model.drafter.flush()

    if api_key is None and not loopback(host):
        warnings.warn(
            f"serving on {host}, beyond this machine, and without an API key: anyone who "
            "can reach the port can use the model. Pass --api-key KEY (or set "
            "NGRAMDRAFT_API_KEY)",
            NgramdraftWarning,
            stacklevel=2,
        )
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    app = create_app(
        model_path, draft_model=draft_model, host=host, port=port, api_key=api_key, **model_settings
    )
    app.add_middleware(OnShutdown, callback=finish)
    try:
        uvicorn.run(app, host=host, port=port)
    finally:
        finish()  # a start that failed before the lifespan began
