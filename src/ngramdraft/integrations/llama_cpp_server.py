"""An OpenAI-compatible server (llama-cpp-python's) whose model drafts with ngramdraft.

``llama_cpp.server`` builds its model from settings that can name only its
own prompt-lookup draft model. :func:`create_app` lets it build the app and
load the model as usual (with ``logits_all`` off: the host's default keeps
every position's logits, and its loop would then run instead of ours), then
makes the loaded ``Llama`` a
:func:`DraftingLlama <ngramdraft.integrations.llama_cpp.drafting_llama>` (its
class, not a copy: the subclass adds no state) with an
:class:`NgramDraftModel`, so that drafts are verified by ngramdraft's own
loop and a prompt costs what it costs without drafting. The server handles
one request at a time (its own lock), so one drafter serves every request:
a request whose prompt does not extend the previous sequence finishes that
sequence into the dynamic cache, which is saved to ``--dynamic`` if given.

One ASGI middleware, :class:`Gate`, stands before every route of the host's:

* one rule for keys on every route but ``/health``: ``Authorization: Bearer
  KEY`` (the scheme in any case, as HTTP says), else 401;
* every body checked before the host sees it
  (:mod:`~ngramdraft.integrations.server_checks`): 400, 413, 415 or 422 in
  OpenAI's error shape, naming the field, never a 500 or a crash;
* a sampling field a request leaves out takes llama-server's default
  (:data:`DEFAULTS`), so that ``temperature: 0`` alone is greedy;
* each completion's ``timings`` carry its draft counts (llama-server's
  ``draft_n`` and ``draft_n_accepted``), and a stream that fails after it
  began sends an error event before it ends;
* ``/health`` (as llama-server and vLLM), ``/metrics`` (Prometheus, under the
  names vLLM and llama-server give their draft counters) and
  ``/ngramdraft/stats`` (JSON).

Requests queue for the model and each completes: the host's
``interrupt_requests`` is off (on, a stream is cut short whenever another
request arrives). Needs ``pip install 'ngramdraft[server]'``.
"""

import contextvars
import hmac
import inspect
import ipaddress
import json
import logging
import socket
import threading
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..errors import NgramdraftWarning
from ..files.kinds import check_gguf
from ..optional import require
from . import llama_cpp_host
from . import server_checks as checks
from .core import DraftStats
from .decode_thread import DecodeThread
from .llama_cpp import NgramDraftModel, drafting_llama

log = logging.getLogger("ngramdraft.server")

MAX_BODY = 32 << 20  # bytes: a request body larger than this gets 413
# What a client that leaves a sampling field out gets, where the host's default is not
# llama-server's: llama-cpp-python's server applies a repeat penalty of 1.1, so that a
# request sending only `temperature: 0` was not greedy, and drafts copying the prompt
# were refused. llama-server's default is 1.0, and so is this server's.
DEFAULTS = {"repeat_penalty": 1.0}
PUBLIC = frozenset({"/health", "/v1/health"})  # no key asked, as llama-server
NOT_SERVED = {"/v1/embeddings": "embeddings are not served: the model is loaded for generation"}

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

_KINDS = {401: "authentication_error", 404: "not_found_error", 501: "not_supported_error"}


def error_body(status: int, message: str, param: str | None = None) -> bytes:
    """An error in OpenAI's shape (``{"error": {message, type, param, code}}``)."""
    kind = _KINDS.get(status, "server_error" if status >= 500 else "invalid_request_error")
    error = {"message": message, "type": kind, "param": param, "code": status}
    return json.dumps({"error": error}).encode()


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@dataclass
class RequestCounts:
    """The draft counts of one request (what its ``timings`` report)."""

    drafted: int = 0
    accepted: int = 0


# The request being served, seen by the draft model in the host's worker thread (anyio
# copies the context there, and the counts are one object, so its additions are seen).
_current: contextvars.ContextVar[RequestCounts | None] = contextvars.ContextVar(
    "ngramdraft_request", default=None
)


