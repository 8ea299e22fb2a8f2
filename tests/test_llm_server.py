"""The scripted OpenAI-compatible test server itself: the other LLM tests trust it, so its
replies, streaming, recording and failure modes are checked with a real HTTP client."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from llm_server import (
    DEFAULT_MODEL,
    EMPTY_QUEUE,
    EXTRACT_MODEL,
    TEST_KEY,
    TEST_KEY_ENV,
    LLMServer,
    closed_port_url,
    llm_fixture,  # noqa: F401
    write_config,
)

HEADERS = {"Authorization": "Bearer sk-abc"}


def chat(server: LLMServer, timeout: float = 10, **body: Any) -> httpx.Response:
    payload = {"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}
    return httpx.post(
        server.base_url + "/chat/completions", json=payload, headers=HEADERS, timeout=timeout
    )


def sse_chunks(resp: httpx.Response) -> list[Any]:
    """The ``data:`` payloads of an SSE body, JSON-decoded except the final ``[DONE]``."""
    events = [e for e in resp.text.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events), events
    datas = [e[len("data: ") :] for e in events]
    assert datas[-1] == "[DONE]"
    return [json.loads(d) for d in datas[:-1]]


def test_text_reply(llm: LLMServer) -> None:
    llm.reply("hello there")
    resp = chat(llm, model="gpt-x")
    assert resp.status_code == 200
    data = resp.json()
    assert data["object"] == "chat.completion" and data["model"] == "gpt-x"
    assert data["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "hello there"},
            "finish_reason": "stop",
        }
    ]
    assert llm.pending == 0


def test_tool_calls_reply_in_both_shapes(llm: LLMServer) -> None:
    llm.reply(
        {
            "content": None,
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "a.py"}},
                {
                    "id": "call_x",
                    "type": "function",
                    "function": {"name": "run_command", "arguments": '{"cmd": "ls"}'},
                },
            ],
        },
        {"content": "cut off", "finish_reason": "length"},
    )
    message = chat(llm).json()["choices"][0]
    assert message["finish_reason"] == "tool_calls"
    calls = message["message"]["tool_calls"]
    assert calls[0]["type"] == "function" and calls[0]["id"] == "call_0"
    assert calls[0]["function"]["name"] == "read_file"
    assert json.loads(calls[0]["function"]["arguments"]) == {"path": "a.py"}
    assert calls[1] == {
        "id": "call_x",
        "type": "function",
        "function": {"name": "run_command", "arguments": '{"cmd": "ls"}'},
    }
    assert message["message"]["content"] is None
    second = chat(llm).json()["choices"][0]
    assert second["finish_reason"] == "length"
    assert second["message"] == {"role": "assistant", "content": "cut off"}


def test_streaming_chunks_reassemble(llm: LLMServer) -> None:
    text = "The quick brown fox jumps over the lazy dog, twice: " * 3
    llm.reply(text)
    resp = chat(llm, stream=True)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("text/event-stream")
    chunks = sse_chunks(resp)
    assert len(chunks) > 3  # really split
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == text
    assert [c["choices"][0]["finish_reason"] for c in chunks][-1] == "stop"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])


def test_streaming_tool_calls_reassemble(llm: LLMServer) -> None:
    args = {"path": "src/some/long/path/name.py", "content": "x = 1\n"}
    llm.reply({"content": "", "tool_calls": [{"name": "write_file", "arguments": args}]})
    chunks = sse_chunks(chat(llm, stream=True))
    calls: dict[int, dict[str, str]] = {}
    for c in chunks:
        for part in c["choices"][0]["delta"].get("tool_calls", []):
            call = calls.setdefault(part["index"], {"name": "", "arguments": "", "id": ""})
            call["id"] += part.get("id", "")
            call["name"] += part.get("function", {}).get("name", "")
            call["arguments"] += part.get("function", {}).get("arguments", "")
    assert list(calls) == [0]
    assert calls[0]["name"] == "write_file" and calls[0]["id"] == "call_0"
    assert json.loads(calls[0]["arguments"]) == args
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_models_endpoint(llm: LLMServer) -> None:
    resp = httpx.get(llm.base_url + "/models", timeout=10)
    assert resp.status_code == 200
    assert [m["id"] for m in resp.json()["data"]] == [EXTRACT_MODEL, DEFAULT_MODEL]
    assert llm.requests[0].method == "GET" and llm.requests[0].path == "/v1/models"


def test_requests_are_recorded(llm: LLMServer) -> None:
    llm.reply("a", "b")
    chat(llm, model="one", response_format={"type": "json_object"})
    chat(llm, model="two")
    assert [r.method for r in llm.requests] == ["POST", "POST"]
    assert [r.path for r in llm.requests] == ["/v1/chat/completions"] * 2
    first = llm.requests[0]
    assert first.headers["authorization"] == "Bearer sk-abc"
    assert first.headers["content-type"] == "application/json"
    assert first.body["model"] == "one"
    assert first.body["response_format"] == {"type": "json_object"}
    assert first.message("user") == {"role": "user", "content": "hi"}
    assert json.loads(first.raw) == first.body
    assert llm.requests[1].body["model"] == "two"
    assert llm.chat_requests() == llm.requests


def test_empty_queue_answers_500_at_once(llm: LLMServer) -> None:
    began = time.monotonic()
    resp = chat(llm)
    assert time.monotonic() - began < 5
    assert resp.status_code == 500
    message = resp.json()["error"]["message"]
    assert message == f"{EMPTY_QUEUE} for POST /v1/chat/completions (request #1)"
    assert len(llm.requests) == 1  # recorded all the same


def test_raw_status_and_raw_body(llm: LLMServer) -> None:
    llm.reply({"status": 503, "body": "overloaded"}, {"raw": "not json"})
    first = chat(llm)
    assert (first.status_code, first.text) == (503, "overloaded")
    second = chat(llm)
    assert second.status_code == 200 and second.text == "not json"
    with pytest.raises(ValueError):
        second.json()


def test_unknown_route_and_bad_body(llm: LLMServer) -> None:
    assert httpx.post(llm.url + "/v2/nothing", json={}, timeout=10).status_code == 404
    llm.reply("unused")
    bad = httpx.post(llm.base_url + "/chat/completions", content=b"{oops", timeout=10)
    assert bad.status_code == 400
    assert llm.requests[-1].body is None and llm.requests[-1].raw == b"{oops"
    assert llm.pending == 1  # a malformed request does not consume a scripted reply


def test_delay_then_reply_and_client_timeout(llm: LLMServer) -> None:
    llm.reply({"delay": 0.2, "then": "late"}, {"delay": 5})
    assert chat(llm).json()["choices"][0]["message"]["content"] == "late"
    began = time.monotonic()
    with pytest.raises(httpx.TimeoutException):
        chat(llm, timeout=0.3)
    assert time.monotonic() - began < 3
    llm.reply("still serving")
    assert chat(llm).json()["choices"][0]["message"]["content"] == "still serving"


def test_callable_spec_sees_the_request(llm: LLMServer) -> None:
    llm.reply(lambda req: f"you asked for {req.body['model']}")
    assert chat(llm, model="zz").json()["choices"][0]["message"]["content"] == "you asked for zz"


def test_stop_is_clean_even_with_a_sleeping_reply() -> None:
    server = LLMServer().start()
    url = server.base_url
    server.reply({"delay": 30})
    with pytest.raises(httpx.TimeoutException):
        chat(server, timeout=0.2)
    began = time.monotonic()
    server.stop()
    assert time.monotonic() - began < 3
    with pytest.raises(httpx.ConnectError):
        httpx.get(url + "/models", timeout=2)


def test_closed_port_refuses() -> None:
    with pytest.raises(httpx.ConnectError):
        httpx.get(closed_port_url() + "/models", timeout=2)


def test_write_config_is_a_working_uwf_config(root: Path, llm: LLMServer) -> None:
    from uwf.config.config import extract_model_alias, load_config, resolve_model

    write_config(root, llm.base_url, {"cmd": {"command": "uwf-cmd", "args": ["--", "sh"]}})
    env = root / ".env"
    assert env.read_text() == f"{TEST_KEY_ENV}={TEST_KEY}\n"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    config = load_config(root)
    assert config.default_agent == "cmd" and config.default_model == "default"
    alias = extract_model_alias(config)
    assert alias == "extract"
    spec = resolve_model(config, alias)
    assert (spec.base_url, spec.api_key, spec.model) == (llm.base_url, TEST_KEY, EXTRACT_MODEL)

    write_config(root, llm.base_url, key=None)
    assert not env.exists()
    assert "agents" not in (root / "config.yaml").read_text()
