"""`uwf setup` (REFERENCE §1.18, §7.3-§7.4, §8 "setup"), against a local HTTP server."""

from __future__ import annotations

import json
import socket
import stat
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from uwf.cli.setup import (
    PARTIAL,
    check_model,
    choose_model,
    choose_provider,
    fetch_models,
    interactive,
    model_menu,
    provider_menu,
)
from uwf.config.config import load_config, load_dotenv
from uwf.engine.setup import PRESETS, chat_models, env_var_name, run_setup, write_env_var
from uwf.util.errors import InvalidInput

KEY = "sk-test-SECRET-4f9a"


class FakeProvider:
    """An OpenAI-compatible endpoint on 127.0.0.1 that records every request."""

    def __init__(self) -> None:
        self.status = 200
        self.models: list[str] = ["gpt-b", "gpt-a", "text-embedding-3", "tts-1"]
        self.requests: list[dict[str, Any]] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _record(self, body: bytes | None) -> None:
                provider.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers),
                        "body": json.loads(body) if body else None,
                    }
                )

            def _reply(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                self._record(self.rfile.read(length))
                self._reply(provider.status, {"choices": [{"message": {"content": "h"}}]})

            def do_GET(self) -> None:
                self._record(None)
                self._reply(200, {"data": [{"id": m} for m in provider.models]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeProvider]:
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    fake = FakeProvider()
    yield fake
    fake.close()


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def setup_args(
    url: str, *extra: str, provider: str = "my-proxy", model: str = "gpt-a"
) -> list[str]:
    return [
        "setup",
        "--provider",
        provider,
        "--base-url",
        url,
        "--api-key",
        KEY,
        "--model",
        model,
        *extra,
    ]


# -- non-interactive ----------------------------------------------------------------------------


def test_non_interactive_writes_config_and_env(
    root: Path, cli: Any, provider: FakeProvider
) -> None:
    result = cli(*setup_args(provider.url))
    assert result.code == 0, result.err
    out = result.json()
    assert out == {
        "configPath": str(root / "config.yaml"),
        "envPath": str(root / ".env"),
        "provider": "my-proxy",
        "model": "gpt-a",
        "defaultAgent": "hermes",
        "validation": {"ok": True},
    }
    doc = yaml.safe_load((root / "config.yaml").read_text())
    assert doc == {
        "providers": {"my-proxy": {"baseUrl": provider.url, "apiKeyEnv": "MY_PROXY_API_KEY"}},
        "models": {"default": {"provider": "my-proxy", "name": "gpt-a"}},
        "agents": {"hermes": {"command": "uwf-hermes", "args": []}},
        "defaultAgent": "hermes",
        "defaultModel": "default",
    }
    assert KEY not in (root / "config.yaml").read_text()
    env = root / ".env"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    assert load_dotenv(root) == {"MY_PROXY_API_KEY": KEY}
    # and the result is a config every other command accepts
    assert load_config(root).models["default"].name == "gpt-a"


def test_key_is_never_printed(cli: Any, provider: FakeProvider) -> None:
    provider.status = 401
    for fmt in ("json", "yaml"):
        result = cli("--format", fmt, *setup_args(provider.url))
        assert result.code == 0
        assert KEY not in result.out and KEY not in result.err


def test_model_check_request(cli: Any, provider: FakeProvider) -> None:
    assert cli(*setup_args(provider.url + "/")).code == 0
    [request] = provider.requests
    assert request["method"] == "POST"
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {KEY}"
    assert request["headers"]["Content-Type"] == "application/json"
    assert request["body"] == {
        "model": "gpt-a",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 1,
    }


@pytest.mark.parametrize("status", [401, 404])
def test_model_check_http_error(root: Path, cli: Any, provider: FakeProvider, status: int) -> None:
    provider.status = status
    result = cli(*setup_args(provider.url))
    assert result.code == 0
    validation = result.json()["validation"]
    assert validation["ok"] is False
    assert validation["error"].startswith(f"HTTP {status} ")
    # files are written even when the check fails
    assert (root / "config.yaml").is_file() and (root / ".env").is_file()


def test_model_check_unreachable(root: Path, cli: Any) -> None:
    result = cli(*setup_args(closed_port_url()))
    assert result.code == 0
    validation = result.json()["validation"]
    assert validation["ok"] is False
    assert validation["error"].startswith("Network error — could not reach endpoint (")
    assert (root / ".env").is_file()


def test_model_check_timeout(provider: FakeProvider) -> None:
    # A listening socket that never answers: the request times out.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        result = check_model(url, KEY, "m", timeout=0.3)
    assert result["ok"] is False
    assert result["error"].startswith("Request timed out after 0.3s")
    assert KEY not in result["error"]


@pytest.mark.parametrize(
    "flags",
    [
        ["--provider", "p"],
        ["--provider", "p", "--base-url", "http://x", "--api-key", "k"],
        ["--model", "m", "--agent", "a"],
        ["--api-key", "k"],
    ],
)
def test_partial_flags(root: Path, cli: Any, flags: list[str]) -> None:
    result = cli("setup", *flags)
    assert result.code == 1
    assert result.err == f"error: {PARTIAL}\n"
    assert (
        PARTIAL
        == "Non-interactive setup requires all of: --provider, --base-url, --api-key, --model"
    )
    assert result.out == ""
    assert not root.exists()


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("--provider", " ", "Provider name required"),
        ("--base-url", "", "Base URL required"),
        ("--api-key", "", "API key required"),
        ("--model", "", "Model required"),
        ("--base-url", "ftp://x", "invalid base URL: ftp://x (expected http:// or https://…)"),
    ],
)
def test_empty_values(root: Path, cli: Any, field: str, value: str, message: str) -> None:
    values = {"--provider": "p", "--base-url": "http://x", "--api-key": KEY, "--model": "m"}
    values[field] = value
    result = cli("setup", *[x for kv in values.items() for x in kv])
    assert (result.code, result.err) == (1, f"error: {message}\n")
    assert not root.exists()


