"""``<root>/config.yaml`` and ``<root>/.env`` (docs/format.md, "config.yaml and .env").

Only what a command needs is required: a missing or empty ``config.yaml`` is an empty
:class:`Config`, and a file with just ``agents`` and ``defaultAgent`` is enough to run threads
with ``uwf-mock`` or ``uwf-cmd``. Cross references (``defaultAgent`` naming an alias, a model
naming a provider, an API key in the environment) are checked when they are used, so a config
that is incomplete for the LLM extract still runs the commands that do not need one.

What the file may hold is its JSON Schema's to say (``uwf.config.schema``); a document it
refuses is one ``invalid config.yaml: <where>: <what>`` line, or a header and one line per
problem. API keys never appear in an error message or a ``repr``: only the name of the
variable that should hold one.
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from uwf.config.envfile import ENV_FILE as ENV_FILE  # .env lives in its own module
from uwf.config.envfile import ENV_LIMIT as ENV_LIMIT
from uwf.config.envfile import apply_dotenv as apply_dotenv
from uwf.config.envfile import env_path as env_path
from uwf.config.envfile import load_dotenv as load_dotenv
from uwf.util import yamlio
from uwf.util.errors import InvalidInput
from uwf.util.filememo import FileMemo
from uwf.util.root import CONFIG_FILE as CONFIG_FILE  # one name for the file, in util
from uwf.util.tuples import NamedTuple

_PREFIX = f"invalid {CONFIG_FILE}: "

_EMPTY: Mapping[str, Any] = MappingProxyType({})

#: The characters of the thread an agent is shown (task, history, edge prompt, a join's children
#: together: ``uwf.agent_kit.budget``): ``contextBudget``.
DEFAULT_CONTEXT_BUDGET = 32_000
DEFAULT_FAN_OUT_DEPTH = 3  # levels of children below a root (``fanOut.maxDepth``)
DEFAULT_FAN_OUT_THREADS = 1000  # threads one fan-out tree starts (``fanOut.maxThreads``)
DEFAULT_PRIORITY_AGING = 300  # seconds a thread waits per level it gains (``priorityAging``)
#: The largest file the agent kit stores as an artifact: ``artifactMaxBytes`` (10 MiB).
DEFAULT_ARTIFACT_MAX_BYTES = 10 * 1024 * 1024


class Provider(NamedTuple):
    """An OpenAI-compatible endpoint; the key lives in the env var ``api_key_env`` (None: the
    server needs no key, as a local Ollama)."""

    base_url: str
    api_key_env: str | None = None


class ModelAlias(NamedTuple):
    """A model alias: which provider serves it and the provider's model id."""

    provider: str
    name: str


class Agent(NamedTuple):
    """An agent alias: the executable and the arguments placed before ``<thread> <role>``;
    or, with ``python``, a Python agent run in uwf's own process (docs/api.md, "Python
    agents"), given the same arguments (``command`` is then empty)."""

    command: str
    args: tuple[str, ...] = ()
    provider: str | None = None  # the provider it calls, for fleet limits (``limits``)
    python: str | None = None  # ``package.module:attribute``, or an entry point's name


#: How the agent command of a Python agent starts (``python:<reference>``): what a plan's
#: ``argv[0]`` says, what ``--agent`` may name, what logs and failure records show.
PYTHON_PREFIX = "python:"


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
    models: Mapping[str, ModelAlias] = _EMPTY
    agents: Mapping[str, Agent] = _EMPTY
    default_agent: str | None = None
    agent_overrides: Mapping[str, Mapping[str, str]] = _EMPTY
    default_model: str | None = None
    model_overrides: Mapping[str, str] = _EMPTY
    agent_timeout: float | None = None
    max_rounds: int | None = None
    compact_after: int | None = None  # write a summary every N steps (docs/format.md)
    context_budget: int = DEFAULT_CONTEXT_BUDGET  # characters of the thread an agent is shown
    artifact_max_bytes: int = DEFAULT_ARTIFACT_MAX_BYTES  # largest file stored as an artifact
    # variables whose values are secrets: kept from what a model runs, redacted everywhere
    secrets: tuple[str, ...] = ()
    root: Path | None = None
    # whether role prompts embed the uwf CLI reference: cliReference, and per workflow and
    # role cliReferenceOverrides over it (docs/format.md, "config.yaml and .env")
    cli_reference: bool = True
    cli_reference_overrides: Mapping[str, Mapping[str, bool]] = _EMPTY
    # retry policies (docs/format.md, "Retries"), each {attempts?, backoff?, maxBackoff?}:
    # config-wide, and per workflow name ("retry") and role ("roles") of ``retryOverrides``
    retry: Mapping[str, float] = _EMPTY
    retry_overrides: Mapping[str, Mapping[str, Any]] = _EMPTY
    # fleet limits (docs/format.md, "Limits"): "agents"/"providers" -> name -> {concurrency?,
    # perMinute?}
    limits: Mapping[str, Mapping[str, Mapping[str, int]]] = _EMPTY
    priority_aging: int = DEFAULT_PRIORITY_AGING
    # how far one fan-out tree may grow (docs/format.md, "Fan-out and join"): levels of
    # children below its root, and threads it starts in all
    fan_out_depth: int = DEFAULT_FAN_OUT_DEPTH
    fan_out_threads: int = DEFAULT_FAN_OUT_THREADS
    # directories searched for workflow files by name (docs/format.md, "Workflow directories")
    workflow_paths: tuple[str, ...] = ()
    # whether steps start the filesystem store's automatic packing (docs/architecture.md)
    auto_pack: bool = True

    def wants_cli_reference(self, workflow: str, role: str) -> bool:
        """Whether the prompt of ``role`` in ``workflow`` embeds the uwf CLI reference."""
        found = self.cli_reference_overrides.get(workflow, _EMPTY).get(role)
        return self.cli_reference if found is None else found


