"""config.yaml and .env: loader errors, agent and model resolution (docs/format.md,
"config.yaml and .env")."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from uwf.cas import fastschema
from uwf.config.config import (
    Config,
    agent_command,
    apply_dotenv,
    extract_model_alias,
    load_config,
    load_dotenv,
    parse_config,
    resolve_model,
)
from uwf.config.schema import CONFIG
from uwf.util.errors import InvalidInput

FULL: dict[str, Any] = {
    "providers": {"openai": {"baseUrl": "https://api.example.com/v1/", "apiKeyEnv": "OAI_KEY"}},
    "models": {
        "default": {"provider": "openai", "name": "gpt-x"},
        "extract": {"provider": "openai", "name": "gpt-small"},
        "cheap": {"provider": "openai", "name": "gpt-tiny"},
    },
    "agents": {
        "mock": {"command": "uwf-mock", "args": ["--scenario", "s.yaml"]},
        "claude": {"command": "uwf-cmd", "args": ["--", "claude", "-p"]},
    },
    "defaultAgent": "mock",
    "agentOverrides": {"review": {"reviewer": "claude"}},
    "defaultModel": "default",
    "agentTimeout": 90,
    "maxRounds": 12,
}


def raises_exactly(message: str) -> Any:
    """pytest.raises for an InvalidInput whose whole message is ``message``."""
    return pytest.raises(InvalidInput, match=f"^{re.escape(message)}$")


def write_config(root: Path, doc: Any) -> None:
    root.mkdir(parents=True, exist_ok=True)
    text = doc if isinstance(doc, str) else yaml.safe_dump(doc)
    (root / "config.yaml").write_text(text)


def load_error(root: Path, doc: Any) -> str:
    write_config(root, doc)
    with pytest.raises(InvalidInput) as info:
        load_config(root)
    return info.value.message


# -- loading --------------------------------------------------------------------------------


def test_missing_file_is_an_empty_config(root: Path) -> None:
    config = load_config(root)
    assert config == Config(root=root)
    assert not config.agents and config.default_agent is None and config.max_rounds is None


def test_empty_file_is_an_empty_config(root: Path) -> None:
    write_config(root, "")
    assert load_config(root) == Config(root=root)


def test_a_python_agent_alias_runs_as_python_colon_its_reference(root: Path) -> None:
    """An alias with ``python:`` is a Python agent (docs/api.md): its agent command is
    ``python:<reference>`` and its arguments, as ``--agent python:…`` may say too."""
    write_config(
        root,
        {
            "agents": {"mock": {"python": "uwf-mock", "args": ["--scenario", "s.yaml"]}},
            "defaultAgent": "mock",
        },
    )
    config = load_config(root)
    assert config.agents["mock"].python == "uwf-mock" and config.agents["mock"].command == ""
    assert agent_command(config, "wf", "planner") == ["python:uwf-mock", "--scenario", "s.yaml"]
    assert agent_command(config, "wf", "planner", "python:pkg.mod:fn --x") == [
        "python:pkg.mod:fn",
        "--x",
    ]


def test_agents_and_default_agent_are_enough(root: Path) -> None:
    write_config(root, {"agents": {"mock": {"command": "uwf-mock"}}, "defaultAgent": "mock"})
    config = load_config(root)
    assert config.agents["mock"].command == "uwf-mock"
    assert config.agents["mock"].args == ()
    assert config.default_agent == "mock"
    assert config.providers == {} and config.models == {} and config.default_model is None


def test_full_config_is_parsed(root: Path) -> None:
    write_config(root, FULL)
    config = load_config(root)
    assert config.providers["openai"].api_key_env == "OAI_KEY"
    assert config.models["cheap"].name == "gpt-tiny"
    assert config.agents["claude"].args == ("--", "claude", "-p")
    assert config.agent_overrides == {"review": {"reviewer": "claude"}}
    assert config.agent_timeout == 90.0
    assert config.max_rounds == 12


def test_config_is_read_only(root: Path) -> None:
    write_config(root, FULL)
    config = load_config(root)
    with pytest.raises(TypeError):
        config.agents["x"] = config.agents["mock"]  # type: ignore[index]
    with pytest.raises(AttributeError):
        config.default_agent = "claude"  # type: ignore[misc]


def test_invalid_yaml(root: Path) -> None:
    message = load_error(root, "agents: [unclosed\n")
    assert message.startswith("invalid config.yaml: invalid YAML: ")
    where = f'in "{root / "config.yaml"}", line 2, column 1'  # the file, not "<byte string>"
    assert where in message and "<byte string>" not in message


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("- a\n- b\n", "expected a mapping of settings, got a list"),
        (
            {"providers": []},
            "providers: expected a mapping of provider name -> {baseUrl, apiKeyEnv}, got a list",
        ),
        (
            {"providers": {"p": "x"}},
            "providers.p: expected a mapping {baseUrl, apiKeyEnv}, got a string",
        ),
        ({"providers": {"p": {"apiKeyEnv": "K"}}}, "providers.p.baseUrl: missing (expected a URL)"),
        (
            {"providers": {"p": {"baseUrl": "u", "apiKeyEnv": 3}}},
            "providers.p.apiKeyEnv: expected the name of an environment variable, got an integer",
        ),
        (
            {"models": 3},
            "models: expected a mapping of model alias -> {provider, name}, got an integer",
        ),
        ({"models": {"m": []}}, "models.m: expected a mapping {provider, name}, got a list"),
        ({"models": {"m": {"name": "x"}}}, "models.m.provider: missing (expected a provider name)"),
        (
            {"agents": "uwf-mock"},
            "agents: expected a mapping of agent alias -> {command, args} or {python, args}, got a "
            "string",
        ),
        (
            {"agents": {"a": "uwf-mock"}},
            "agents.a: expected a mapping {command, args} or {python, args}, got a string",
        ),
        ({"agents": {"a": {"args": []}}}, "agents.a.command: missing (expected a command)"),
        (
            {"agents": {"a": {"python": ""}}},
            "agents.a.python: expected a Python agent (package.module:function, or an entry "
            'point\'s name), got ""',
        ),
        (
            {"agents": {"a": {"command": "x", "python": "m:f"}}},
            "agents.a: command and python cannot go together (a process, or a Python agent "
            "run in uwf's process)",
        ),
        ({"agents": {"a": {"command": 5}}}, "agents.a.command: expected a command, got an integer"),
        ({"agents": {"a": {"command": " "}}}, 'agents.a.command: expected a command, got " "'),
        (
            {"agents": {"a": {"command": "x", "args": "y"}}},
            "agents.a.args: expected a list of strings, got a string",
        ),
        (
            {"agents": {"a": {"command": "x", "args": [1]}}},
            "agents.a.args[0]: expected a string, got an integer",
        ),
        (
            {"agentOverrides": []},
            "agentOverrides: expected a mapping of workflow name -> role -> agent alias, "
            "got a list",
        ),
        (
            {"agentOverrides": {"wf": "a"}},
            "agentOverrides.wf: expected a mapping of role -> agent alias, got a string",
        ),
        (
            {"agentOverrides": {"wf": {"r": 1}}},
            "agentOverrides.wf.r: expected an alias (a non-empty string), got an integer",
        ),
        (
            {"modelOverrides": "x"},
            "modelOverrides: expected a mapping of purpose -> model alias, got a string",
        ),
        (
            {"defaultAgent": ["a"]},
            "defaultAgent: expected an alias (a non-empty string), got a list",
        ),
        ({"defaultModel": ""}, 'defaultModel: expected an alias (a non-empty string), got ""'),
        ({"agentTimeout": 0}, "agentTimeout: expected a positive number of seconds, got 0"),
        (
            {"agentTimeout": "10"},
            "agentTimeout: expected a positive number of seconds, got a string",
        ),
        (
            {"agentTimeout": True},
            "agentTimeout: expected a positive number of seconds, got a boolean",
        ),
        (  # refused as the file is read, before the schema (uwf.util.yamlio)
            {"agentTimeout": float("nan")},
            "invalid YAML: agentTimeout: .nan is not a finite number (NaN and infinities are "
            "refused)",
        ),
        (
            {"agentTimeout": float("inf")},
            "invalid YAML: agentTimeout: .inf is not a finite number (NaN and infinities are "
            "refused)",
        ),
        ({"maxRounds": 1.5}, "maxRounds: expected a positive integer, got a number"),
        ({"maxRounds": -1}, "maxRounds: expected a positive integer, got -1"),
        ({"artifactMaxBytes": 0}, "artifactMaxBytes: expected a positive integer, got 0"),
        ({"store": 3}, "store: expected a URL or a directory, got an integer"),
        (
            {"defaultAgent": "  ", "maxRounds": 0, "agents": {"a": {}}},
            "3 problems\n"  # top to bottom of the file (safe_dump sorts the keys)
            "  - agents.a.command: missing (expected a command)\n"
            '  - defaultAgent: expected an alias (a non-empty string), got "  "\n'
            "  - maxRounds: expected a positive integer, got 0",
        ),
    ],
)
def test_loader_errors(root: Path, doc: Any, message: str) -> None:
    assert load_error(root, doc) == f"invalid config.yaml: {message}"


def test_every_key_of_the_schema_is_documented() -> None:
    """docs/format.md's table of config.yaml keys and the schema name the same keys."""
    text = (Path(__file__).parent.parent / "docs" / "format.md").read_text()
    table = text.split("### config.yaml and .env", 1)[1].split("References between keys", 1)[0]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    keys = {key for cell in first_cells for key in re.findall(r"`(\w+)`", cell)}
    assert keys == set(CONFIG["properties"])


