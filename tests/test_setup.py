"""`uwf setup` (docs/errors.md, "setup"; docs/format.md, "config.yaml and .env"), against a
local HTTP server."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import socket
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from hermes_home import hermes_missing_reason
from uwf.cli.setup import (
    NO_TERMINAL,
    PARTIAL,
    choose_model,
    choose_provider,
    interactive,
    model_menu,
    provider_menu,
)
from uwf.config.config import load_config, load_dotenv
from uwf.engine.local.setup import (
    PRESETS,
    chat_models,
    check_model,
    env_var_name,
    fetch_models,
    run_setup,
    write_env_var,
)
from uwf.util.errors import InvalidInput, UwfError

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
        "defaultAgent": "builtin",
        "validation": {"ok": True},
    }
    doc = yaml.safe_load((root / "config.yaml").read_text())
    assert doc == {
        "providers": {"my-proxy": {"baseUrl": provider.url, "apiKeyEnv": "MY_PROXY_API_KEY"}},
        "models": {"default": {"provider": "my-proxy", "name": "gpt-a"}},
        "defaultModel": "default",
        "agents": {"builtin": {"command": "uwf-builtin", "args": []}},
        "defaultAgent": "builtin",
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
        assert result.code == 1  # the failed check
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
    assert result.code == 1  # the check failed: a script must not go on as if it worked
    validation = result.json()["validation"]
    assert validation["ok"] is False
    assert validation["error"].startswith(f"LLM HTTP {status}: ")
    assert result.err.startswith(f"error: the model check failed: LLM HTTP {status}: ")
    assert result.err.endswith(" (the configuration was saved; run uwf setup again to change it)\n")
    # files are written even when the check fails
    assert (root / "config.yaml").is_file() and (root / ".env").is_file()


def test_model_check_unreachable(root: Path, cli: Any) -> None:
    result = cli(*setup_args(closed_port_url()))
    assert result.code == 1
    validation = result.json()["validation"]
    assert validation["ok"] is False
    assert validation["error"].startswith("LLM network error: ConnectError: ")
    assert (root / ".env").is_file()


def test_model_check_timeout(provider: FakeProvider) -> None:
    # A listening socket that never answers: the request times out.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        result = check_model(url, KEY, "m", timeout=0.3)
    assert result["ok"] is False
    assert result["error"].startswith("LLM request timed out after 0.3s")
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
        "error: invalid default agent: uwf-cmd -- claude (expected an agent alias or a command "
        "name; "
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
    with pytest.raises(UwfError, match=r"^the model check failed: LLM HTTP 401: "):
        interactive(None, ask=lambda t: next(answers), ask_secret=lambda t: KEY, say=said.append)
    text = "\n".join(said)
    assert "Could not fetch models. Enter model name manually." in text
    assert "⚠ Warning: Could not reach model — LLM HTTP 401: " in text
    assert load_config(root).models["default"].name == "my-model"


@pytest.mark.parametrize(
    ("answers", "secret", "message"),
    [
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


# -- a real terminal ---------------------------------------------------------------------------


@dataclass
class Terminal:
    """``uwf <args>`` on a pseudo-terminal (stdin, stdout and stderr a tty, as for a person):
    each answer is typed only once its whole prompt has appeared, as a person would (a hidden
    prompt turns echo off, and drops what was typed before, just before its last space)."""

    code: int
    screen: str


def in_terminal(args: list[str], answers: list[tuple[str, str]], timeout: float = 30) -> Terminal:
    exe = shutil.which("uwf", path=os.environ["PATH"])
    assert exe is not None
    pid, fd = pty.fork()
    if pid == 0:  # the child: exec at once (nothing else may run in a forked test process)
        os.execv(exe, [exe, *args])
    deadline = time.monotonic() + timeout
    screen = b""

    def read_until(text: str | None) -> None:
        nonlocal screen
        while text is None or text.encode() not in screen:
            left = deadline - time.monotonic()
            assert left > 0, f"no {text!r} on the terminal: {screen.decode(errors='replace')}"
            if select.select([fd], [], [], left)[0]:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:  # EIO: the child closed the terminal
                    chunk = b""
                if not chunk:
                    assert text is None, f"exited before {text!r}: {screen.decode()}"
                    return
                screen += chunk

    try:
        for prompt, answer in answers:
            read_until(prompt)
            os.write(fd, answer.encode() + b"\n")
        read_until(None)
    finally:
        os.close(fd)
        _, status = os.waitpid(pid, 0)
    return Terminal(os.waitstatus_to_exitcode(status), screen.decode(errors="replace"))


def custom_provider(url: str) -> list[tuple[str, str]]:
    """The answers for the custom provider ``local`` at ``url`` (a server on this machine, so
    its key may be left empty), up to the model."""
    return [
        ("Choose [1-14]: ", "14"),
        ("Provider name (e.g. my-proxy): ", "local"),
        ("OpenAI-compatible API base URL: ", url),
        ("API key (leave empty if the server needs none): ", KEY),
    ]


def test_interactive_in_a_real_process(root: Path, provider: FakeProvider) -> None:
    term = in_terminal(["setup"], [*custom_provider(provider.url), ("Default model [1-2]: ", "1")])
    assert term.code == 0, term.screen
    assert "Setup complete! Get started:" in term.screen
    assert KEY not in term.screen  # typed with hidden input: never echoed
    assert load_dotenv(root) == {"LOCAL_API_KEY": KEY}
    assert load_config(root).models["default"].name == "gpt-a"


def test_interactive_empty_model_in_a_real_process(root: Path, provider: FakeProvider) -> None:
    provider.models = []
    term = in_terminal(
        ["setup"],
        [*custom_provider(provider.url), ("Default model (e.g. qwen-plus, gpt-4o): ", "")],
    )
    assert term.code == 1
    assert term.screen.rstrip().endswith("error: Model required")
    assert not (root / "config.yaml").exists()


def test_an_invalid_menu_choice_asks_again(root: Path, provider: FakeProvider) -> None:
    """A typo at the provider menu used to end setup; it asks again, in a real terminal."""
    term = in_terminal(
        ["setup"],
        [
            ("Choose [1-14]: ", "x"),
            ("Invalid choice: x: type a number from 1 to 14", "99"),
            ("Invalid choice: 99: type a number from 1 to 14", "14"),
            *custom_provider(provider.url)[1:],
            ("Default model [1-2]: ", "1"),
        ],
    )
    assert term.code == 0, term.screen
    assert load_config(root).models["default"].name == "gpt-a"


def test_no_terminal_never_prompts(root: Path, cli_proc: Any) -> None:
    """Without a terminal (cron, CI, a pipe) missing answers are an error, not a prompt that
    would read the pipe as answers."""
    result = cli_proc("setup", input="1\nsk-should-not-be-read\ngpt-4o\n")
    assert (result.code, result.err) == (1, f"error: {NO_TERMINAL}\n")
    assert result.out == ""
    assert not root.exists()


# -- the default agent -------------------------------------------------------------------------


def test_default_agent_alone_changes_only_the_default_agent(
    root: Path, cli_proc: Any, provider: FakeProvider
) -> None:
    assert cli_proc(*setup_args(provider.url)).code == 0
    before = yaml.safe_load((root / "config.yaml").read_text())
    env_before = (root / ".env").read_bytes()
    result = cli_proc("setup", "--default-agent", "uwf-mock")
    assert result.code == 0, result.err
    assert result.json() == {"configPath": str(root / "config.yaml"), "defaultAgent": "uwf-mock"}
    after = yaml.safe_load((root / "config.yaml").read_text())
    assert after == {
        **before,
        "agents": {**before["agents"], "uwf-mock": {"command": "uwf-mock", "args": []}},
        "defaultAgent": "uwf-mock",
    }
    assert (root / ".env").read_bytes() == env_before
    assert len(provider.requests) == 1  # no model check: only the default agent changed
    # back to the shipped builtin agent, whose alias is already there
    assert cli_proc("setup", "--default-agent", "builtin").json()["defaultAgent"] == "builtin"
    assert yaml.safe_load((root / "config.yaml").read_text())["agents"] == after["agents"]


def test_a_default_agent_that_is_not_a_command_is_refused(root: Path, cli_proc: Any) -> None:
    """`--default-agent nosuch` used to be accepted: every step then failed to start it."""
    result = cli_proc("setup", "--default-agent", "nosuch-agent-xyz")
    assert (result.code, result.out) == (1, "")
    assert result.err == (
        "error: cannot use nosuch-agent-xyz as the default agent: no command nosuch-agent-xyz "
        "on PATH (name an alias of agents in config.yaml, builtin, hermes, or an installed "
        "command)\n"
    )
    assert not (root / "config.yaml").exists()


@pytest.fixture
def bare_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty HOME (no ~/.hermes), with no $HERMES_HOME, for every process of the test."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("HERMES_HOME", raising=False)
    return home


def test_hermes_must_be_installed(root: Path, cli_proc: Any, bare_home: Path) -> None:
    from support import BIN

    result = cli_proc(
        "setup", "--default-agent", "hermes", prog=str(BIN / "uwf"), env={"PATH": "/usr/bin:/bin"}
    )
    assert result.code == 1
    assert result.err == (
        "error: cannot use hermes as the default agent: the hermes command is not installed "
        "(pip install hermes-agent, or pip install 'uwf[hermes]'), then run `hermes setup`\n"
    )
    assert not (root / "config.yaml").exists()


@pytest.mark.skipif(hermes_missing_reason() is not None, reason=str(hermes_missing_reason()))
def test_hermes_must_be_configured(
    root: Path, cli_proc: Any, provider: FakeProvider, bare_home: Path
) -> None:
    result = cli_proc(*setup_args(provider.url, "--default-agent", "hermes"))
    assert result.code == 1
    assert result.err == (
        "error: cannot use hermes as the default agent: Hermes is not configured (no "
        f"config.yaml or .env in {bare_home / '.hermes'}): run `hermes setup`\n"
    )
    assert not (root / "config.yaml").exists() and not (root / ".env").exists()
    assert list(bare_home.iterdir()) == []  # Hermes was not run: it would create ~/.hermes
    (bare_home / ".hermes").mkdir()
    (bare_home / ".hermes" / "config.yaml").write_text("model: {default: m}\n")
    result = cli_proc("setup", "--default-agent", "hermes")
    assert result.code == 0, result.err
    doc = yaml.safe_load((root / "config.yaml").read_text())
    assert doc == {
        "agents": {"hermes": {"command": "uwf-hermes", "args": []}},
        "defaultAgent": "hermes",
    }


# -- servers that need no key --------------------------------------------------------------------


def test_ollama_preset_needs_no_key(root: Path, cli_proc: Any, provider: FakeProvider) -> None:
    result = cli_proc(
        "setup", "--provider", "ollama", "--base-url", provider.url, "--model", "llama3.2"
    )
    assert result.code == 0, result.err
    out = result.json()
    assert (out["envPath"], out["validation"]) == (None, {"ok": True})
    doc = yaml.safe_load((root / "config.yaml").read_text())
    assert doc["providers"] == {"ollama": {"baseUrl": provider.url}}
    assert not (root / ".env").exists()
    [check] = provider.requests
    assert "Authorization" not in check["headers"]
    # the preset also gives the base URL
    cli_proc("setup", "--provider", "ollama", "--model", "llama3.2")
    doc = yaml.safe_load((root / "config.yaml").read_text())
    assert doc["providers"]["ollama"] == {"baseUrl": "http://localhost:11434/v1"}


def test_key_is_optional_only_for_a_local_server(root: Path, cli_proc: Any) -> None:
    remote = cli_proc("setup", "--provider", "p", "--base-url", "https://api.example/v1",
                      "--model", "m")  # fmt: skip
    assert (remote.code, remote.err) == (1, f"error: {PARTIAL}\n")
    assert not root.exists()
    local = cli_proc("setup", "--provider", "p", "--base-url", closed_port_url(), "--model", "m")
    assert local.code == 1 and "error: the model check failed: " in local.err
    assert local.json()["validation"]["error"].startswith("LLM network error: ConnectError: ")
    assert "apiKeyEnv" not in yaml.safe_load((root / "config.yaml").read_text())["providers"]["p"]


def test_nothing_is_written_outside_the_storage_root(
    root: Path, cli_proc: Any, bare_home: Path, tmp_path: Path
) -> None:
    """Setup, a refused Hermes and a whole builtin step against a keyless local server: HOME
    stays empty, and only the storage root and the project directory change."""
    from llm_server import DEFAULT_MODEL, LLMServer
    from support import EXAMPLES, PLAN

    with LLMServer() as llm:
        llm.reply("ok", PLAN)  # the model check, then the planner's answer
        setup = cli_proc("setup", "--provider", "local", "--base-url", llm.base_url,
                         "--model", DEFAULT_MODEL)  # fmt: skip
        assert setup.code == 0, setup.err
        assert setup.json()["defaultAgent"] == "builtin"
        assert cli_proc("setup", "--default-agent", "hermes").code == 1
        assert cli_proc("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
        thread = cli_proc("thread", "start", "solve-issue", "-p", "x").json()["thread"]
        step = cli_proc("thread", "step", thread)
        assert step.code == 0, step.err
        assert step.json()["role"] == "planner"
        assert [r.headers.get("authorization") for r in llm.requests] == [None, None]
    assert list(bare_home.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "home", "root"]
    assert list((tmp_path / "cwd").iterdir()) == []
