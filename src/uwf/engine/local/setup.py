"""`uwf setup`: merge a provider and a model into ``config.yaml`` and the key into ``.env``.

* an unreadable or invalid existing ``config.yaml`` is refused instead of silently replaced;
* the merged document is checked with the same parser every command uses, so setup never
  writes a config that a later command would reject;
* the default agent is ``uwf-builtin`` (alias ``builtin``) unless the user chose one, or the
  config already names one; a chosen ``X`` always becomes ``defaultAgent``: an alias as is,
  ``builtin``/``hermes`` as the shipped agent, else a plain command name on PATH added as
  ``agents.X = {command: X, args: []}``; choosing Hermes first checks that it is installed
  and configured (:func:`hermes_problem`), without running it;
* a provider that needs no key (the Ollama preset, a server on this machine) is written
  without ``apiKeyEnv`` and nothing goes to ``.env``;
* ``.env`` keeps its other lines (comments included) and is created with mode 0600 from the
  first byte (temp file created 0600, then renamed), so the key is never world-readable.

Nothing is written outside the storage root. The key is written to ``.env`` only: never to
``config.yaml``, stdout, stderr or a message. The model check and the model list go through
``uwf.adapters.llm``.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from uwf.config.config import config_path, parse_config
from uwf.config.envfile import env_path
from uwf.util import fsio, yamlio
from uwf.util.errors import InvalidInput
from uwf.util.jsonfmt import is_utf8

if TYPE_CHECKING:
    from uwf.util.outputs import DefaultAgentSet, ModelCheck, SetupDone

#: The agents uwf ships that setup can name by a short alias: alias -> command.
SHIPPED_AGENTS = {"builtin": "uwf-builtin", "hermes": "uwf-hermes"}
DEFAULT_AGENT = "builtin"
MODEL_ALIAS = "default"

# A model check: (base_url, api_key, model) -> {"ok": True} or {"ok": False, "error": "..."}.
Check = Callable[[str, str, str], "ModelCheck"]

_COMMAND_NAME = re.compile(r"^[A-Za-z0-9._+/~-]+$")
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=")
_PLAIN_VALUE = re.compile(r"^[A-Za-z0-9_.,:/@%+=~-]*$")


@dataclass(frozen=True)
class Preset:
    """A known OpenAI-compatible provider offered by the interactive menu."""

    name: str
    label: str
    base_url: str
    needs_key: bool = True  # False: a local server that takes no API key


PRESETS: tuple[Preset, ...] = (
    Preset("openai", "OpenAI", "https://api.openai.com/v1"),
    Preset("xai", "xAI", "https://api.x.ai/v1"),
    Preset("openrouter", "OpenRouter", "https://openrouter.ai/api/v1"),
    Preset("venice", "Venice", "https://api.venice.ai/api/v1"),
    Preset("dashscope", "DashScope (Alibaba)", "https://dashscope.aliyuncs.com/compatible-mode/v1"),
    Preset("deepseek", "DeepSeek", "https://api.deepseek.com/v1"),
    Preset("siliconflow", "SiliconFlow", "https://api.siliconflow.cn/v1"),
    Preset("volcengine", "Volcengine (ByteDance)", "https://ark.cn-beijing.volces.com/api/v3"),
    Preset("kimi", "Kimi (Moonshot)", "https://api.moonshot.cn/v1"),
    Preset("glm", "GLM (Zhipu AI)", "https://open.bigmodel.cn/api/paas/v4"),
    Preset("stepfun", "StepFun", "https://api.stepfun.com/v1"),
    Preset("minimax", "MiniMax", "https://api.minimax.io/v1"),
    Preset("ollama", "Ollama (local)", "http://localhost:11434/v1", needs_key=False),
)

# Model ids that are not chat models (speech, embeddings, images, …), dropped from the menu.
NON_CHAT_MODEL = re.compile(
    r"speech|embed|image|video|audio|ocr|rerank|tts|asr|paraformer|sambert|cosyvoice|wordart"
    r"|wanx|wan2|flux|stable-diffusion|gui-",
    re.IGNORECASE,
)


def env_var_name(provider: str) -> str:
    """``my-proxy`` -> ``MY_PROXY_API_KEY``: upper case, every non ``[A-Z0-9]`` becomes ``_``."""
    return re.sub(r"[^A-Z0-9]", "_", provider.upper()) + "_API_KEY"


def chat_models(ids: list[str]) -> list[str]:
    """The sorted, de-duplicated chat model ids of a provider's ``/models`` listing."""
    return sorted({i for i in ids if i and not NON_CHAT_MODEL.search(i)})


def preset(name: str | None) -> Preset | None:
    """The preset called ``name`` (``openai``, ``ollama``…), if there is one."""
    return next((p for p in PRESETS if p.name == (name or "").strip()), None)


def needs_key(provider: str, base_url: str) -> bool:
    """Whether the provider takes an API key: not a keyless preset (Ollama) at its own URL,
    nor a server on this machine (``localhost``, ``127.x``, ``::1``)."""
    known = preset(provider)
    if known is not None and not known.needs_key:
        return False
    try:
        host = urlsplit(base_url.strip()).hostname or ""
    except ValueError:
        return True
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True