def test_the_whole_schema_is_in_the_fast_validators_subset() -> None:
    """A valid config.yaml is checked without importing jsonschema (every command reads it)."""
    assert fastschema.supported(CONFIG) and fastschema.is_valid(CONFIG, FULL) is True


def test_an_integral_number_is_an_integer(root: Path) -> None:
    write_config(root, {"maxRounds": 2.0, "agentTimeout": 1.5})
    config = load_config(root)
    assert (config.max_rounds, config.agent_timeout) == (2, 1.5)
    assert isinstance(config.max_rounds, int)


def test_null_sections_are_empty(root: Path) -> None:
    write_config(root, {"agentOverrides": None, "modelOverrides": None, "agents": None})
    config = load_config(root)
    assert config.agent_overrides == {} and config.model_overrides == {} and config.agents == {}


def test_unknown_keys_are_kept_out_of_the_way(root: Path) -> None:
    write_config(root, {"agents": {"m": {"command": "x"}}, "futureSetting": {"a": 1}})
    assert load_config(root).agents["m"].command == "x"


# -- agent resolution -------------------------------------------------------------------------


def test_agent_resolution_order() -> None:
    config = parse_config(FULL)
    # defaultAgent
    assert agent_command(config, "other", "planner", None) == ["uwf-mock", "--scenario", "s.yaml"]
    # agentOverrides[workflow][role] beats defaultAgent
    assert agent_command(config, "review", "reviewer", None) == ["uwf-cmd", "--", "claude", "-p"]
    assert agent_command(config, "review", "planner", None)[0] == "uwf-mock"
    # --agent beats both
    assert agent_command(config, "review", "reviewer", "my-agent --fast") == ["my-agent", "--fast"]