def config_path(root: Path) -> Path:
    return root / CONFIG_FILE


# --------------------------------------------------------------------------------- loading


#: What each config.yaml parsed to, while the file is unchanged (``util.filememo``): a process
#: stepping in a loop reads the file at every step, and parses it again only after a change.
CONFIGS: FileMemo[Config] = FileMemo()


def load_config(root: Path) -> Config:
    """Read ``<root>/config.yaml``; a missing file is an empty config, never an error. Parsed
    and checked once per version of the file (``CONFIGS``): an edit is seen by the next call."""
    path = config_path(root)

    def parse(data: bytes) -> Config:
        if len(data) > yamlio.MAX_BYTES:  # more is refused by yamlio.load
            raise InvalidInput(f"{_PREFIX}{path} is too large: more than {yamlio.MAX_BYTES} bytes")
        try:
            raw = yamlio.load(data, source=CONFIG_FILE, path=path)
        except InvalidInput as exc:
            raise InvalidInput(_PREFIX + exc.message) from None
        return parse_config(raw, root=root)

    found = CONFIGS.load(path, parse, yamlio.MAX_BYTES)
    return found if found is not None else Config(root=root)


def parse_config(raw: Any, *, root: Path | None = None) -> Config:
    """Check a loaded ``config.yaml`` document against its JSON Schema (``uwf.config.schema``)
    and build a :class:`Config`; every problem is reported at once (InvalidInput)."""
    found = problems(raw)
    if found:
        raise _refusal(found)
    if raw is None:
        return Config(root=root)
    overrides = {
        str(workflow): MappingProxyType({str(role): alias for role, alias in roles.items()})
        for workflow, roles in _section(raw, "agentOverrides").items()
    }
    timeout = raw.get("agentTimeout")
    return Config(
        providers=_frozen(
            {
                n: Provider(e["baseUrl"], e.get("apiKeyEnv"))
                for n, e in _section(raw, "providers").items()
            }
        ),
        models=_frozen(
            {n: ModelAlias(e["provider"], e["name"]) for n, e in _section(raw, "models").items()}
        ),
        agents=_frozen(
            {
                n: Agent(
                    e.get("command") or "",
                    tuple(e.get("args") or ()),
                    e.get("provider"),
                    e.get("python"),
                )
                for n, e in _section(raw, "agents").items()
            }
        ),
        default_agent=raw.get("defaultAgent"),
        agent_overrides=_frozen(overrides),
        default_model=raw.get("defaultModel"),
        model_overrides=_frozen(_section(raw, "modelOverrides")),
        agent_timeout=float(timeout) if timeout is not None else None,
        max_rounds=_integer(raw, "maxRounds"),
        priority_aging=_integer(raw, "priorityAging") or DEFAULT_PRIORITY_AGING,
        fan_out_depth=_integer(_section(raw, "fanOut"), "maxDepth") or DEFAULT_FAN_OUT_DEPTH,
        fan_out_threads=(
            _integer(_section(raw, "fanOut"), "maxThreads") or DEFAULT_FAN_OUT_THREADS
        ),
        compact_after=_integer(raw, "compactAfter"),
        context_budget=_integer(raw, "contextBudget") or DEFAULT_CONTEXT_BUDGET,
        artifact_max_bytes=_integer(raw, "artifactMaxBytes") or DEFAULT_ARTIFACT_MAX_BYTES,
        secrets=tuple(raw.get("secrets") or ()),
        workflow_paths=tuple(raw.get("workflowPaths") or ()),
        root=root,
        cli_reference=raw.get("cliReference") is not False,
        auto_pack=raw.get("autoPack") is not False,
        cli_reference_overrides=_frozen(
            {
                str(workflow): MappingProxyType(
                    {str(role): bool(flag) for role, flag in roles.items()}
                )
                for workflow, roles in _section(raw, "cliReferenceOverrides").items()
            }
        ),
        retry=_policy(raw.get("retry")),
        limits=_frozen(
            {
                section: MappingProxyType(
                    {
                        str(name): MappingProxyType(
                            {k: int(v) for k, v in (entry or {}).items() if k in LIMIT_KEYS and v}
                        )
                        for name, entry in _section(raw.get("limits") or {}, section).items()
                    }
                )
                for section in ("agents", "providers")
            }
        ),
        retry_overrides=_frozen(
            {
                str(workflow): MappingProxyType(
                    {
                        "retry": _policy(entry.get("retry")),
                        "roles": MappingProxyType(
                            {str(r): _policy(p) for r, p in _section(entry, "roles").items()}
                        ),
                    }
                )
                for workflow, entry in _section(raw, "retryOverrides").items()
            }
        ),
    )


