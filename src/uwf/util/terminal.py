"""Agent text made safe for a terminal: control characters shown, never obeyed.

An agent's words come from a model that reads the web. Written raw to a terminal, an escape
sequence in them can retitle the window (OSC 0), write the clipboard (OSC 52), hide text or
move the cursor over uwf's own lines. ``visible`` escapes every C0 and C1 control character
(but the newline and tab it is told to keep), DEL and the Unicode bidirectional overrides,
as ``\\x1b`` / ``\\u202e``: the text stays readable and nothing in it acts.
"""

from __future__ import annotations

import re

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069"
_pattern: dict[str, re.Pattern[str]] = {}


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str, keep: str = "\n\t") -> str:
    """``text`` with its control characters escaped, except those in ``keep``."""
    pattern = _pattern.get(keep)
    if pattern is None:
        kept = "".join(re.escape(c) for c in "\n\t" if c not in keep)
        pattern = _pattern[keep] = re.compile(f"[{_CONTROLS}{kept}]")
    return pattern.sub(_escape, text)


def is_terminal(stream: object) -> bool:
    """Whether ``stream`` (sys.stdout, sys.stderr) is a terminal."""
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except (OSError, ValueError):
        return False
