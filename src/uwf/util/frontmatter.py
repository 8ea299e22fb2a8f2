"""Answers in the frontmatter form: a ``---``-delimited YAML block, then markdown.

Agents answer in this form (docs/agents.md), and so do people (``uwf-human``, ``thread
answer --file``, ``thread fork --output``). ``split`` cuts a text into its block and body;
``load_mapping`` reads a block as a JSON object with the safe YAML loader (a flat block, as
most answers are, without it: ``_flat``, which reads it exactly as the loader would). Both are
total: any text gives a result or None, never an exception.
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


# -- the flat form, read without PyYAML ---------------------------------------------------------

#: Plain words the safe loader reads as something else than a string (booleans, nulls), in any
#: case: a key or a plain value that is one of them is left to the loader.
_NOT_TEXT = frozenset({"yes", "no", "true", "false", "on", "off", "null", "y", "n"})
_FIRST = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ$_")
_KEY = _FIRST | frozenset("0123456789-")
_PLAIN = _KEY | frozenset(" .,/()'")
#: What a double-quoted value may hold to be read the same by JSON and the safe loader: no
#: control character, no escape other than these (``\u`` escapes of surrogates differ).
_ESCAPES = frozenset('"\\/nt')
_FLAT_LIMIT = 1 << 16  # characters: far below yamlio's limits on bytes and nodes


def _flat(block: str) -> dict[str, Any] | None:
    """The block read without PyYAML when it has the flat form answers mostly take, else None.

    Importing PyYAML and its resolvers' regular expressions is ~3 times an agent's other
    start-up (docs/performance.md, "Processes and start-up"), and the agent kit reads every
    answer's block. The flat form is one ``key: value`` per line, each key a plain word and
    each value a plain word-like text that starts with a letter, ``$`` or ``_`` (``status:
    approved``, ``$status: $SUSPEND``), a double-quoted string or a one-line list of them, in
    the characters and escapes JSON and the safe loader read alike: what this returns is what
    ``yamlio.load`` returns for it (``tests/test_frontmatter_flat.py`` compares them). Anything
    else — numbers, booleans, nulls, comments, nesting, repeated keys — is None: the loader's.
    """
    if not block or len(block) > _FLAT_LIMIT:
        return None
    out: dict[str, Any] = {}
    for line in block.split("\n"):
        key, colon, value = line.partition(": ")
        if (
            not colon
            or not key
            or key[0] not in _FIRST
            or not _KEY.issuperset(key)
            or key.lower() in _NOT_TEXT
            or key in out
        ):
            return None
        value = value.strip(" ")
        if not value:
            return None
        if value[0] in '"[':
            parsed = _quoted(value)
            if parsed is None:
                return None
            out[key] = parsed
        elif value[0] in _FIRST and _PLAIN.issuperset(value) and value.lower() not in _NOT_TEXT:
            out[key] = value
        else:
            return None
    return out


def _quoted(value: str) -> str | list[str] | None:
    """A double-quoted string, or a one-line list of them, of the flat form; else None."""
    if any(c < " " or "\x7f" <= c <= "\x9f" or "\ud800" <= c <= "\udfff" for c in value):
        return None
    if any(c >= "\u2028" and c in "\u2028\u2029\ufeff\ufffe\uffff" for c in value):
        return None
    escaped = value.split("\\")
    # every backslash starts an escape of _ESCAPES ("\\\\" splits into an empty part)
    i = 1
    while i < len(escaped):
        part = escaped[i]
        if part == "" and i + 1 < len(escaped):
            i += 2
            continue
        if not part or part[0] not in _ESCAPES:
            return None
        i += 1
    import json

    try:
        parsed = json.loads(value)
    except ValueError:
        return None
    if isinstance(parsed, str):
        return parsed if value[0] == '"' else None
    if isinstance(parsed, list) and all(isinstance(item, str) for item in parsed):
        return parsed
    return None


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
        data = _flat(block)
        if data is None:
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