LIMIT_KEYS = ("concurrency", "perMinute")


def _policy(raw: Any) -> Mapping[str, float]:
    """The keys a retry policy sets (checked by the schema; null keys are unset)."""
    if not isinstance(raw, dict):
        return _EMPTY
    keys = ("attempts", "backoff", "maxBackoff")
    return MappingProxyType({k: raw[k] for k in keys if raw.get(k) is not None})


def configured_store(data: bytes) -> str | None:
    """The ``store:`` entry of ``config.yaml`` (its bytes), None if unset.

    Every command reads it, so only this key is checked: a wrong key the command does not use
    never stops it (``load_config`` checks the whole file where it is used)."""
    try:
        loaded = yamlio.load(data, source=CONFIG_FILE)
    except InvalidInput as exc:
        raise InvalidInput(_PREFIX + exc.message) from None
    value = loaded.get("store") if isinstance(loaded, dict) else None
    if value is None:
        return None
    from uwf.config.schema import STORE_ONLY

    found = problems({"store": value}, STORE_ONLY)
    if found:
        raise _refusal(found)
    return str(value).strip()


def problems(raw: Any, schema: dict[str, Any] | None = None) -> list[str]:
    """Every problem of a loaded ``config.yaml`` document, ``<where>: <what>`` (none: valid).

    The fast validator answers for a valid document, so a command pays no jsonschema import
    for reading its configuration; only a wrong one is worded by ``uwf.cas.schema``."""
    from uwf.cas import fastschema
    from uwf.config.schema import CONFIG

    schema = CONFIG if schema is None else schema
    found = []
    if fastschema.is_valid(schema, raw) is not True:
        from uwf.cas.schema import field_problems

        found = field_problems(schema, raw)
    agents = raw.get("agents") if isinstance(raw, dict) else None
    for name, entry in agents.items() if isinstance(agents, dict) else ():
        if isinstance(entry, dict) and "command" in entry and "python" in entry:
            found.append(
                f"agents.{name}: command and python cannot go together (a process, or a "
                "Python agent run in uwf's process)"
            )
    timeout = raw.get("agentTimeout") if isinstance(raw, dict) else None
    if isinstance(timeout, float) and not math.isfinite(timeout):  # JSON has no NaN to refuse
        from uwf.cas import wording

        what = wording.expected(CONFIG["properties"]["agentTimeout"])
        found.append(f"agentTimeout: expected {what}, got {wording.literal(timeout)}")
    return found


def _refusal(found: list[str]) -> InvalidInput:
    """``invalid config.yaml: <problem>``, or a header and one ``  - <problem>`` line each."""
    if len(found) == 1:
        return InvalidInput(_PREFIX + found[0])
    lines = [f"invalid {CONFIG_FILE}: {len(found)} problems", *(f"  - {line}" for line in found)]
    return InvalidInput("\n".join(lines))


def _section(raw: dict[Any, Any], key: str) -> dict[str, Any]:
    """A checked section of named entries (null: none), names as strings."""
    return {str(name): entry for name, entry in (raw.get(key) or {}).items()}


def _frozen(mapping: dict[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(mapping)


def _integer(raw: dict[Any, Any], key: str) -> int | None:
    value = raw.get(key)
    return int(value) if value is not None else None  # 2.0 is an integer to JSON Schema


# ---------------------------------------------------------------------------- resolution


def agent_command(
    config: Config, workflow_name: str, role: str, override: str | None = None
) -> list[str]:
    """The argv prefix of the agent for ``role``: ``--agent`` > agentOverrides > defaultAgent.

    ``override`` is a command line split like a shell would (quotes respected, no expansion).
    A single word that names an alias in ``agents`` means that alias, so ``--agent mock``
    works for ``agents: {mock: …}`` as well as for a command on PATH. A first word
    ``python:<reference>`` names a Python agent (``PYTHON_PREFIX``; docs/api.md).
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


def agent_alias(
    config: Config, workflow_name: str, role: str, override: str | None = None
) -> str | None:
    """The alias ``agent_command`` runs for ``role``, None for a command line given with
    ``--agent`` (which names no alias)."""
    if override is not None:
        words = override.split()
        return words[0] if len(words) == 1 and words[0] in config.agents else None
    return config.agent_overrides.get(workflow_name, _EMPTY).get(role) or config.default_agent


def _agent_argv(config: Config, alias: str) -> list[str]:
    agent = config.agents.get(alias)
    if agent is None:
        raise InvalidInput(f"unknown agent alias in config: {alias}")
    if agent.python is not None:
        return [PYTHON_PREFIX + agent.python, *agent.args]
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
