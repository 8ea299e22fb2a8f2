"""Live turns (docs/format.md, "Live turns"): the turns of a step in flight, as its agent
writes them, before its detail exists.

For each run, ``thread step`` creates ``<root>/cache/turns/<thread>.jsonl`` (0600, in a 0700
directory of this machine's storage root) with one first line naming the step —
``{"head", "role", "step"}``: the head it follows, its role and number — and gives the agent
its path in ``UWF_LIVE_TURNS``; the agent appends one line per turn (an AgentTurn payload:
``{index, role, content, toolCalls?, reasoning?}``, ``"truncated": true`` when its text was
cut) and the file is removed when the run ends. ``uwf step turns --live`` and the web view
read it (``uwf.engine.views.live``). A line is an agent's words: bounded, checked, and shown
escaped; the detail the step lands with stays the record.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ENV = "UWF_LIVE_TURNS"
MAX_LINE = 256 * 1024  # bytes of one line read back; longer ones are skipped
MAX_TEXT = 64 * 1024  # characters of a turn's text an agent writes to its line


def path_of(root: Path, thread: str) -> Path:
    """The live-turns file of ``thread``'s step in flight, on this machine."""
    return root / "cache" / "turns" / f"{thread}.jsonl"


def header(value: Any) -> dict[str, Any] | None:
    """The first line's step, or None when it is not one."""
    if not isinstance(value, dict):
        return None
    head, role, step = value.get("head"), value.get("role"), value.get("step")
    if isinstance(head, str) and isinstance(role, str) and isinstance(step, int):
        return {"head": head, "role": role, "step": step}
    return None


def turn(value: Any) -> dict[str, Any] | None:
    """A turn line, checked and kept to the AgentTurn fields (None: not a turn)."""
    if not isinstance(value, dict):
        return None
    index, role, content = value.get("index"), value.get("role"), value.get("content")
    if not (isinstance(index, int) and index >= 0 and isinstance(role, str)):
        return None
    if not isinstance(content, str):
        return None
    out: dict[str, Any] = {"index": index, "role": role[:100], "content": content[:MAX_TEXT]}
    calls = value.get("toolCalls")
    if isinstance(calls, list):
        out["toolCalls"] = [
            {"name": str(c.get("name", ""))[:200], "args": str(c.get("args", ""))[:MAX_TEXT]}
            for c in calls[:100]
            if isinstance(c, dict)
        ]
    if isinstance(value.get("reasoning"), str):
        out["reasoning"] = value["reasoning"][:MAX_TEXT]
    if value.get("truncated") is True or len(content) > MAX_TEXT:
        out["truncated"] = True
    return out
