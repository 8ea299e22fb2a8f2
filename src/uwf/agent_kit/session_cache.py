"""Small per-agent state under ``<root>/cache/``: JSON objects read and changed under a lock.

- session ids per (thread, role): ``<root>/cache/<agent>-sessions.json`` (``uwf-hermes``
  resumes a role's session on re-entry);
- counters: ``<root>/cache/<name>.json`` (``uwf-mock`` counts the runs of a visit, and
  marks the visits that suspended).

A fork gets a new thread id, so it never sees the original thread's entries. A damaged file
reads as empty: it is a cache, never the thread's state; so does one over ``LIMIT`` bytes,
read no further (docs/format.md, "The filesystem backend": every file is read with a bound).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from uwf.util import fsio

LIMIT = 16 << 20  # bytes of a cache file read (a session id per thread and role)


def _path(root: Path, agent: str) -> Path:
    return root / "cache" / f"{agent}-sessions.json"


def _read(path: Path) -> dict[str, Any]:
    data = fsio.read_bytes(path, LIMIT)
    if not data or len(data) > LIMIT:
        return {}
    try:
        value = json.loads(data)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _write(path: Path, value: dict[str, Any]) -> None:
    fsio.atomic_write(path, (json.dumps(value, indent=2) + "\n").encode())


def get(root: Path, agent: str, thread: str, role: str) -> str | None:
    found = _read(_path(root, agent)).get(f"{thread}:{role}")
    return found if isinstance(found, str) and found else None


def put(root: Path, agent: str, thread: str, role: str, session_id: str) -> None:
    path = _path(root, agent)
    with fsio.locked(path):
        cache = _read(path)
        cache[f"{thread}:{role}"] = session_id
        _write(path, cache)


def bump(root: Path, name: str, key: str) -> int:
    """Add one to the counter ``key`` of ``<root>/cache/<name>.json``; return the new count."""
    path = root / "cache" / f"{name}.json"
    with fsio.locked(path):
        counts = _read(path)
        old = counts.get(key)
        count = (old if isinstance(old, int) and not isinstance(old, bool) else 0) + 1
        counts[key] = count
        _write(path, counts)
    return count


def counts(root: Path, name: str) -> dict[str, Any]:
    """The counters of ``<root>/cache/<name>.json`` as they are (none: empty)."""
    return _read(root / "cache" / f"{name}.json")
