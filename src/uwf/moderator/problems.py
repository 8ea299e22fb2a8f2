"""How the workflow validator words a problem: where it is (``graph.reviewer.approved``) and
what a YAML value reads as to a user (``a list``, ``a boolean``…)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_SEG_RE = re.compile(r"^[A-Za-z0-9_$-]+$")


@dataclass
class Problems:
    """What a check found: problems (the file is refused) and warnings (it is not)."""

    lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, where: str, what: str) -> None:
        self.lines.append(f"{where}: {what}" if where else what)

    def warn(self, where: str, what: str) -> None:
        self.warnings.append(f"{where}: {what}" if where else what)


def seg(key: Any) -> str:
    """One path segment of a problem location: ``.key`` or ``["odd key"]``."""
    if isinstance(key, str) and _SEG_RE.fullmatch(key):  # fullmatch: no "\n" before $
        return f".{key}"
    return f"[{json.dumps(key if isinstance(key, str) else str(key), ensure_ascii=False)}]"


def loc(*keys: Any) -> str:
    return "".join(seg(k) for k in keys).lstrip(".")


# bool before int: True is an int to Python, a boolean to a YAML author
_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "a mapping"),
)


def kind(value: Any) -> str:
    """How a YAML value reads to a user: ``a list``, ``a string``, ``null``…"""
    if value is None:
        return "null"
    for cls, text in _KINDS:
        if isinstance(value, cls):
            return text
    return f"a {type(value).__name__}"


def key_text(key: Any) -> str:
    """A key as YAML/JSON would spell it: ``"text"``, ``true``, ``1``, ``null``."""
    if key is None or isinstance(key, (str, bool, int, float)):
        return json.dumps(key, ensure_ascii=False)
    return repr(key)


def string(p: Problems, value: Any, *where: Any, present: bool = True) -> str | None:
    """``value`` if it is a string, else None with a problem at ``where``."""
    if not present:
        p.add(loc(*where), "missing (expected a string)")
        return None
    if not isinstance(value, str):
        p.add(loc(*where), f"expected a string, got {kind(value)}")
        return None
    return value