def test_agent_override_is_split_like_a_shell() -> None:
    argv = agent_command(Config(), "wf", "r", """uwf-cmd -- claude -p "two words" 'a "b"'""")
    assert argv == ["uwf-cmd", "--", "claude", "-p", "two words", 'a "b"']


def test_agent_override_single_word_alias_means_the_alias() -> None:
    config = parse_config(FULL)
    assert agent_command(config, "wf", "r", "claude") == ["uwf-cmd", "--", "claude", "-p"]
    assert agent_command(config, "wf", "r", "uwf-other") == ["uwf-other"]


@pytest.mark.parametrize("override", ["", "   ", "''"])
def test_agent_override_blank(override: str) -> None:
    with raises_exactly("agent override must not be empty"):
        agent_command(parse_config(FULL), "wf", "r", override)


def test_agent_override_unbalanced_quotes() -> None:
    with pytest.raises(InvalidInput) as info:
        agent_command(Config(), "wf", "r", 'uwf-cmd "unclosed')
    assert (
        info.value.message == 'invalid agent command line: No closing quotation: uwf-cmd "unclosed'
    )


def test_unknown_agent_alias() -> None:
    config = parse_config({"agents": {"a": {"command": "x"}}, "defaultAgent": "ghost"})
    with raises_exactly("unknown agent alias in config: ghost"):
        agent_command(config, "wf", "r", None)
    config = parse_config(
        {
            "agents": {"a": {"command": "x"}},
            "defaultAgent": "a",
            "agentOverrides": {"wf": {"r": "b"}},
        }
    )
    with raises_exactly("unknown agent alias in config: b"):
        agent_command(config, "wf", "r", None)


