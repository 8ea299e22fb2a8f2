"""``<root>/config.yaml`` and ``<root>/.env`` (docs/format.md, "config.yaml and .env").

Only what a command needs is required: a missing or empty ``config.yaml`` is an empty
:class:`Config`, and a file with just ``agents`` and ``defaultAgent`` is enough to run threads
with ``uwf-mock`` or ``uwf-cmd``. Cross references (``defaultAgent`` naming an alias, a model
naming a provider, an API key in the environment) are checked when they are used, so a config
that is incomplete for the LLM extract still runs the commands that do not need one.

Every structural problem is one ``invalid config.yaml: …`` line. API keys never appear in an
error message or a ``repr``: only the name of the variable that should hold one.
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, NoReturn

from uwf.util import fsio, yamlio
from uwf.util.errors import InvalidInput, UwfError

CONFIG_FILE = "config.yaml"
ENV_FILE = ".env"
_PREFIX = f"invalid {CONFIG_FILE}: "

_EMPTY: Mapping[str, Any] = MappingProxyType({})

#: The characters of thread history (summary and steps) an agent is given: ``contextBudget``.
DEFAULT_CONTEXT_BUDGET = 32_000
#: The largest file the agent kit stores as an artifact: ``artifactMaxBytes`` (10 MiB).
DEFAULT_ARTIFACT_MAX_BYTES = 10 * 1024 * 1024


class Provider(NamedTuple):
    """An OpenAI-compatible endpoint; the key lives in the env var ``api_key_env`` (None: the
    server needs no key, as a local Ollama)."""

    base_url: str
    api_key_env: str | None = None


class Model(NamedTuple):
    """A model alias: which provider serves it and the provider's model id."""

    provider: str
    name: str


class Agent(NamedTuple):
    """An agent alias: the executable and the arguments placed before ``<thread> <role>``."""

    command: str
    args: tuple[str, ...] = ()


class ModelSpec(NamedTuple):
    """A resolved model: everything an OpenAI-compatible call needs (key hidden from repr)."""

    base_url: str
    api_key: str
    model: str

    def __repr__(self) -> str:  # the key never reaches a log or a traceback
        return f"ModelSpec(base_url={self.base_url!r}, model={self.model!r})"


class Config(NamedTuple):
    """The parsed ``config.yaml``; every section is optional and read-only."""

    providers: Mapping[str, Provider] = _EMPTY
    models: Mapping[str, Model] = _EMPTY
    agents: Mapping[str, Agent] = _EMPTY
    default_agent: str | None = None
    agent_overrides: Mapping[str, Mapping[str, str]] = _EMPTY
    default_model: str | None = None
    model_overrides: Mapping[str, str] = _EMPTY
    agent_timeout: float | None = None
    max_rounds: int | None = None
    compact_after: int | None = None  # write a summary every N steps (docs/format.md)
    context_budget: int = DEFAULT_CONTEXT_BUDGET  # characters of history an agent is given
    artifact_max_bytes: int = DEFAULT_ARTIFACT_MAX_BYTES  # largest file stored as an artifact
    # variables whose values are secrets: kept from what a model runs, redacted everywhere
    secrets: tuple[str, ...] = ()
    root: Path | None = None


def config_path(root: Path) -> Path:
    return root / CONFIG_FILE


def env_path(root: Path) -> Path:
    return root / ENV_FILE


# --------------------------------------------------------------------------------- loading


def load_config(root: Path) -> Config:
    """Read ``<root>/config.yaml``; a missing file is an empty config, never an error."""
    path = config_path(root)
    try:
        data = fsio.read_bytes(path)
    except OSError as exc:
        raise UwfError(f"cannot read {path}: {exc.strerror or exc}") from None
    if data is None:
        return Config(root=root)
    try:
        raw = yamlio.load(data, source=CONFIG_FILE, path=path)
    except InvalidInput as exc:
        raise InvalidInput(_PREFIX + exc.message) from None
    return parse_config(raw, root=root)


