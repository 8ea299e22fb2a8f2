"""Answers in the frontmatter form: a ``---``-delimited YAML block, then markdown.

Agents answer in this form (docs/agents.md), and so do people (``uwf-human``, ``thread
answer --file``, ``thread fork --output``). ``split`` cuts a text into its block and body;
``load_mapping`` reads a block as a JSON object with the safe YAML loader (``yamlio``: a plain
block, as most answers are, without PyYAML). Both are total: any text gives a result or None,
never an exception.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from uwf.util.jsonfmt import dumps

# -- split --------------------------------------------------------------------------------------


def split(raw: str) -> tuple[str | None, str]:
    """The frontmatter block (without its fences) and the body; ``(None, raw)`` if there is none.

    The text must open with ``---`` at position 0 followed by a line break (or the end); the
    block ends at the first line that starts with ``---``. The body is what follows that
    closing fence, leading line breaks removed. ``---\\n---`` is a valid, empty block.
    """
    if not raw.startswith("---"):
        return None, raw
    rest = raw[3:]
    if rest.startswith("\r\n"):
        start = 5
    elif rest.startswith("\n"):
        start = 4
    else:
        return None, raw
    close = raw.find("\n---", 3)
    if close < 0:
        return None, raw
    block = raw[start:close] if close >= start else ""
    return block, raw[close + 4 :].lstrip("\r\n")


def body(content: str) -> str:
    """A step's content without the frontmatter block it starts with, if any: where the
    step's output is shown beside it (prompts, ``thread read``), the block would say it
    twice."""
    block, rest = split(content)
    return content if block is None else rest


# -- the full safe parse ------------------------------------------------------------------------


class _NotJson(Exception):
    """A YAML value that has no JSON form."""


def _key(key: Any) -> str:
    """A YAML mapping key as the JSON object key JavaScript would make of it."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, (bool, int, float)):
        return dumps(_to_json(key))
    if _is_date(key):
        return str(key.isoformat())
    raise _NotJson


def _is_date(value: Any) -> bool:
    """Whether a loaded value is a date or a time stamp. Only the loader makes them, and it has
    imported ``datetime`` by then: the flat form's readers never import it."""
    dt = sys.modules.get("datetime")
    return dt is not None and isinstance(value, (dt.date, dt.datetime))


def _to_json(value: Any) -> Any:
    """The JSON form of a safely loaded YAML value; dates become their ISO text."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise _NotJson
        return int(value) if value.is_integer() and abs(value) <= 2**53 else value
    if _is_date(value):
        return str(value.isoformat())
    if isinstance(value, list):
        return [_to_json(item) for item in value]
    if isinstance(value, dict):
        return {_key(k): _to_json(v) for k, v in value.items()}
    raise _NotJson


#: The last block loaded and what the loader made of it, never handed out (``_to_json`` copies
#: it): the agent kit reads an answer's block twice, for a suspension and for the output.
_last: tuple[str, Any] | None = None


def load_mapping(block: str) -> dict[str, Any] | None:
    """The block as a JSON object; ``{}`` when empty, ``None`` when it is not a usable mapping.

    Any failure of the loader counts as "not usable": PyYAML raises more than YAMLError on
    hostile input (an impossible date, ``!!float abc``), and this function must not raise.
    """
    global _last
    from uwf.util import yamlio

    last = _last
    if last is not None and last[0] == block:  # the same answer read again (suspension, offer)
        data = last[1]
    else:
        try:
            data = yamlio.load(block, source="frontmatter")
        except Exception:
            return None
        _last = (block, data)
    if data is None:
        return {}
    if not isinstance(data, dict):
        return None
    try:
        out = _to_json(data)
    except (_NotJson, RecursionError):
        return None
    return out if isinstance(out, dict) else None