def test_merge_preserves_other_settings(root: Path, provider: FakeProvider) -> None:
    root.mkdir(parents=True)
    (root / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "providers": {"old": {"baseUrl": "http://old", "apiKeyEnv": "OLD_API_KEY"}},
                "models": {
                    "default": {"provider": "old", "name": "m0"},
                    "x": {"provider": "old", "name": "m1"},
                },
                "agents": {"mock": {"command": "uwf-mock", "args": []}},
                "defaultAgent": "mock",
                "defaultModel": "x",
                "maxRounds": 7,
                "custom": {"keep": True},
            }
        )
    )
    (root / ".env").write_text("# my keys\nOLD_API_KEY=old\nMY_PROXY_API_KEY=stale\n")
    (root / ".env").chmod(0o644)
    result = run_setup(root, provider="my-proxy", base_url=provider.url, api_key=KEY, model="gpt-b")
    assert result["defaultAgent"] == "mock"
    doc = yaml.safe_load((root / "config.yaml").read_text())
    assert set(doc["providers"]) == {"old", "my-proxy"}
    assert doc["models"]["default"] == {"provider": "my-proxy", "name": "gpt-b"}
    assert doc["models"]["x"] == {"provider": "old", "name": "m1"}
    assert doc["agents"] == {"mock": {"command": "uwf-mock", "args": []}}
    assert (doc["defaultAgent"], doc["defaultModel"], doc["maxRounds"]) == ("mock", "x", 7)
    assert doc["custom"] == {"keep": True}
    text = (root / ".env").read_text()
    assert text == f"# my keys\nOLD_API_KEY=old\nMY_PROXY_API_KEY={KEY}\n"
    assert stat.S_IMODE((root / ".env").stat().st_mode) == 0o600


def test_agent_flag_sets_default_and_adds_command_alias(
    root: Path, cli: Any, provider: FakeProvider
) -> None:
    result = cli(*setup_args(provider.url, "--agent", "uwf-mock"))
    assert result.json()["defaultAgent"] == "uwf-mock"
    doc = yaml.safe_load((root / "config.yaml").read_text())
    assert doc["agents"] == {"uwf-mock": {"command": "uwf-mock", "args": []}}
    # an existing alias is used as is, and replaces an existing defaultAgent
    doc["agents"]["claude"] = {"command": "uwf-cmd", "args": ["--", "claude", "-p"]}
    (root / "config.yaml").write_text(yaml.safe_dump(doc))
    result = cli(*setup_args(provider.url, "--agent", "claude"))
    assert result.json()["defaultAgent"] == "claude"
    doc = yaml.safe_load((root / "config.yaml").read_text())
    assert doc["agents"]["claude"] == {"command": "uwf-cmd", "args": ["--", "claude", "-p"]}
    assert doc["defaultAgent"] == "claude"


def test_agent_flag_must_be_alias_or_command(root: Path, cli: Any) -> None:
    result = cli(*setup_args("http://127.0.0.1:9/v1", "--agent", "uwf-cmd -- claude"))
    assert result.code == 1
    assert result.err_line == (
        "error: invalid --agent: uwf-cmd -- claude (expected an agent alias or a command name; "
        "put arguments under agents in config.yaml)"
    )
    assert not (root / ".env").exists()


def test_invalid_existing_config_is_not_overwritten(root: Path, cli: Any) -> None:
    root.mkdir(parents=True)
    (root / "config.yaml").write_text("agents: [broken\n")
    result = cli(*setup_args("http://127.0.0.1:9/v1"))
    assert result.code == 1
    assert result.err_line.startswith("error: invalid config.yaml: invalid YAML: ")
    assert (root / "config.yaml").read_text() == "agents: [broken\n"
    assert not (root / ".env").exists()