def validate_inputs(
    provider: str, base_url: str, api_key: str, model: str, key_needed: bool = True
) -> None:
    """One clear line for the first bad value; never quotes the key."""
    for what, value in (
        ("provider name", provider),
        ("base URL", base_url),
        ("API key", api_key),
        ("model", model),
    ):
        if not is_utf8(value):
            raise InvalidInput(f"{what[0].upper()}{what[1:]} must be UTF-8 text")
    if not provider.strip():
        raise InvalidInput("Provider name required")
    if not base_url.strip():
        raise InvalidInput("Base URL required")
    if key_needed and not api_key.strip():
        raise InvalidInput("API key required")
    if not model.strip():
        raise InvalidInput("Model required")
    if not re.match(r"^https?://[^\s/]+", base_url.strip()):
        raise InvalidInput(f"invalid base URL: {base_url} (expected http:// or https://…)")
    if any(c in api_key for c in "\r\n\0"):
        raise InvalidInput("API key must be a single line")


# -- the model server (through the LLM adapter) ----------------------------------------------


def check_model(
    base_url: str, api_key: str, model: str, timeout: float | None = None
) -> ModelCheck:
    """A one-token chat completion: ``{"ok": True}``, or ``ok: false`` and the error line."""
    from uwf.adapters import llm
    from uwf.util import secrets

    seconds = llm.resolve_timeout(llm.CHECK_TIMEOUT, timeout)
    client = llm.Client(base_url, api_key, model, timeout=seconds)
    try:
        client.chat([{"role": "user", "content": "hi"}], max_tokens=1)
    except llm.LLMError as exc:
        # a server may echo the key it was sent: never printed (docs/architecture.md)
        secrets.add(api_key)
        return {"ok": False, "error": secrets.redact(exc.message)}
    finally:
        client.close()
    return {"ok": True}


def fetch_models(base_url: str, api_key: str, timeout: float | None = None) -> list[str]:
    """The provider's chat model ids (``GET <base>/models``); any failure -> ``[]``."""
    from uwf.adapters import llm

    seconds = llm.resolve_timeout(llm.CHECK_TIMEOUT, timeout)
    client = llm.Client(base_url, api_key, "", timeout=seconds)
    try:
        return chat_models(client.list_models())
    except llm.LLMError:
        return []
    finally:
        client.close()


# -- writing the configuration ----------------------------------------------------------------


def run_setup(
    root: Path,
    *,
    provider: str,
    base_url: str,
    api_key: str,
    model: str,
    agent: str | None = None,
    check: Check | None = None,
) -> SetupDone:
    """Merge the settings into ``config.yaml`` and ``.env``, then check the model.

    ``api_key`` may be empty for a provider that needs none (:func:`needs_key`). A failed
    check does not undo the written files: the result says what went wrong.
    """
    provider, base_url, model = provider.strip(), base_url.strip(), model.strip()
    api_key = api_key.strip()
    validate_inputs(provider, base_url, api_key, model, needs_key(provider, base_url))
    if agent is not None and not agent.strip():
        raise InvalidInput("agent must not be empty")
    root.mkdir(parents=True, exist_ok=True)
    env_name = env_var_name(provider) if api_key else None

    cfg_file = config_path(root)
    with fsio.locked(cfg_file):
        doc = _read_config_doc(cfg_file)
        _merge_model(doc, provider, base_url, env_name, model)
        default_agent = choose_agent(doc, agent)
        parse_config(doc, root=root)  # never write what a later command would refuse
        fsio.atomic_write(cfg_file, _dump_yaml(doc).encode())

    env_file = env_path(root)
    if env_name is not None:
        with fsio.locked(env_file):
            write_env_var(env_file, env_name, api_key)

    validation: ModelCheck = check(base_url, api_key, model) if check is not None else {"ok": True}
    return {
        "configPath": str(cfg_file),
        "envPath": str(env_file) if env_name is not None else None,
        "provider": provider,
        "model": model,
        "defaultAgent": default_agent,
        "validation": validation,
    }


def set_default_agent(root: Path, agent: str) -> DefaultAgentSet:
    """``uwf setup --default-agent NAME``: change ``defaultAgent`` (adding its alias if
    needed) and nothing else."""
    if not agent.strip():
        raise InvalidInput("agent must not be empty")
    root.mkdir(parents=True, exist_ok=True)
    cfg_file = config_path(root)
    with fsio.locked(cfg_file):
        doc = _read_config_doc(cfg_file)
        chosen = choose_agent(doc, agent)
        parse_config(doc, root=root)
        fsio.atomic_write(cfg_file, _dump_yaml(doc).encode())
    return {"configPath": str(cfg_file), "defaultAgent": chosen}


