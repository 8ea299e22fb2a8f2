"""The one OpenAI-compatible HTTP client of uwf (the only module that imports httpx).

    client = Client(base_url, api_key, model, timeout=resolve_timeout(EXTRACT_TIMEOUT))
    reply = client.chat(messages, response_format={"type": "json_object"})
    reply.text, reply.tool_calls, reply.model, reply.usage

Every caller — the LLM extract, compaction summaries, ``uwf-builtin``'s tool loop, ``uwf
setup``'s model check and model list — goes through :class:`Client`, so there is one request
path, one timeout policy and one set of error messages:

- **Timeout**: an explicit value (``uwf-builtin --http-timeout``) wins, then
  ``$UWF_LLM_TIMEOUT`` (seconds, for every call of the process), then the default of the kind
  of call (:data:`AGENT_TIMEOUT`, :data:`EXTRACT_TIMEOUT`, :data:`COMPACT_TIMEOUT`,
  :data:`CHECK_TIMEOUT`).
- **No retries**: a failed call fails once, with one line (:class:`LLMError`); a retry policy
  belongs to whoever runs the step again (cron, CI, a loop around ``uwf``).
- **Keys**: ``Authorization: Bearer <key>`` is sent only when there is a key (a local server
  such as Ollama needs none); no message ever quotes it.

The reply is typed (:class:`Reply`): the message's text, its tool calls, the model id and
the token usage the server reports (kept for usage accounting and tracing).
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from uwf.adapters import otel
from uwf.util.errors import UwfError
from uwf.util.numbers import positive_seconds

TIMEOUT_ENV = "UWF_LLM_TIMEOUT"
AGENT_TIMEOUT = 300.0  # seconds: one model call of uwf-builtin's tool loop (long generations)
EXTRACT_TIMEOUT = 60.0  # the JSON-mode extract of an agent's output
COMPACT_TIMEOUT = 120.0  # one compaction summary (docs/format.md, "Compaction")
CHECK_TIMEOUT = 15.0  # uwf setup: the one-token check and the model list
QUOTE_LIMIT = 300  # characters of an error body quoted in a message


class LLMError(UwfError):
    """The model server did not give a usable answer (fails the step or the check)."""


class RateLimited(LLMError):
    """The model server answered 429: ``base_url`` is the provider's, ``retry_after`` the
    seconds its ``Retry-After`` header asked for (None: it sent none the adapter can read)."""

    def __init__(self, message: str, base_url: str, retry_after: float | None) -> None:
        super().__init__(message)
        self.base_url, self.retry_after = base_url, retry_after


def retry_after(value: str | None, now: float) -> float | None:
    """``Retry-After``: seconds, or an HTTP date (RFC 9110), as seconds from ``now`` (unix s)."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    from email.utils import parsedate_to_datetime

    try:
        return max(0.0, parsedate_to_datetime(text).timestamp() - now)
    except (TypeError, ValueError):
        return None


def resolve_timeout(default: float, explicit: float | None = None) -> float:
    """Seconds to wait for one call: ``explicit``, else ``$UWF_LLM_TIMEOUT``, else ``default``."""
    if explicit is not None:
        return explicit
    value = os.environ.get(TIMEOUT_ENV, "")
    return positive_seconds(value, f"${TIMEOUT_ENV}") if value.strip() else default


@dataclass(frozen=True)
class Usage:
    """Token counts as the server reports them."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


@dataclass(frozen=True)
class ToolCall:
    """One function call of an assistant message; ``arguments`` is the JSON text as sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Reply:
    """The first choice of a chat completion."""

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None
    model: str | None = None  # the model id the server reports (may differ from the alias)
    usage: Usage | None = None
    finish_reason: str | None = None

    @property
    def text(self) -> str:
        return self.content or ""


