"""`uwf setup`: merge a provider and a model into ``config.yaml`` and the key into ``.env``.

REFERENCE §7.3 with deliberate fixes:

* an unreadable or invalid existing ``config.yaml`` is refused instead of silently replaced;
* the merged document is checked with the same parser every command uses, so setup never
  writes a config that a later command would reject;
* ``--agent X`` always becomes ``defaultAgent``, and when ``X`` is not an alias yet but a
  plain command name it is added as ``agents.X = {command: X, args: []}``;
* ``.env`` keeps its other lines (comments included) and is created with mode 0600 from the
  first byte (temp file created 0600, then renamed), so the key is never world-readable.

The key is written to ``.env`` only: never to ``config.yaml``, stdout, stderr or a message.
The model check needs HTTP, which this layer may not import: the caller passes ``check``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uwf.config.config import config_path, env_path, parse_config
from uwf.util import fsio, yamlio
from uwf.util.errors import InvalidInput
from uwf.util.jsonfmt import is_utf8

DEFAULT_AGENT = {"hermes": {"command": "uwf-hermes", "args": []}}
MODEL_ALIAS = "default"

# A model check: (base_url, api_key, model) -> {"ok": True} or {"ok": False, "error": "..."}.
Check = Callable[[str, str, str], dict[str, Any]]

_COMMAND_NAME = re.compile(r"^[A-Za-z0-9._+/~-]+$")
_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=")
_PLAIN_VALUE = re.compile(r"^[A-Za-z0-9_.,:/@%+=~-]*$")


@dataclass(frozen=True)
class Preset:
    """A known OpenAI-compatible provider offered by the interactive menu."""

    name: str
    label: str
    base_url: str


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
    Preset("ollama", "Ollama (local)", "http://localhost:11434/v1"),
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


def validate_inputs(provider: str, base_url: str, api_key: str, model: str) -> None:
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
    if not api_key.strip():
        raise InvalidInput("API key required")
    if not model.strip():
        raise InvalidInput("Model required")
    if not re.match(r"^https?://[^\s/]+", base_url.strip()):
        raise InvalidInput(f"invalid base URL: {base_url} (expected http:// or https://…)")
    if any(c in api_key for c in "\r\n\0"):
        raise InvalidInput("API key must be a single line")


def run_setup(
    root: Path,
    *,
    provider: str,
    base_url: str,
    api_key: str,
    model: str,
    agent: str | None = None,
    check: Check | None = None,
) -> dict[str, Any]:
    """Merge the settings into ``config.yaml`` and ``.env``, then check the model.

    A failed check does not undo the written files: the result says what went wrong.
    """
    provider, base_url, model = provider.strip(), base_url.strip(), model.strip()
    api_key = api_key.strip()
    validate_inputs(provider, base_url, api_key, model)
    if agent is not None and not agent.strip():
        raise InvalidInput("agent must not be empty")
    root.mkdir(parents=True, exist_ok=True)
    env_name = env_var_name(provider)

    cfg_file = config_path(root)
    with fsio.locked(cfg_file):
        doc = _read_config_doc(cfg_file)
        _check_existing(doc, cfg_file)
        default_agent = _merge(doc, provider, base_url, env_name, model, agent)
        parse_config(doc, root=root)  # never write what a later command would refuse
        fsio.atomic_write(cfg_file, _dump_yaml(doc).encode())

    env_file = env_path(root)
    with fsio.locked(env_file):
        write_env_var(env_file, env_name, api_key)

    validation = check(base_url, api_key, model) if check is not None else {"ok": True}
    return {
        "configPath": str(cfg_file),
        "envPath": str(env_file),
        "provider": provider,
        "model": model,
        "defaultAgent": default_agent,
        "validation": validation,
    }


def _read_config_doc(path: Path) -> dict[str, Any]:
    data = fsio.read_bytes(path)
    if data is None or not data.strip():
        return {}
    try:
        doc = yamlio.load(data, source="config.yaml")
    except InvalidInput as exc:
        raise InvalidInput(f"invalid config.yaml: {exc.message} (fix or remove {path})") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise InvalidInput(f"invalid config.yaml: root must be a mapping (fix or remove {path})")
    return doc


def _check_existing(doc: dict[str, Any], path: Path) -> None:
    try:
        parse_config(doc)
    except InvalidInput as exc:
        raise InvalidInput(f"{exc.message} (fix or remove {path})") from None


def _merge(
    doc: dict[str, Any],
    provider: str,
    base_url: str,
    env_name: str,
    model: str,
    agent: str | None,
) -> str:
    """Update ``doc`` in place (other keys kept) and return the resulting ``defaultAgent``."""
    providers = doc.get("providers") or {}
    providers[provider] = {"baseUrl": base_url, "apiKeyEnv": env_name}
    doc["providers"] = providers

    models = doc.get("models") or {}
    models[MODEL_ALIAS] = {"provider": provider, "name": model}
    doc["models"] = models

    agents = doc.get("agents") or {}
    if not agents and agent is None:
        agents = {k: dict(v) for k, v in DEFAULT_AGENT.items()}
    if agent is not None:
        agent = agent.strip()
        if agent not in agents:
            if not _COMMAND_NAME.match(agent):
                raise InvalidInput(
                    f"invalid --agent: {agent} (expected an agent alias or a command name; "
                    "put arguments under agents in config.yaml)"
                )
            agents[agent] = {"command": agent, "args": []}
    doc["agents"] = agents
    if agent is not None:
        doc["defaultAgent"] = agent

    if not isinstance(doc.get("defaultAgent"), str) or not doc["defaultAgent"]:
        doc["defaultAgent"] = "hermes" if "hermes" in agents else next(iter(agents))
    if not isinstance(doc.get("defaultModel"), str) or not doc["defaultModel"]:
        doc["defaultModel"] = MODEL_ALIAS
    return str(doc["defaultAgent"])


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