def test_no_agent_configured() -> None:
    with pytest.raises(InvalidInput) as info:
        agent_command(Config(), "wf", "r", None)
    assert info.value.message == (
        "no agent configured: pass --agent or set defaultAgent in config.yaml"
    )


def test_cli_reports_invalid_config_once(root: Path, cli: Any) -> None:
    """A bad config.yaml surfaces as one `error:` line through the real entry point."""
    write_config(root, {"agents": {"a": {"args": []}}})
    result = cli(
        "setup", "--provider", "p", "--base-url", "http://x", "--api-key", "k", "--model", "m"
    )
    assert result.code == 1
    assert result.err_line == (
        "error: invalid config.yaml: agents.a.command: missing (expected a command) "
        f"(fix or remove {root / 'config.yaml'})"
    )
    assert result.err.count("error:") == 1


# -- models -----------------------------------------------------------------------------------


def test_extract_model_alias_order() -> None:
    doc = dict(FULL, modelOverrides={"extract": "cheap"})
    assert extract_model_alias(parse_config(doc)) == "cheap"
    assert extract_model_alias(parse_config(FULL)) == "extract"
    without_extract = dict(FULL, models={"default": FULL["models"]["default"]})
    assert extract_model_alias(parse_config(without_extract)) == "default"
    assert extract_model_alias(parse_config(dict(without_extract, defaultModel="zzz"))) == "zzz"
    assert extract_model_alias(Config()) is None


def test_resolve_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OAI_KEY", "sk-env")
    spec = resolve_model(parse_config(FULL), "cheap")
    assert (spec.base_url, spec.api_key, spec.model) == (
        "https://api.example.com/v1",
        "sk-env",
        "gpt-tiny",
    )
    assert "sk-env" not in repr(spec)


def test_resolve_model_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OAI_KEY", raising=False)
    config = parse_config(
        dict(FULL, models={**FULL["models"], "lost": {"provider": "nope", "name": "m"}})
    )
    with raises_exactly("unknown model alias: ghost"):
        resolve_model(config, "ghost")
    with raises_exactly('unknown provider "nope" for model "lost"'):
        resolve_model(config, "lost")
    with raises_exactly("missing API key env var: OAI_KEY"):
        resolve_model(config, "default")


def test_provider_without_a_key() -> None:
    """A local server (Ollama, llama.cpp) needs no key: no ``apiKeyEnv``, an empty key."""
    config = parse_config(
        {
            "providers": {"ollama": {"baseUrl": "http://localhost:11434/v1/"}},
            "models": {"default": {"provider": "ollama", "name": "llama3.2"}},
        }
    )
    assert config.providers["ollama"].api_key_env is None
    spec = resolve_model(config, "default")
    assert (spec.base_url, spec.api_key, spec.model) == (
        "http://localhost:11434/v1",
        "",
        "llama3.2",
    )


def test_resolve_model_reads_dotenv(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OAI_KEY", raising=False)
    write_config(root, FULL)
    (root / ".env").write_text("OAI_KEY=sk-from-file\n")
    assert resolve_model(load_config(root), "default").api_key == "sk-from-file"
    assert "OAI_KEY" not in os.environ  # resolving does not leak into the environment


# -- .env ---------------------------------------------------------------------------------------


def test_load_dotenv(root: Path) -> None:
    assert load_dotenv(root) == {}
    root.mkdir(parents=True)
    (root / ".env").write_text("# comment\nA=1\nexport B='x y'\nC=\"q\"\nD=${A}\n\n")
    assert load_dotenv(root) == {"A": "1", "B": "x y", "C": "q", "D": "${A}"}


def test_apply_dotenv_never_overrides(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root.mkdir(parents=True)
    (root / ".env").write_text("UWF_T_SET=from-file\nUWF_T_NEW=new\n")
    monkeypatch.setenv("UWF_T_SET", "from-env")
    monkeypatch.delenv("UWF_T_NEW", raising=False)
    try:
        assert apply_dotenv(root) == ["UWF_T_NEW"]
        assert os.environ["UWF_T_SET"] == "from-env"
        assert os.environ["UWF_T_NEW"] == "new"
    finally:
        os.environ.pop("UWF_T_NEW", None)
