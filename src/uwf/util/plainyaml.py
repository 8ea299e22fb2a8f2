"""The plain YAML most files and answers are, read without PyYAML.

Importing PyYAML costs more than the rest of a step's own start-up (its resolvers compile
their regular expressions at import: ~125 M instructions, docs/performance.md, "Processes and
start-up"), and a step reads ``config.yaml``, an agent its answer's frontmatter and
``uwf-mock`` its scenario. ``read`` reads the plain form — block mappings, one ``key: value``
per line, nested by indentation; values that are plain words, decimal integers,
double-quoted strings or one-line lists of them; blank and comment lines — and gives None
for anything else, which ``uwf.util.yamlio`` then hands to PyYAML. What ``read`` returns is
what PyYAML's safe loader returns for the same text (``tests/test_plainyaml.py`` compares
them on generated documents): every rule below keeps to a case both read alike.
"""

from __future__ import annotations

from typing import Any

__all__ = ["read"]

#: Plain words the safe loader reads as booleans or nulls, in any case: left to the loader.
_NOT_TEXT = frozenset({"yes", "no", "true", "false", "on", "off", "null", "y", "n"})
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
_FIRST = frozenset(_LETTERS + "$_")  # a key's first character; no resolver starts with one
_KEY = _FIRST | frozenset("0123456789-")
_VALUE_FIRST = _FIRST | frozenset("/")
_PLAIN = _KEY | frozenset(" .,/()'")
_DIGITS = frozenset("0123456789")
#: The escapes a double-quoted value may use: read alike by JSON and the safe loader (``\\u``
#: escapes are not: the loader keeps a surrogate pair as two characters).
_ESCAPES = frozenset('"\\/nt')
LIMIT = 1 << 16  # characters: far below yamlio's limits on bytes and nodes


def read(text: str) -> dict[str, Any] | None:
    """The mapping ``text`` holds, if it has the plain form; else None (for the loader)."""
    if len(text) > LIMIT or not text.replace("\n", "").isprintable():
        return None  # control characters, YAML's other line breaks (NEL, U+2028), a BOM
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(0, root)]
    pending: tuple[dict[str, Any], str] | None = None  # a `key:` whose mapping comes next
    for line in text.split("\n"):
        content = line.lstrip(" ")
        if not content or content[0] == "#":
            continue
        indent = len(line) - len(content)
        if pending is not None:
            if indent <= stack[-1][0]:
                return None  # a null value
            nested: dict[str, Any] = {}
            pending[0][pending[1]] = nested
            stack.append((indent, nested))
            pending = None
        else:
            while stack[-1][0] > indent and len(stack) > 1:
                stack.pop()
            if stack[-1][0] != indent:
                return None
        mapping = stack[-1][1]
        key, colon, rest = content.partition(":")
        if (
            not colon
            or not key
            or key[0] not in _FIRST
            or not _KEY.issuperset(key)
            or key.lower() in _NOT_TEXT
            or key in mapping
        ):
            return None
        value = rest.strip(" ")
        if not value:
            pending = (mapping, key)
            continue
        if rest[0] != " ":
            return None
        parsed = _value(value)
        if parsed is None:
            return None
        mapping[key] = parsed
    if pending is not None or not root:
        return None
    return root


def _value(value: str) -> str | int | list[str] | None:
    if value[0] in '"[':
        return _quoted(value)
    if _DIGITS.issuperset(value):
        return int(value) if value == "0" or value[0] != "0" else None  # 010 is octal
    if value[0] in _VALUE_FIRST and _PLAIN.issuperset(value) and value.lower() not in _NOT_TEXT:
        return value
    return None


def _quoted(value: str) -> str | list[str] | None:
    """A double-quoted string, or a one-line list of them; else None."""
    parts = value.split("\\")
    i = 1
    while i < len(parts):  # every backslash starts one of _ESCAPES ("\\\\" leaves a "")
        if parts[i] == "" and i + 1 < len(parts):
            i += 2
            continue
        if not parts[i] or parts[i][0] not in _ESCAPES:
            return None
        i += 1
    import json

    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):  # not JSON, or lists nested deeper than the stack
        return None
    if isinstance(parsed, str):
        return parsed if value[0] == '"' else None
    if isinstance(parsed, list) and all(isinstance(item, str) for item in parsed):
        return parsed
    return None