class Client:
    """Calls to one model of one OpenAI-compatible server, over one HTTP connection pool."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        model: str,
        *,
        timeout: float,
        limit_hint: str = f"${TIMEOUT_ENV}",
        on_reply: Callable[[Reply], None] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model = model
        self.timeout = timeout
        self.limit_hint = limit_hint  # what sets the limit, named in the timeout message
        self.on_reply = on_reply  # sees every reply (an agent counts its tokens)
        self._http: Any = None

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        response_format: dict[str, Any] | None = None,
        max_tokens: int | None = None,
    ) -> Reply:
        """``POST /chat/completions``; only the given options are sent. With tracing on, each
        call is a span ``chat <model>`` with the GenAI attributes (model, token counts)."""
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        for key, value in (
            ("tools", tools),
            ("tool_choice", tool_choice),
            ("response_format", response_format),
            ("max_tokens", max_tokens),
        ):
            if value is not None:
                body[key] = value
        attributes = _request_attributes(self) if otel.tracer() is not None else None
        with otel.span(f"chat {self.model}", attributes) as span:
            reply = parse_completion(self._request("POST", "/chat/completions", body))
            _reply_attributes(span, reply)
        if self.on_reply is not None:
            self.on_reply(reply)
        return reply

    def list_models(self) -> list[str]:
        """The model ids of ``GET /models``, in the server's order."""
        data = self._request("GET", "/models")
        items = data.get("data") if isinstance(data, dict) else None
        if not isinstance(items, list):
            raise LLMError("LLM model list has no data")
        return [str(m["id"]) for m in items if isinstance(m, dict) and m.get("id")]

    def close(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        import httpx

        url = self.base_url + path
        if self._http is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._http = httpx.Client(timeout=self.timeout, headers=headers, verify=_tls())
        try:
            resp = self._http.request(method, url, json=body)
        except httpx.TimeoutException:
            raise LLMError(
                f"LLM request timed out after {self.timeout:g}s: {url} "
                f"({self.limit_hint} sets the limit)"
            ) from None
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise LLMError(f"LLM network error: {type(exc).__name__}: {exc} ({url})") from None
        if resp.status_code == 429:
            import time

            raise RateLimited(
                f"LLM HTTP 429 (rate limited; uwf does not retry): {_quote(resp.text)}",
                self.base_url,
                retry_after(resp.headers.get("retry-after"), time.time()),
            )
        if resp.status_code // 100 != 2:
            raise LLMError(f"LLM HTTP {resp.status_code}: {_quote(resp.text)}")
        try:
            return resp.json()
        except ValueError:
            raise LLMError(f"LLM invalid JSON response: {_quote(resp.text)}") from None


def _request_attributes(client: Client) -> dict[str, Any]:
    """The OpenTelemetry GenAI attributes of a chat request."""
    from urllib.parse import urlsplit

    parts = urlsplit(client.base_url)
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": client.model,
        "server.address": parts.hostname,
        "server.port": parts.port,
    }


def _reply_attributes(span: otel.Span, reply: Reply) -> None:
    span.set("gen_ai.response.model", reply.model)
    if reply.finish_reason:
        span.set("gen_ai.response.finish_reasons", [reply.finish_reason])
    if reply.usage is not None:
        span.set("gen_ai.usage.input_tokens", reply.usage.prompt_tokens)
        span.set("gen_ai.usage.output_tokens", reply.usage.completion_tokens)


@functools.cache
def _tls() -> Any:
    """The TLS context every Client of the process shares: loading the CA bundle takes ~50 ms,
    paid once rather than by each client (an agent run makes one for its model, one for the
    extract, one for a summary)."""
    import httpx

    return httpx.create_ssl_context()


def _quote(text: str) -> str:
    flat = " ".join(text[:QUOTE_LIMIT].split())
    return flat or "(empty body)"


# -- parsing a completion -----------------------------------------------------------------------


def parse_completion(data: Any) -> Reply:
    """The :class:`Reply` of a ``chat.completion`` body (its first choice)."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices:
        raise LLMError("LLM response has no choices")
    first = choices[0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise LLMError("LLM response has no choices[0].message")
    model = data.get("model")
    finish = first.get("finish_reason")
    return reply_of(
        message,
        model=model if isinstance(model, str) else None,
        usage=_usage(data.get("usage")),
        finish_reason=finish if isinstance(finish, str) else None,
    )


def reply_of(
    message: dict[str, Any],
    *,
    model: str | None = None,
    usage: Usage | None = None,
    finish_reason: str | None = None,
) -> Reply:
    """A :class:`Reply` from an assistant message in the OpenAI shape, tolerant of omissions:
    a tool call without an id gets ``call_<n>``, arguments given as an object become JSON."""
    reasoning = message.get("reasoning_content", message.get("reasoning"))
    return Reply(
        content=_content(message.get("content")),
        tool_calls=_tool_calls(message.get("tool_calls")),
        reasoning=reasoning if isinstance(reasoning, str) else None,
        model=model,
        usage=usage,
        finish_reason=finish_reason,
    )


def _content(value: Any) -> str | None:
    """Text content; a list of parts (some servers) is joined from its text parts."""
    if isinstance(value, str) or value is None:
        return value
    if isinstance(value, list):
        parts = [p.get("text") for p in value if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return None


def _tool_calls(value: Any) -> tuple[ToolCall, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(_tool_call(call, number) for number, call in enumerate(value))


def _tool_call(call: Any, number: int) -> ToolCall:
    if not isinstance(call, dict):
        return ToolCall(f"call_{number}", "", "")
    fn = call.get("function")
    fn = fn if isinstance(fn, dict) else {}
    call_id = call.get("id")
    raw = fn.get("arguments")
    if isinstance(raw, str):
        arguments = raw
    else:
        arguments = "" if raw is None else json.dumps(raw, ensure_ascii=False)
    return ToolCall(
        call_id if isinstance(call_id, str) and call_id else f"call_{number}",
        str(fn.get("name") or ""),
        arguments,
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(value: Any) -> Usage | None:
    """Token usage when the server reports prompt and completion counts, else None."""
    if not isinstance(value, dict):
        return None
    prompt, completion = _count(value.get("prompt_tokens")), _count(value.get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    total = _count(value.get("total_tokens"))
    return Usage(prompt, completion, prompt + completion if total is None else total)
