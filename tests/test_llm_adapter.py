"""`uwf.adapters.llm`, the one OpenAI-compatible client, against the local scripted server.

The agents' and setup's own tests drive it end to end; here are the parts they do not show:
the typed reply (tool calls, the model the server reports, token usage), which options are
sent, the key header, every error line, the timeout policy, and that importing the adapter
does not import httpx.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from typing import Any

import pytest

from llm_server import LLMServer, closed_port_url, llm_fixture  # noqa: F401
from uwf.adapters import llm as adapter
from uwf.util.errors import InvalidInput


def client(server: LLMServer, key: str = "sk-1", **kwargs: Any) -> adapter.Client:
    return adapter.Client(server.base_url, key, "m", timeout=kwargs.pop("timeout", 10), **kwargs)


def test_reply_is_typed(llm: LLMServer) -> None:
    llm.reply(
        {
            "content": "Looking.",
            "tool_calls": [
                {"name": "read_file", "arguments": {"path": "é.txt"}},
                {"id": "c2", "type": "function", "function": {"name": "x", "arguments": "{}"}},
            ],
            "reasoning_content": "first read",
            "model": "m-2025-01-01",
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
        }
    )
    reply = client(llm).chat([{"role": "user", "content": "hi"}])
    assert reply == adapter.Reply(
        content="Looking.",
        tool_calls=(
            adapter.ToolCall("call_0", "read_file", json.dumps({"path": "é.txt"})),
            adapter.ToolCall("c2", "x", "{}"),
        ),
        reasoning="first read",
        model="m-2025-01-01",  # what the server says it ran, not the alias asked for
        usage=adapter.Usage(12, 5, 17),
        finish_reason="tool_calls",
    )


def test_usage_is_optional_and_total_is_derived(llm: LLMServer) -> None:
    llm.reply(
        {"content": "a", "usage": None},
        {"content": "b", "usage": {"prompt_tokens": 3, "completion_tokens": 4}},
        {"content": [{"type": "text", "text": "x"}, {"type": "text", "text": "y"}]},
    )
    c = client(llm)
    messages = [{"role": "user", "content": "hi"}]
    assert c.chat(messages).usage is None
    assert c.chat(messages).usage == adapter.Usage(3, 4, 7)
    assert c.chat(messages).text == "xy"  # content as a list of text parts


def test_only_given_options_are_sent_and_the_key_only_when_there_is_one(llm: LLMServer) -> None:
    llm.reply("a", "b")
    messages = [{"role": "user", "content": "hi"}]
    client(llm).chat(messages, max_tokens=1)
    client(llm, key="").chat(messages, tools=[], tool_choice="none")
    first, second = llm.requests
    assert first.body == {"model": "m", "messages": messages, "max_tokens": 1}
    assert first.headers["authorization"] == "Bearer sk-1"
    assert second.body == {"model": "m", "messages": messages, "tools": [], "tool_choice": "none"}
    assert "authorization" not in second.headers  # a local server that needs no key


def test_list_models(llm: LLMServer) -> None:
    assert client(llm).list_models() == list(llm.models)
    assert llm.requests[0].path == "/v1/models"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"status": 500, "body": "upstream\n  exploded"}, "LLM HTTP 500: upstream exploded"),
        ({"status": 502, "body": ""}, "LLM HTTP 502: (empty body)"),
        ({"status": 429, "body": "slow"}, "LLM HTTP 429 (rate limited; uwf does not retry): slow"),
        ({"raw": "<html>"}, "LLM invalid JSON response: <html>"),
        ({"raw": '{"choices": []}'}, "LLM response has no choices"),
        ({"raw": '{"choices": [{"text": "old API"}]}'}, "LLM response has no choices[0].message"),
    ],
)
def test_errors(llm: LLMServer, spec: Any, message: str) -> None:
    llm.reply(spec)
    with pytest.raises(adapter.LLMError) as info:
        client(llm).chat([{"role": "user", "content": "hi"}])
    assert info.value.message == message
    assert len(llm.requests) == 1  # no retries


def test_network_error_and_timeout() -> None:
    url = closed_port_url()
    with pytest.raises(adapter.LLMError) as info:
        adapter.Client(url, "sk-1", "m", timeout=5).chat([])
    assert info.value.message.startswith("LLM network error: ConnectError: ")
    assert info.value.message.endswith(f"({url}/chat/completions)")
    with socket.socket() as sock:  # listens, never answers
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        slow = adapter.Client(url, "sk-1", "m", timeout=0.2, limit_hint="--my-flag")
        with pytest.raises(adapter.LLMError) as info:
            slow.list_models()
    assert info.value.message == (
        f"LLM request timed out after 0.2s: {url}/models (--my-flag sets the limit)"
    )


def test_timeout_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("UWF_LLM_TIMEOUT", raising=False)
    assert adapter.resolve_timeout(60) == 60
    monkeypatch.setenv("UWF_LLM_TIMEOUT", "2.5")
    assert adapter.resolve_timeout(60) == 2.5
    assert adapter.resolve_timeout(60, explicit=7) == 7  # an option wins
    monkeypatch.setenv("UWF_LLM_TIMEOUT", " ")
    assert adapter.resolve_timeout(60) == 60
    for bad in ("0", "-1", "nan", "inf", "soon"):
        monkeypatch.setenv("UWF_LLM_TIMEOUT", bad)
        with pytest.raises(InvalidInput) as info:
            adapter.resolve_timeout(60)
        assert info.value.message == (
            f"$UWF_LLM_TIMEOUT must be a positive number of seconds, got: {bad}"
        )


def test_importing_the_adapter_does_not_import_httpx() -> None:
    code = "import sys, uwf.adapters.llm; print('httpx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
