"""How uwf words what a document holds and what a JSON Schema expects there: one wording for
every problem a schema finds — a workflow file, ``config.yaml``, a role's output, a node.

A problem is ``<where>: <what>``. ``<where>`` is a path a YAML author reads
(``graph.reviewer.approved``, ``roles["b c"]``, ``args[1]``); ``<what>`` says what was
expected, in words derived from the schema (``a positive integer``, ``a list of strings``),
and what was found (``got a list``, ``got 0``). A schema may name what it expects in its own
words with the annotation ``"x-expected"`` (``EXPECTED``; uwf's own schemas do, e.g. ``"a
mapping of role name -> role definition"``); validators ignore it. Pure: it imports nothing
that validates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from uwf.cas.fastschema import EXPECTED

_SEGMENT = r"[A-Za-z0-9_$-]+"  # a key shown as .key (re caches it once compiled on use)

# bool before int: True is an int to Python, a boolean to a YAML author
_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "a mapping"),
)

_TYPE_NOUNS = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
    "array": "a list",
    "object": "a mapping",
}
_PLURALS = {
    "string": "strings",
    "integer": "integers",
    "number": "numbers",
    "boolean": "booleans",
    "array": "lists",
    "object": "mappings",
}


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


def literal(value: Any, limit: int = 60) -> str:
    """A found value in a message: a scalar as JSON (cut at ``limit``), else its kind."""
    if not (value is None or isinstance(value, (str, int, float))):
        return kind(value)  # a list, a mapping, a YAML date…
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def seg(key: Any) -> str:
    """One path segment of a problem location: ``.key`` or ``["odd key"]``."""
    if isinstance(key, str) and re.fullmatch(_SEGMENT, key):
        return f".{key}"
    return f"[{json.dumps(key if isinstance(key, str) else str(key), ensure_ascii=False)}]"


def loc(*keys: Any) -> str:
    """A location from mapping keys: ``loc("roles", "b", "goal")`` is ``roles.b.goal``."""
    return "".join(seg(k) for k in keys).lstrip(".")


def where(document: Any, path: Sequence[Any]) -> str:
    """The location of ``path`` in ``document``: list positions as ``[1]``, keys as ``loc``."""
    out, node = [], document
    for step in path:
        if isinstance(node, list) and isinstance(step, int):
            out.append(f"[{step}]")
            node = node[step] if 0 <= step < len(node) else None
        else:
            out.append(seg(step))
            node = node.get(step) if isinstance(node, dict) else None
    return "".join(out).lstrip(".")


def pointer(path: Sequence[Any]) -> str:
    """The JSON Pointer of ``path`` (RFC 6901): ``/roles/b/goal``."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def order(document: Any, path: Sequence[Any]) -> tuple[int, ...]:
    """Where ``path`` comes in ``document``, top to bottom (a missing key after the rest)."""
    out, node = [], document
    for step in path:
        if isinstance(node, list) and isinstance(step, int):
            out.append(step)
            node = node[step] if 0 <= step < len(node) else None
        elif isinstance(node, dict) and step in node:
            out.append(list(node).index(step))
            node = node[step]
        else:
            out.append(len(node) if isinstance(node, (dict, list)) else 0)
            node = None
    return tuple(out)


def expected(schema: Any) -> str:
    """What ``schema`` accepts, as the object of "expected …": ``a list of strings``."""
    if schema is True or schema == {}:
        return "any value"
    if not isinstance(schema, dict):
        return "nothing (no value is allowed here)"
    named = schema.get(EXPECTED)
    if isinstance(named, str):
        return named
    if "const" in schema:
        return literal(schema["const"])
    if isinstance(schema.get("enum"), list):
        return "one of " + ", ".join(literal(v) for v in schema["enum"])
    types = schema.get("type")
    names = types if isinstance(types, list) else [types] if isinstance(types, str) else []
    if names:
        return " or ".join(_type_noun(str(name), schema) for name in names)
    if schema.get("format") == "cas_ref":
        return _string_noun(schema)
    branches = schema.get("anyOf", schema.get("oneOf"))
    if isinstance(branches, list) and branches:
        return " or ".join(expected(branch) for branch in branches)
    return "a value the schema accepts"


def _type_noun(name: str, schema: dict[str, Any]) -> str:
    if name in ("integer", "number"):
        return _number_noun(name, schema)
    if name == "string":
        return _string_noun(schema)
    if name == "array":
        items = schema.get("items")
        if isinstance(items, dict) and len(items) == 1 and items.get("type") in _PLURALS:
            return f"a list of {_PLURALS[items['type']]}"
    return _TYPE_NOUNS.get(name, f"a {name}")


def _number_noun(name: str, schema: dict[str, Any]) -> str:
    low, high = schema.get("minimum"), schema.get("maximum")
    above = schema.get("exclusiveMinimum")
    if high is None and schema.get("exclusiveMaximum") is None:
        if above == 0 or (low == 1 and name == "integer"):
            return f"a positive {name}"
        if low == 0 and above is None:
            return f"a non-negative {name}"
    noun = _TYPE_NOUNS[name]
    bounds = [
        f"{op} {bound}"
        for op, bound in (
            (">=", low),
            (">", above),
            ("<=", high),
            ("<", schema.get("exclusiveMaximum")),
        )
        if bound is not None
    ]
    return f"{noun} {' and '.join(bounds)}" if bounds else noun


def _string_noun(schema: dict[str, Any]) -> str:
    shortest, longest = schema.get("minLength"), schema.get("maxLength")
    parts = []
    if schema.get("format") == "cas_ref":
        parts.append("a 13-character node hash")
    elif shortest == 1:
        parts.append("a non-empty string")
    elif isinstance(shortest, int) and shortest > 1:
        parts.append(f"a string of at least {shortest} characters")
    else:
        parts.append("a string")
    if isinstance(longest, int):
        parts.append(f"of at most {longest} characters")
    if isinstance(schema.get("pattern"), str):
        parts.append(f"matching {schema['pattern']}")
    return " ".join(parts)
