"""A scripted, local OpenAI-compatible LLM server for the test suite (standard library only).

Why: the LLM extract fallback and the ``uwf-builtin`` tool loop talk HTTP to a provider. The
tests must exercise that real path (httpx, headers, JSON mode, error handling) without a
network or a key, and must never hang when a test forgets to script a reply.

    server = LLMServer().start()          # or the ``llm`` fixture
    server.reply('{"status": "_"}')       # queue reply specs, used in request order
    ... point config.yaml at server.base_url (".../v1"), run uwf ...
    server.requests[0].body["model"]      # every request is recorded
    server.stop()

A reply spec is one of:

- ``str`` — the assistant message's text content (``finish_reason: stop``).
- ``{"content": ..., "tool_calls": [...], "finish_reason": ...}`` — an assistant message.
  A tool call is either the OpenAI shape (``{"id", "type": "function", "function": {"name",
  "arguments"}}``) or the shortcut ``{"name": ..., "arguments": <dict or JSON string>}``;
  ``finish_reason`` defaults to ``tool_calls`` when there are tool calls, else ``stop``.
  ``"model"`` and ``"usage"`` set what the completion reports (default: the requested model
  and zero tokens).
- ``{"status": 500, "body": "...", "headers": {...}}`` — a raw HTTP answer (body text as
  given, with those headers, e.g. ``Retry-After`` on a 429).
- ``{"raw": "not json"}`` — HTTP 200 whose body is the given text (``application/json``).
- ``{"delay": seconds, "then": <spec>}`` — wait, then answer ``then`` (default: a text reply).
- a callable ``(RecordedRequest) -> spec`` — decide from the request.

A request with ``"stream": true`` gets the same message as ``text/event-stream`` SSE chunks
(``chat.completion.chunk`` deltas, then a chunk with ``finish_reason``, then
``data: [DONE]``). When the queue is empty the server answers 500 with a body that says so.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

TEST_KEY_ENV = "TEST_LLM_KEY"
TEST_KEY = "sk-test-123"
EXTRACT_MODEL = "test-extract-model"
DEFAULT_MODEL = "test-default-model"
EMPTY_QUEUE = "llm_server: no scripted reply left"

NO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
STREAM_PIECE = 7  # characters per streamed content delta: small, so reassembly is exercised


@dataclass
class RecordedRequest:
    """One request as the server saw it. ``headers`` keys are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any = None  # the parsed JSON body, None if there was none or it did not parse

    def message(self, role: str) -> dict[str, Any]:
        """The first chat message with this role (a test convenience)."""
        for msg in (self.body or {}).get("messages", []):
            if msg.get("role") == role:
                return dict(msg)
        raise AssertionError(f"no {role} message in request: {self.body!r}")


@dataclass
class _Answer:
    status: int
    body: bytes
    content_type: str = "application/json"
    stream: list[bytes] = field(default_factory=list)  # SSE events, when streaming
    headers: dict[str, str] = field(default_factory=dict)  # extra response headers


def _normalise_tool_call(call: dict[str, Any], index: int) -> dict[str, Any]:
    if "function" in call:
        fn = dict(call["function"])
        call_id = call.get("id", f"call_{index}")
    else:
        fn = {"name": call["name"], "arguments": call.get("arguments", {})}
        call_id = call.get("id", f"call_{index}")
    if not isinstance(fn.get("arguments"), str):
        fn["arguments"] = json.dumps(fn.get("arguments", {}))
    return {"id": call_id, "type": "function", "function": fn}