def test_api_key_from_stdin(root: Path, cli_proc: Any, provider: FakeProvider) -> None:
    args = setup_args(provider.url)
    args[args.index(KEY)] = "-"
    result = cli_proc(*args, input=KEY + "\n")
    assert result.code == 0, result.err
    assert load_dotenv(root) == {"MY_PROXY_API_KEY": KEY}
    assert provider.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    assert KEY not in result.out + result.err


@pytest.mark.parametrize("value", ["plain", "with space", "q'uote\"s", "back\\slash#hash", "$HOME"])
def test_env_values_round_trip(root: Path, value: str) -> None:
    root.mkdir(parents=True)
    write_env_var(root / ".env", "K", value)
    assert load_dotenv(root) == {"K": value}


def test_env_var_name() -> None:
    assert env_var_name("openai") == "OPENAI_API_KEY"
    assert env_var_name("my-proxy.v2") == "MY_PROXY_V2_API_KEY"


# -- interactive ---------------------------------------------------------------------------------


def test_provider_menu() -> None:
    lines = provider_menu()
    assert len(PRESETS) == 13 and len(lines) == 14
    for preset, line in zip(PRESETS, lines, strict=False):
        assert preset.label in line and line.endswith(preset.base_url)
    assert lines[0].startswith("   1) OpenAI ")
    assert lines[-1] == "  14) Custom (enter name and URL manually)"
    assert choose_provider("2") == PRESETS[1]
    assert choose_provider("14") is None
    for bad in ("0", "15", "x", ""):
        with pytest.raises(InvalidInput, match=f"^Invalid choice: {bad}$"):
            choose_provider(bad)


def test_model_menu_and_choice() -> None:
    models = chat_models(["b-chat", "a-chat", "text-embedding-3", "tts-1", "wanx-v1", "a-chat"])
    assert models == ["a-chat", "b-chat"]
    one_column = model_menu(models, 1)
    assert one_column == ["  1) a-chat", "  2) b-chat"]
    wide = model_menu(models, 200)
    assert len(wide) == 1 and "a-chat" in wide[0] and "b-chat" in wide[0]
    assert choose_model("2", models) == "b-chat"
    assert choose_model("3", models) == "3"
    assert choose_model("gpt-x", models) == "gpt-x"


def test_fetch_models(provider: FakeProvider) -> None:
    assert fetch_models(provider.url, KEY) == ["gpt-a", "gpt-b"]
    assert provider.requests[0]["path"] == "/v1/models"
    assert fetch_models(closed_port_url(), KEY) == []


def test_interactive_custom_provider(root: Path, provider: FakeProvider) -> None:
    answers = iter(["14", "local", provider.url, "2"])
    said: list[str] = []
    interactive(
        None,
        ask=lambda text: next(answers),
        ask_secret=lambda text: KEY,
        say=said.append,
    )
    text = "\n".join(said)
    assert "Select a provider:" in text and "Available models (2):" in text
    assert "  → local/gpt-b" in text and "✓" in text
    assert KEY not in text
    assert load_config(root).models["default"].name == "gpt-b"
    assert load_dotenv(root) == {"LOCAL_API_KEY": KEY}


def test_interactive_warns_when_model_check_fails(root: Path, provider: FakeProvider) -> None:
    provider.status = 401
    provider.models = []
    answers = iter(["14", "local", provider.url, "my-model"])
    said: list[str] = []
    interactive(None, ask=lambda t: next(answers), ask_secret=lambda t: KEY, say=said.append)
    text = "\n".join(said)
    assert "Could not fetch models. Enter model name manually." in text
    assert "⚠ Warning: Could not reach model — HTTP 401 Unauthorized" in text
    assert load_config(root).models["default"].name == "my-model"


@pytest.mark.parametrize(
    ("answers", "secret", "message"),
    [
        (["x"], KEY, "Invalid choice: x"),
        (["14", ""], KEY, "Provider name required"),
        (["14", "p", ""], KEY, "Base URL required"),
        (["1"], "", "API key required"),
    ],
)
def test_interactive_errors(root: Path, answers: list[str], secret: str, message: str) -> None:
    it = iter(answers)
    with pytest.raises(InvalidInput, match=f"^{message}$"):
        interactive(None, ask=lambda t: next(it), ask_secret=lambda t: secret, say=lambda s: None)
    assert not (root / "config.yaml").exists()


def test_interactive_in_a_real_process(root: Path, cli_proc: Any, provider: FakeProvider) -> None:
    result = cli_proc("setup", input=f"14\nlocal\n{provider.url}\n{KEY}\n1\n")
    assert result.code == 0, result.err
    assert "Choose [1-14]: " in result.out
    assert "Setup complete! Get started:" in result.out
    assert KEY not in result.out and KEY not in result.err
    assert load_dotenv(root) == {"LOCAL_API_KEY": KEY}
    assert load_config(root).models["default"].name == "gpt-a"


def test_interactive_empty_model_in_a_real_process(cli_proc: Any, provider: FakeProvider) -> None:
    result = cli_proc("setup", input=f"14\nlocal\n{provider.url}\n{KEY}\n\n")
    assert (result.code, result.err_line) == (1, "error: Model required")
