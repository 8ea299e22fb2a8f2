"""Agent session ids per (thread, role): ``<root>/cache/<agent>-sessions.json`` (REFERENCE §5.9).

A fork gets a new thread id, so it never resumes the original thread's sessions.
"""

from __future__ import annotations

import json
from pathlib import Path

from uwf.util import fsio


def _path(root: Path, agent: str) -> Path:
    return root / "cache" / f"{agent}-sessions.json"


def _read(path: Path) -> dict[str, str]:
    data = fsio.read_bytes(path)
    if not data:
        return {}
    try:
        value = json.loads(data)
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(v, str) and v}


def get(root: Path, agent: str, thread: str, role: str) -> str | None:
    return _read(_path(root, agent)).get(f"{thread}:{role}")


def put(root: Path, agent: str, thread: str, role: str, session_id: str) -> None:
    path = _path(root, agent)
    with fsio.locked(path):
        cache = _read(path)
        cache[f"{thread}:{role}"] = session_id
        fsio.atomic_write(path, (json.dumps(cache, indent=2) + "\n").encode())