class CountingDraft:
    """An :class:`NgramDraftModel` that also adds each call's draft counts to the current
    request's (its ``timings``)."""

    def __init__(self, inner: NgramDraftModel) -> None:
        self.inner = inner

    def __call__(self, input_ids: Any, /, **kwargs: Any) -> Any:
        stats = self.inner.stats
        drafted, accepted = stats.drafted, stats.accepted
        draft = self.inner(input_ids, **kwargs)
        counts = _current.get()
        if counts is not None:
            counts.drafted += stats.drafted - drafted
            counts.accepted += stats.accepted - accepted
        return draft


@dataclass(frozen=True)
class Route:
    """A POST route the gate checks: the host's model of its body and its kind."""

    schema: Any
    kind: str  # "completion", "chat", "tokenize" or "detokenize"


class Gate:
    """ASGI middleware: keys, body checks, defaults, timings and stream errors for every
    route (see the module's doc)."""

    def __init__(
        self,
        app: Any,
        routes: dict[str, Route],
        model: checks.Model,
        detokenize: Callable[[list[int]], bytes],
        api_key: str | None,
        on_done: Callable[[], None],
    ) -> None:
        self.app = app
        self.routes = routes
        self.model = model
        self.detokenize = detokenize
        self.api_key = api_key
        self.on_done = on_done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if path in PUBLIC and scope["method"] in ("GET", "HEAD"):
            await _answer(send, 200, b'{"status": "ok"}')
            return
        if not self._authorized(scope):
            message = "invalid API key: send 'Authorization: Bearer KEY'"
            await _answer(send, 401, error_body(401, message))
            return
        if path in NOT_SERVED:
            await _answer(send, 501, error_body(501, NOT_SERVED[path]))
            return
        route = self.routes.get(path) if scope["method"] == "POST" else None
        if route is None:  # the host's own routes and refusals (404, 405), errors reshaped
            response = _Response(send, None)
            await self.app(scope, receive, response.send)
            await response.finish()
            return
        try:
            data = await self._checked(scope, receive, route)
        except checks.Refusal as r:
            await _answer(send, r.status, error_body(r.status, r.message, r.param))
            return
        if data is None:  # the client left
            return
        if route.kind == "detokenize":
            # The host decodes the bytes strictly, and ids that end inside a character (any
            # prefix of a text's tokens may) made it answer 500; they are text, replaced.
            text = self.detokenize(data["tokens"]).decode("utf-8", errors="replace")
            await _answer(send, 200, json.dumps({"text": text}).encode())
            return
        await self._serve(scope, receive, send, json.dumps(data).encode(), route)

    def _authorized(self, scope: Scope) -> bool:
        if self.api_key is None:
            return True
        given = dict(scope.get("headers", [])).get(b"authorization", b"")
        scheme, _, key = given.partition(b" ")
        # compare_digest: the time taken says nothing of how much of the key was right.
        return scheme.lower() == b"bearer" and hmac.compare_digest(
            key.strip(), self.api_key.encode()
        )

    async def _checked(self, scope: Scope, receive: Receive, route: Route) -> dict[str, Any] | None:
        """The body the host gets, or None if the client left; Refusal if it must not."""
        content_type = dict(scope.get("headers", [])).get(b"content-type")
        if content_type is not None:
            media = content_type.split(b";")[0].strip().lower()
            if media != b"application/json":
                shown = media.decode("latin-1")[:60]
                raise checks.Refusal(415, f"Content-Type {shown!r}: send application/json")
        body = bytearray()  # grown in place: a 32 MiB body comes in many small messages
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body += message.get("body", b"")
            if len(body) > MAX_BODY:
                raise checks.Refusal(413, f"the request body is over {MAX_BODY} bytes")
            if not message.get("more_body", False):
                break
        data = checks.parse_json(bytes(body))
        data = checks.check_body(route.kind, data, route.schema, self.model)
        if route.kind in ("completion", "chat"):
            data = {**DEFAULTS, **data}
        return data

    async def _serve(
        self, scope: Scope, receive: Receive, send: Send, body: bytes, route: Route
    ) -> None:
        sent = False

        async def replay() -> dict[str, Any]:
            # The body once, then the client's own messages: the host still sees a
            # client that goes away mid-stream.
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        counts = RequestCounts()
        token = _current.set(counts)
        response = _Response(send, counts if route.kind in ("completion", "chat") else None)
        try:
            await self.app(scope, replay, response.send)
            await response.finish()
        except Exception as e:  # the host's failure: said in the response, never a dead server
            error = _innermost(e)
            where = f"{scope['method']} {scope.get('path')}"
            if isinstance(error, ValueError):  # the host's word for a request it cannot do
                log.warning("ngramdraft: %s refused: %s", where, error)
            else:
                log.exception("ngramdraft: %s failed", where)
            await response.failed(error)
        finally:
            _current.reset(token)
            if route.kind in ("completion", "chat"):
                self.on_done()