def _message(spec: str | dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(assistant message, finish_reason) for a text or message spec."""
    if isinstance(spec, str):
        return {"role": "assistant", "content": spec}, "stop"
    message: dict[str, Any] = {"role": "assistant", "content": spec.get("content")}
    calls = [_normalise_tool_call(c, i) for i, c in enumerate(spec.get("tool_calls") or [])]
    if calls:
        message["tool_calls"] = calls
    for extra in ("reasoning_content", "refusal"):
        if extra in spec:
            message[extra] = spec[extra]
    default_finish = "tool_calls" if calls else "stop"
    return message, str(spec.get("finish_reason", default_finish))


class LLMServer:
    """The scripted server; thread-safe, started on 127.0.0.1 with a free port."""

    def __init__(self, models: tuple[str, ...] = (EXTRACT_MODEL, DEFAULT_MODEL)) -> None:
        self.models = models
        self.requests: list[RecordedRequest] = []
        self._queue: collections.deque[Any] = collections.deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._counter = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> LLMServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; sleeping ``delay`` replies wake up at once."""
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> LLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses ----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>`` (no path)."""
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def base_url(self) -> str:
        """What a provider's ``baseUrl`` should be: the URL plus ``/v1``."""
        return self.url + "/v1"

    # -- script and record --------------------------------------------------------------------

    def reply(self, *specs: Any) -> LLMServer:
        """Queue reply specs; each request takes the next one."""
        with self._lock:
            self._queue.extend(specs)
        return self

    @property
    def pending(self) -> int:
        """How many scripted replies have not been used yet."""
        with self._lock:
            return len(self._queue)

    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == "/v1/chat/completions"]

    def _record(self, request: RecordedRequest) -> int:
        with self._lock:
            self.requests.append(request)
            self._counter += 1
            return self._counter

    def _next(self) -> tuple[bool, Any]:
        with self._lock:
            if not self._queue:
                return False, None
            return True, self._queue.popleft()

    # -- answers ------------------------------------------------------------------------------

    def _answer_chat(self, request: RecordedRequest, number: int) -> _Answer:
        if not isinstance(request.body, dict):
            return _json_answer(400, {"error": {"message": "request body is not a JSON object"}})
        found, spec = self._next()
        if not found:
            text = f"{EMPTY_QUEUE} for {request.method} {request.path} (request #{number})"
            return _json_answer(500, {"error": {"message": text, "type": "llm_server"}})
        while True:
            if callable(spec):
                spec = spec(request)
                continue
            if isinstance(spec, dict) and "delay" in spec:
                self._closing.wait(float(spec["delay"]))
                spec = spec.get("then", "(delayed reply)")
                continue
            break
        if isinstance(spec, dict) and "status" in spec:
            body = spec.get("body", "")
            data = body if isinstance(body, bytes) else str(body).encode()
            return _Answer(
                int(spec["status"]),
                data,
                spec.get("content_type", "text/plain"),
                headers=dict(spec.get("headers", {})),
            )
        if isinstance(spec, dict) and "raw" in spec:
            return _Answer(200, str(spec["raw"]).encode(), "application/json")
        message, finish = _message(spec)
        ident = f"chatcmpl-{number}"
        reported = spec if isinstance(spec, dict) else {}
        model = str(reported.get("model", request.body.get("model", "")))
        usage = reported.get(
            "usage", {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        )
        if request.body.get("stream") is True:
            options = request.body.get("stream_options")
            wants = isinstance(options, dict) and options.get("include_usage") is True
            events = _sse_events(ident, model, message, finish, usage if wants else None)
            return _Answer(200, b"", "text/event-stream", events)
        return _json_answer(
            200,
            {
                "id": ident,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            },
        )

    def _answer_models(self) -> _Answer:
        data = [{"id": m, "object": "model", "owned_by": "llm_server"} for m in self.models]
        return _json_answer(200, {"object": "list", "data": data})


def _json_answer(status: int, value: Any) -> _Answer:
    return _Answer(status, json.dumps(value).encode())


def _sse_events(
    ident: str,
    model: str,
    message: dict[str, Any],
    finish: str,
    usage: dict[str, Any] | None = None,
) -> list[bytes]:
    """The message as OpenAI-style streaming chunks, ending with ``data: [DONE]``; with
    ``usage`` (the request asked ``stream_options.include_usage``) a last chunk without
    choices carries it, as OpenAI sends it."""

    def chunk(
        delta: dict[str, Any] | None, finish_reason: str | None = None, **extra: Any
    ) -> bytes:
        choices = (
            [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
        )
        payload = {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": model,
            "choices": choices,
            **extra,
        }
        return f"data: {json.dumps(payload)}\n\n".encode()

    events = [chunk({"role": "assistant", "content": ""})]
    content = message.get("content") or ""
    for i in range(0, len(content), STREAM_PIECE):
        events.append(chunk({"content": content[i : i + STREAM_PIECE]}))
    for index, call in enumerate(message.get("tool_calls", [])):
        fn = call["function"]
        head = {"index": index, "id": call["id"], "type": "function"}
        events.append(chunk({"tool_calls": [{**head, "function": {"name": fn["name"]}}]}))
        args = fn["arguments"]
        for i in range(0, len(args), STREAM_PIECE):
            piece = {"index": index, "function": {"arguments": args[i : i + STREAM_PIECE]}}
            events.append(chunk({"tool_calls": [piece]}))
    events.append(chunk({}, finish))
    if usage is not None:
        events.append(chunk(None, usage=usage))
    events.append(b"data: [DONE]\n\n")
    return events


class _Handler(BaseHTTPRequestHandler):
    owner: LLMServer
    server_version = "uwf-test-llm/1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _receive(self) -> tuple[RecordedRequest, int]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = None
        if raw:
            with contextlib.suppress(ValueError):
                body = json.loads(raw)
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = RecordedRequest(self.command, self.path, headers, raw, body)
        return request, self.owner._record(request)

    def _send(self, answer: _Answer) -> None:
        try:
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            for name, value in answer.headers.items():
                self.send_header(name, value)
            if answer.stream:
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Connection", "close")
                self.end_headers()
                for event in answer.stream:
                    self.wfile.write(event)
                    self.wfile.flush()
                self.close_connection = True
            else:
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (e.g. its timeout): fine

    def do_POST(self) -> None:
        request, number = self._receive()
        if request.path.rstrip("/") == "/v1/chat/completions":
            self._send(self.owner._answer_chat(request, number))
        else:
            self._send(_json_answer(404, {"error": {"message": f"no route: POST {self.path}"}}))

    def do_GET(self) -> None:
        request, _ = self._receive()
        if request.path.rstrip("/") == "/v1/models":
            self._send(self.owner._answer_models())
        else:
            self._send(_json_answer(404, {"error": {"message": f"no route: GET {self.path}"}}))


# -- fixtures and helpers ---------------------------------------------------------------------


@pytest.fixture(name="llm")
def llm_fixture(monkeypatch: pytest.MonkeyPatch) -> Iterator[LLMServer]:
    """The ``llm`` fixture: a started :class:`LLMServer`, stopped after the test.

    Use it with ``from llm_server import llm_fixture  # noqa: F401`` (the function has another
    name than the fixture so that ruff's F811 does not flag every test taking ``llm``).

    The key variable is removed from the test's environment so the only key an agent can find
    is the one :func:`write_config` puts in ``<root>/.env``.
    """
    monkeypatch.delenv(TEST_KEY_ENV, raising=False)
    server = LLMServer().start()
    try:
        yield server
    finally:
        server.stop()


def closed_port_url() -> str:
    """A ``http://127.0.0.1:<port>/v1`` where nothing listens (connection refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def write_config(
    root: Path,
    base_url: str,
    extra_agents: dict[str, dict[str, Any]] | None = None,
    *,
    default_agent: str | None = None,
    key: str | None = TEST_KEY,
) -> Path:
    """Write ``<root>/config.yaml`` for a provider at ``base_url`` (used verbatim, so pass
    ``server.base_url``, which ends in ``/v1``) and ``<root>/.env`` with the key (mode 0600).

    Models: ``extract`` (name :data:`EXTRACT_MODEL`) and ``default`` (:data:`DEFAULT_MODEL`,
    also ``defaultModel``), so a test can tell which alias the extract used. ``key=None``
    writes no ``.env`` (the missing-key case). ``extra_agents`` are added under ``agents``;
    ``default_agent`` (else the first extra agent) becomes ``defaultAgent``.
    """
    import yaml

    root.mkdir(parents=True, exist_ok=True)
    config: dict[str, Any] = {
        "providers": {"local": {"baseUrl": base_url, "apiKeyEnv": TEST_KEY_ENV}},
        "models": {
            "extract": {"provider": "local", "name": EXTRACT_MODEL},
            "default": {"provider": "local", "name": DEFAULT_MODEL},
        },
        "defaultModel": "default",
    }
    if extra_agents:
        config["agents"] = extra_agents
        config["defaultAgent"] = default_agent or next(iter(extra_agents))
    path = root / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    env = root / ".env"
    if key is not None:
        fd = os.open(env, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(f"{TEST_KEY_ENV}={key}\n")
        os.chmod(env, 0o600)
    elif env.exists():
        env.unlink()
    return path