def parse_config(raw: Any, *, root: Path | None = None) -> Config:
    """Check the shape of a loaded ``config.yaml`` document and build a :class:`Config`.

    The first failing check wins; its message names the offending key path.
    """
    if raw is None:
        return Config(root=root)
    if not isinstance(raw, dict):
        _fail("root must be a mapping")
    providers = {
        name: Provider(
            base_url=_required_str(entry, "baseUrl", f"config.providers.{name}", "baseUrl"),
            api_key_env=_key_env(entry.get("apiKeyEnv"), f"config.providers.{name}"),
        )
        for name, entry in _section(raw, "providers").items()
    }
    models = {
        name: Model(
            provider=_required_str(entry, "provider", f"config.models.{name}", "provider and name"),
            name=_required_str(entry, "name", f"config.models.{name}", "provider and name"),
        )
        for name, entry in _section(raw, "models").items()
    }
    agents = {name: _agent(name, entry) for name, entry in _section(raw, "agents").items()}
    overrides: dict[str, Mapping[str, str]] = {}
    for workflow, roles in _mapping_or_null(raw, "agentOverrides").items():
        where = f"config.agentOverrides.{workflow}"
        if not isinstance(roles, dict):
            _fail(f"{where} must be a mapping of role to agent alias")
        overrides[str(workflow)] = MappingProxyType(
            {str(role): _alias(alias, f"{where}.{role}") for role, alias in roles.items()}
        )
    model_overrides = {
        str(scenario): _alias(alias, f"config.modelOverrides.{scenario}")
        for scenario, alias in _mapping_or_null(raw, "modelOverrides").items()
    }
    return Config(
        providers=MappingProxyType(providers),
        models=MappingProxyType(models),
        agents=MappingProxyType(agents),
        default_agent=_optional_alias(raw, "defaultAgent"),
        agent_overrides=MappingProxyType(overrides),
        default_model=_optional_alias(raw, "defaultModel"),
        model_overrides=MappingProxyType(model_overrides),
        agent_timeout=_agent_timeout(raw.get("agentTimeout")),
        max_rounds=_positive(raw.get("maxRounds"), "maxRounds"),
        compact_after=_positive(raw.get("compactAfter"), "compactAfter"),
        context_budget=_positive(raw.get("contextBudget"), "contextBudget")
        or DEFAULT_CONTEXT_BUDGET,
        artifact_max_bytes=_positive(raw.get("artifactMaxBytes"), "artifactMaxBytes")
        or DEFAULT_ARTIFACT_MAX_BYTES,
        secrets=_names(raw.get("secrets"), "secrets"),
        root=root,
    )


def _fail(message: str) -> NoReturn:
    raise InvalidInput(_PREFIX + message)


def _section(raw: dict[str, Any], key: str) -> dict[str, dict[str, Any]]:
    """A top-level mapping of name -> mapping (providers, models, agents); null = empty."""
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        _fail(f"config.{key} must be a mapping")
    out: dict[str, dict[str, Any]] = {}
    for name, entry in value.items():
        if not isinstance(entry, dict):
            _fail(f"config.{key}.{name} must be a mapping")
        out[str(name)] = entry
    return out


def _mapping_or_null(raw: dict[str, Any], key: str) -> dict[Any, Any]:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        _fail(f"config.{key} must be a mapping or null")
    return value


def _required_str(entry: dict[str, Any], key: str, where: str, needs: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        _fail(f"{where} requires {needs}")
    return str(value)


def _key_env(value: Any, where: str) -> str | None:
    """``apiKeyEnv``: the variable holding the key; absent for a server that needs none."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        _fail(f"{where}.apiKeyEnv must name an environment variable (or be left out)")
    return str(value)


def _agent(name: str, entry: dict[str, Any]) -> Agent:
    command = entry.get("command")
    if not isinstance(command, str) or not command.strip():
        _fail(f"config.agents.{name} requires command")
    args = entry.get("args")
    if args is None:
        args = []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        _fail(f"config.agents.{name}.args must be a list of strings")
    return Agent(command=str(command), args=tuple(args))


def _alias(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        _fail(f"{where} must be an alias (a non-empty string)")
    return str(value)


def _optional_alias(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    return _alias(value, f"config.{key}")


def _agent_timeout(value: Any) -> float | None:
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        _fail("config.agentTimeout must be a positive number of seconds")
    return float(value)


def _names(value: Any, key: str) -> tuple[str, ...]:
    """A list of environment variable names (``secrets``); null or absent: none."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(
        isinstance(v, str) and v and "=" not in v and "\0" not in v for v in value
    ):
        _fail(f"config.{key} must be a list of environment variable names")
    return tuple(value)