def _innermost(error: Exception) -> Exception:
    """The first error inside the exception groups a task group (the host's stream) raises."""
    while isinstance(error, ExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


class _Response:
    """The host's response on its way out: ``timings`` added to each completion's last
    chunk (or whole body) where ``counts`` are given, an error body in OpenAI's shape
    (FastAPI's own refusals say ``{"detail": ...}``), and an error said in whatever shape
    the response has begun."""

    def __init__(self, send: Send, counts: RequestCounts | None) -> None:
        self._send = send
        self.counts = counts
        self.start: dict[str, Any] | None = None  # held until the body of a JSON response
        self.stream = False
        self.begun = False
        self.ended = False
        self.closing: dict[str, Any] | None = None  # a stream's last message, held

    async def finish(self) -> None:
        """The host returned: a stream's close goes out."""
        if self.closing is not None:
            closing, self.closing = self.closing, None
            self.ended = True
            await self._send(closing)

    async def send(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            headers = dict(message.get("headers", []))
            self.stream = headers.get(b"content-type", b"").startswith(b"text/event-stream")
            if self.stream:
                await self._begin(message)
            else:
                self.start = message
            return
        if message["type"] == "http.response.body":
            if self.stream and not message.get("more_body", False):
                # A stream's close waits for the host to return: if it failed instead, the
                # client gets an error event before the end (finish() or failed()).
                self.closing = message
                return
            if self.stream and self.counts is not None:
                message = {**message, "body": self._timed_event(message.get("body", b""))}
            elif self.start is not None:
                start, self.start = self.start, None
                body = message.get("body", b"")
                if not message.get("more_body", False):
                    body = self._reshaped(start["status"], body)
                    kept = [(k, v) for k, v in start["headers"] if k != b"content-length"]
                    start = {**start, "headers": [*kept, (b"content-length", b"%d" % len(body))]}
                    message = {**message, "body": body}
                await self._begin(start)
        self.ended = not message.get("more_body", False)
        await self._send(message)

    async def _begin(self, message: dict[str, Any]) -> None:
        self.begun = True
        await self._send(message)

    def _reshaped(self, status: int, body: bytes) -> bytes:
        """A whole JSON body: with ``timings`` for a completion, in OpenAI's error shape for
        an error; any other body as it is."""
        if status < 400 and self.counts is None:
            return body
        try:
            data = json.loads(body)
        except ValueError:
            return body
        if not isinstance(data, dict):
            return body
        if status >= 400 and "error" not in data:
            detail = data.get("detail")
            return error_body(status, detail if isinstance(detail, str) else json.dumps(detail))
        if self.counts is not None and "choices" in data:
            data["timings"] = self.timings()
            return json.dumps(data).encode()
        return body

    def timings(self) -> dict[str, int]:
        assert self.counts is not None
        return {"draft_n": self.counts.drafted, "draft_n_accepted": self.counts.accepted}

    def _timed_event(self, body: bytes) -> bytes:
        # A completion's chunks say "finish_reason": null until the last, which llama-server
        # gives its timings; only that one is parsed.
        if not body.startswith(b"data: {") or b'"finish_reason": null' in body:
            return body
        data = json.loads(body[6:])
        if not any(c.get("finish_reason") for c in data.get("choices", [])):
            return body
        data["timings"] = self.timings()
        return b"data: " + json.dumps(data).encode() + b"\r\n\r\n"

    async def failed(self, error: Exception) -> None:
        """Say ``error`` to the client in the shape the response has, and end it."""
        client = isinstance(error, ValueError)  # the host's word for a request it cannot do
        status = 400 if client else 500
        message = str(error) if client else f"the server failed: {type(error).__name__}"
        if self.ended:
            return
        if self.begun and self.stream:
            self.closing = None
            event = b"data: " + error_body(status, message) + b"\r\n\r\n"
            await self._send({"type": "http.response.body", "body": event, "more_body": False})
        elif not self.begun:
            self.start = None
            await _answer(self._send, status, error_body(status, message))


class Lifespan:
    """ASGI middleware: ``started`` runs once the server listens, ``stopped`` when it shuts
    down (its lifespan's start and end).

    Here rather than after ``uvicorn.run``: on SIGTERM uvicorn shuts down, then
    raises the signal again, which ends the process before ``run`` returns.
    """

    def __init__(self, app: Any, started: Callable[[], None], stopped: Callable[[], None]) -> None:
        self.app = app
        self.started = started
        self.stopped = stopped

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def watched() -> dict[str, Any]:
            message = await receive()
            if message["type"] == "lifespan.shutdown":
                self.stopped()
            return message

        async def told(message: dict[str, Any]) -> None:
            await send(message)
            if message["type"] == "lifespan.startup.complete":
                self.started()

        await self.app(scope, watched, told)


def prometheus(stats: dict[str, Any]) -> str:
    """The draft counters under the names vLLM (``vllm:``) and llama-server (``llamacpp:``)
    give theirs, prefixed ``ngramdraft:``, with the counts of ours beside them."""
    counters = {
        "spec_decode_num_drafts": ("drafts", "Drafts of one token or more verified."),
        "spec_decode_num_draft_tokens": ("drafted_tokens", "Drafted tokens verified."),
        "spec_decode_num_accepted_tokens": ("accepted_tokens", "Drafted tokens accepted."),
        "requests_sequences": ("sequences", "Sequences begun (prompts not extending the last)."),
        "forward_passes": ("passes", "Forward passes after each prompt's."),
        "generations_ngramdraft_loop": ("generations_ngramdraft_loop",
                                        "Generations verified by ngramdraft's loop."),
        "generations_host_loop": ("generations_host_loop",
                                  "Generations run by llama-cpp-python's own loop."),
    }  # fmt: skip
    lines = []
    for name, (key, text) in counters.items():
        metric = f"ngramdraft:{name}_total"
        lines += [f"# HELP {metric} {text}", f"# TYPE {metric} counter", f"{metric} {stats[key]}"]
    metric = "ngramdraft:spec_decode_num_accepted_tokens_per_pos_total"
    lines += [f"# HELP {metric} Accepted tokens by their position in the draft.",
              f"# TYPE {metric} counter"]  # fmt: skip
    by_position = stats["accepted_tokens_by_position"]
    lines += [f'{metric}{{position="{i}"}} {n}' for i, n in enumerate(by_position)]
    return "\n".join(lines) + "\n"


def serving_llama(thread: DecodeThread) -> type:
    """The server's :func:`DraftingLlama <ngramdraft.integrations.llama_cpp.drafting_llama>`:
    every completion made on ``thread`` (:mod:`~ngramdraft.integrations.decode_thread`),
    a stream ahead of the host's server, which reads it a token at a time from its
    worker threads; the chat routes complete through it too. Each generation's thread
    is kept (``generation_threads``, in the stats), so that a test can hold it to one."""
    base: Any = drafting_llama()
    signature = inspect.signature(base.create_completion)

    class ServingLlama(base):
        def create_completion(self, *args: Any, **kwargs: Any) -> Any:
            complete = super().create_completion
            if signature.bind(self, *args, **kwargs).arguments.get("stream", False):
                return thread.stream(lambda: complete(*args, **kwargs))
            return thread.call(complete, *args, **kwargs)

        def generate(self, *args: Any, **kwargs: Any) -> Any:
            self.__dict__.setdefault("generation_threads", set()).add(threading.get_ident())
            return super().generate(*args, **kwargs)

    return ServingLlama


def _routes(types: Any) -> dict[str, Route]:
    completion = Route(types.CreateCompletionRequest, "completion")
    return {
        "/v1/completions": completion,
        "/v1/engines/copilot-codex/completions": completion,
        "/v1/chat/completions": Route(types.CreateChatCompletionRequest, "chat"),
        "/extras/tokenize": Route(types.TokenizeInputRequest, "tokenize"),
        "/extras/tokenize/count": Route(types.TokenizeInputRequest, "tokenize"),
        "/extras/detokenize": Route(types.DetokenizeInputRequest, "detokenize"),
    }


def _checked_model(llama: Any) -> checks.Model:
    """What the gate's checks need of ``llama``: its vocabulary, context, tokenizer and
    grammar parser (llama.cpp's own, whose failure is a null sampler, not a crash)."""
    lib = require("llama_cpp", "server", "ngramdraft serve")
    vocab = llama_cpp_host.vocab(llama).vocab

    def grammar_error(grammar: str) -> str | None:
        sampler = lib.llama_sampler_init_grammar(vocab, grammar.encode(), b"root")
        if not sampler:
            return "see llama.cpp's grammar syntax (GBNF); the root rule is 'root'"
        lib.llama_sampler_free(sampler)
        return None

    def tokenize(text: str) -> list[int]:
        return list(llama.tokenize(text.encode(), special=True))

    return checks.Model(llama.n_vocab(), llama.n_ctx(), tokenize, grammar_error)


def create_app(
    model_path: str,
    *,
    draft_model: Any,
    host: str = "127.0.0.1",
    port: int = 8000,
    api_key: str | None = None,
    verbose: bool = False,
    **model_settings: Any,
) -> Any:
    """The FastAPI app of ``llama_cpp.server`` serving ``model_path`` with ``draft_model``."""
    responses = require("fastapi.responses", "server", "ngramdraft serve")
    server_app = require("llama_cpp.server.app", "server", "ngramdraft serve")
    settings = require("llama_cpp.server.settings", "server", "ngramdraft serve")
    types = require("llama_cpp.server.types", "server", "ngramdraft serve")
    path = check_gguf(model_path)
    # logits_all: the host's server keeps every position's logits by default (for
    # logprobs), and a DraftingLlama with them hands every request to the host's loop.
    model = settings.ModelSettings(
        model=str(path), logits_all=False, verbose=verbose, **model_settings
    )
    server = settings.ServerSettings(
        host=host, port=port, api_key=api_key, interrupt_requests=False
    )
    app = server_app.create_app(server_settings=server, model_settings=[model])
    thread = DecodeThread()
    llama = llama_cpp_host.served_model(server_app, serving_llama(thread))
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
        thread.call(draft_model.time_passes, llama)
        llama.draft_model = CountingDraft(draft_model)

    def stats() -> dict[str, Any]:
        drafted = draft_model.stats if isinstance(draft_model, NgramDraftModel) else DraftStats()
        loops = llama.__dict__.get("generations", {})
        return {
            **drafted.as_dict(),
            "generations_ngramdraft_loop": loops.get("ngramdraft", 0),
            "generations_host_loop": loops.get("host", 0),
            "generation_threads": len(llama.__dict__.get("generation_threads", ())),
        }

    app.add_api_route("/ngramdraft/stats", stats, methods=["GET"])
    app.add_api_route(
        "/metrics",
        lambda: responses.PlainTextResponse(prometheus(stats())),
        methods=["GET"],
    )
    app.add_middleware(
        Gate,
        routes=_routes(types),
        model=_checked_model(llama),
        detokenize=llama.detokenize,
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
    verbose: bool = False,
    **model_settings: Any,
) -> None:
    """Run the server until interrupted or terminated (``ngramdraft serve``).

    SIGINT and SIGTERM stop it cleanly (uvicorn's shutdown): the current
    sequence is finished into the dynamic cache and every pending count saved
    before the process ends (by the signal, which uvicorn raises again).
    llama.cpp's loading log is shown with ``verbose`` only.
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
        model_path,
        draft_model=draft_model,
        host=host,
        port=port,
        api_key=api_key,
        verbose=verbose,
        **model_settings,
    )
    shown = f"[{host}]" if ":" in host else host

    def started() -> None:
        # uvicorn binds its socket before the lifespan starts: the address is taken.
        print(f"ngramdraft serve: listening on http://{shown}:{port}", flush=True)

    app.add_middleware(Lifespan, started=started, stopped=finish)
    try:
        uvicorn.run(app, host=host, port=port, log_level="info" if verbose else "warning")
    finally:
        finish()  # a start that failed before the lifespan began
