"""An isolated HOME for the real Hermes agent (``hermes-agent``), pointed at the local test server.

Why: ``uwf-hermes`` runs ``hermes`` with the user's own setup (``~/.hermes``). A test must
never read or write the developer's real Hermes home, and must make Hermes talk to
tests/llm_server.py instead of a provider. Hermes reads everything from ``$HERMES_HOME``
(default ``$HOME/.hermes``), so a temp HOME with a ``config.yaml`` is the whole isolation.

    home = tmp / "home"
    write_hermes_config(home, server.base_url)   # model.provider custom -> the local server
    use_home(monkeypatch, home)                   # HOME, HERMES_HOME; the user's HERMES_* unset

The HOME can be shared by many tests (Hermes keeps its sessions in ``state.db`` there, and its
first start is the slowest); rewrite the config when the server changes. The settings below keep
Hermes fast and offline: a fixed ``context_length`` (no probing of the server for the model's
context size), one API retry instead of three, no tirith scanner download, and no
background request for a session title (so every chat request the server sees is a step's).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import BIN

MODEL = "test-model"
API_KEY = "sk-local-hermes"
CONTEXT_LENGTH = 200_000


def hermes_missing_reason() -> str | None:
    """Why the real Hermes cannot run here (None when it can)."""
    if importlib.util.find_spec("hermes_cli") is None:
        return "hermes-agent is not installed (pip install 'uwf[hermes]' or hermes-agent)"
    path = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    if shutil.which("hermes", path=path) is None:
        return "the `hermes` command of hermes-agent is not on PATH"
    return None


def write_hermes_config(
    home: Path,
    base_url: str,
    *,
    model: str = MODEL,
    api_max_retries: int = 1,
    extra: dict[str, Any] | None = None,
) -> Path:
    """Write ``<home>/.hermes/config.yaml``: a ``custom`` provider at ``base_url`` (pass the
    server's ``base_url``, ending in ``/v1``) whose default model is ``model``."""
    config: dict[str, Any] = {
        "model": {
            "provider": "custom",
            "default": model,
            "base_url": base_url,
            "api_key": API_KEY,
            "context_length": CONTEXT_LENGTH,
        },
        "agent": {"api_max_retries": api_max_retries},
        "security": {"tirith_enabled": False},
        # The title of a new session is asked of the model in a background thread that races
        # the process exit; it would take a scripted reply meant for the next step.
        "auxiliary": {"title_generation": {"enabled": False}},
    }
    for key, value in (extra or {}).items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    hermes_dir = home / ".hermes"
    hermes_dir.mkdir(parents=True, exist_ok=True)
    path = hermes_dir / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def use_home(monkeypatch: pytest.MonkeyPatch, home: Path) -> None:
    """Make ``home`` the HOME of every process the test starts.

    ``HERMES_HOME`` is set explicitly (a developer may have it exported), and every other
    ``HERMES_*`` variable of the developer's shell (timeouts, iteration limits…) is removed so
    the tests see Hermes' defaults plus what the test sets.
    """
    for name in list(os.environ):
        if name.startswith("HERMES_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HERMES_HOME", str(home / ".hermes"))