def _positive(value: Any, key: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        _fail(f"config.{key} must be a positive integer")
    return int(value)


# ---------------------------------------------------------------------------- resolution


def agent_command(
    config: Config, workflow_name: str, role: str, override: str | None = None
) -> list[str]:
    """The argv prefix of the agent for ``role``: ``--agent`` > agentOverrides > defaultAgent.

    ``override`` is a command line split like a shell would (quotes respected, no expansion).
    A single word that names an alias in ``agents`` means that alias, so ``--agent mock``
    works for ``agents: {mock: …}`` as well as for a command on PATH.
    """
    if override is not None:
        if not override.strip():
            raise InvalidInput("agent override must not be empty")
        try:
            argv = shlex.split(override)
        except ValueError as exc:
            raise InvalidInput(f"invalid agent command line: {exc}: {override}") from None
        if not argv or not argv[0]:
            raise InvalidInput("agent override must not be empty")
        if len(argv) == 1 and argv[0] in config.agents:
            return _agent_argv(config, argv[0])
        return argv
    alias = config.agent_overrides.get(workflow_name, _EMPTY).get(role) or config.default_agent
    if alias is None:
        raise InvalidInput("no agent configured: pass --agent or set defaultAgent in config.yaml")
    return _agent_argv(config, alias)


def _agent_argv(config: Config, alias: str) -> list[str]:
    agent = config.agents.get(alias)
    if agent is None:
        raise InvalidInput(f"unknown agent alias in config: {alias}")
    return [agent.command, *agent.args]


def extract_model_alias(config: Config) -> str | None:
    """The model for the LLM extract: modelOverrides.extract > models.extract > defaultModel."""
    return model_alias(config, "extract")


def model_alias(config: Config, purpose: str) -> str | None:
    """The model uwf itself uses for ``purpose`` (``extract``, ``compact``):
    modelOverrides.<purpose> > models.<purpose> > defaultModel; None when there is none."""
    override = config.model_overrides.get(purpose)
    if override:
        return override
    if purpose in config.models:
        return purpose
    return config.default_model


def resolve_model(config: Config, alias: str, env: Mapping[str, str] | None = None) -> ModelSpec:
    """Model alias -> provider -> API key (environment first, then ``<root>/.env``)."""
    model = config.models.get(alias)
    if model is None:
        raise InvalidInput(f"unknown model alias: {alias}")
    provider = config.providers.get(model.provider)
    if provider is None:
        raise InvalidInput(f'unknown provider "{model.provider}" for model "{alias}"')
    base_url = provider.base_url.rstrip("/")
    if provider.api_key_env is None:  # a server that needs no key (Ollama, llama.cpp…)
        return ModelSpec(base_url=base_url, api_key="", model=model.name)
    key = (os.environ if env is None else env).get(provider.api_key_env)
    if not key and env is None and config.root is not None:
        key = load_dotenv(config.root).get(provider.api_key_env)
    if not key:
        raise InvalidInput(f"missing API key env var: {provider.api_key_env}")
    return ModelSpec(base_url=base_url, api_key=key, model=model.name)


# ------------------------------------------------------------------------------------ .env


def load_dotenv(root: Path) -> dict[str, str]:
    """The ``KEY=VALUE`` pairs of ``<root>/.env`` (values literal: no ``${VAR}`` expansion)."""
    path = env_path(root)
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    try:
        values = dotenv_values(path, interpolate=False, encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UwfError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    return {k: v for k, v in values.items() if v is not None}


def apply_dotenv(root: Path) -> list[str]:
    """Put ``<root>/.env`` into ``os.environ`` without overriding; return the names set."""
    applied = []
    for key, value in load_dotenv(root).items():
        if key not in os.environ:
            os.environ[key] = value
            applied.append(key)
    return applied