def _read_config_doc(path: Path) -> dict[str, Any]:
    """The existing ``config.yaml``, checked: setup never replaces a wrong file silently."""
    data = fsio.read_bytes(path)
    if data is None or not data.strip():
        return {}
    try:
        doc = yamlio.load(data, source="config.yaml", path=path)
    except InvalidInput as exc:
        raise InvalidInput(f"invalid config.yaml: {exc.message} (fix or remove {path})") from None
    try:
        parse_config(doc)
    except InvalidInput as exc:  # the path on the first line, before any problem lines
        first, newline, rest = exc.message.partition("\n")
        raise InvalidInput(f"{first} (fix or remove {path}){newline}{rest}") from None
    return doc if isinstance(doc, dict) else {}


def _merge_model(
    doc: dict[str, Any], provider: str, base_url: str, env_name: str | None, model: str
) -> None:
    """Set the provider and the ``default`` model alias in ``doc`` (other keys kept)."""
    providers = doc.get("providers") or {}
    providers[provider] = {"baseUrl": base_url}
    if env_name is not None:
        providers[provider]["apiKeyEnv"] = env_name
    doc["providers"] = providers
    models = doc.get("models") or {}
    models[MODEL_ALIAS] = {"provider": provider, "name": model}
    doc["models"] = models
    if not isinstance(doc.get("defaultModel"), str) or not doc["defaultModel"]:
        doc["defaultModel"] = MODEL_ALIAS


def choose_agent(doc: dict[str, Any], agent: str | None) -> str:
    """Set ``defaultAgent`` in ``doc`` and return it: ``agent`` when given (its alias added
    if missing; Hermes checked first), else the config's own, else ``builtin``."""
    agents = doc.get("agents") or {}
    if agent is None:
        current = doc.get("defaultAgent")
        if isinstance(current, str) and current:
            return current
    name = (agent or DEFAULT_AGENT).strip()
    entry = agents.get(name) or _new_alias(name)
    command = entry.get("command") if isinstance(entry, dict) else None
    if agent is not None and isinstance(command, str) and Path(command).name == "uwf-hermes":
        problem = hermes_problem()
        if problem is not None:
            raise InvalidInput(f"cannot use {name} as the default agent: {problem}")
    agents[name] = entry
    doc["agents"] = agents
    doc["defaultAgent"] = name
    return name


def _new_alias(name: str) -> dict[str, Any]:
    if name in SHIPPED_AGENTS:
        return {"command": SHIPPED_AGENTS[name], "args": []}
    if not _COMMAND_NAME.match(name):
        raise InvalidInput(
            f"invalid default agent: {name} (expected an agent alias or a command name; "
            "put arguments under agents in config.yaml)"
        )
    if shutil.which(name) is None:  # every step would fail with "agent command not found"
        raise InvalidInput(
            f"cannot use {name} as the default agent: no command {name} on PATH (name an alias "
            "of agents in config.yaml, builtin, hermes, or an installed command)"
        )
    return {"command": name, "args": []}


def hermes_problem(env: Mapping[str, str] | None = None) -> str | None:
    """Why ``uwf-hermes`` cannot run here, or None: the ``hermes`` command must be on PATH and
    its home (``$HERMES_HOME``, else ``~/.hermes``) must hold a ``config.yaml`` or ``.env``
    (what ``hermes setup`` writes). Only looks: never runs Hermes, which would create its
    home."""
    env = os.environ if env is None else env
    if shutil.which("hermes", path=env.get("PATH")) is None:
        return (
            "the hermes command is not installed (pip install hermes-agent, or "
            "pip install 'uwf[hermes]'), then run `hermes setup`"
        )
    home_dir = env.get("HERMES_HOME") or str(Path(env.get("HOME") or "~").expanduser() / ".hermes")
    home = Path(home_dir)
    if not (home / "config.yaml").is_file() and not (home / ".env").is_file():
        return f"Hermes is not configured (no config.yaml or .env in {home}): run `hermes setup`"
    return None


def _dump_yaml(doc: dict[str, Any]) -> str:
    import yaml

    return yaml.safe_dump(
        doc, sort_keys=False, allow_unicode=True, default_flow_style=False, indent=2
    )


def _env_value(value: str) -> str:
    """A value as python-dotenv reads it back unchanged: plain, or single-quoted literal."""
    if _PLAIN_VALUE.match(value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def write_env_var(path: Path, name: str, value: str) -> None:
    """Set ``name`` in the ``.env`` file at ``path``: replace its line or append one.

    Other lines (comments, blank lines, other keys) are kept; the file is rewritten
    atomically with mode 0600.
    """
    data = fsio.read_bytes(path)
    lines = data.decode("utf-8", "replace").splitlines() if data else []
    new_line = f"{name}={_env_value(value)}"
    out: list[str] = []
    replaced = False
    for line in lines:
        m = _ENV_LINE.match(line)
        if m and m.group(1) == name:
            if not replaced:
                out.append(new_line)
                replaced = True
            continue
        out.append(line)
    if not replaced:
        out.append(new_line)
    fsio.atomic_write(path, ("\n".join(out) + "\n").encode(), mode=0o600)
