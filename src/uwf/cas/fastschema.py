"""A strict fast path for the JSON Schema subset that uwf's own schemas and typical role
schemas use, so that a step does not pay for importing jsonschema (~130 ms of imports,
attrs code generation and regex compiling) on every agent run.

``is_valid(schema, value)`` answers True or False only when every keyword it meets is in
the subset ``supported`` accepts, with JSON Schema 2020-12 semantics; it answers None
otherwise, and the caller falls back to jsonschema. The caller also uses jsonschema to word
the problems of an invalid value, so messages never depend on this module.
tests/test_fastschema.py checks with hypothesis that the two agree on every answer given
here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from uwf.util.base32 import is_hash

#: The annotation with which a schema names what it expects, in a user's words (``a mapping of
#: role name -> role definition``): uwf's own schemas use it, ``uwf.cas.wording`` reads it,
#: validators ignore it. Here, so that the fast path imports nothing more to know it.
EXPECTED = "x-expected"

# Keywords that never affect validity.
_ANNOTATIONS = frozenset(
    {
        "$schema",
        "$comment",
        "$defs",
        "definitions",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        EXPECTED,
    }
)


def supported(schema: Any) -> bool:
    """True when ``schema`` (recursively) uses only the subset this module decides."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    return all(key in _ANNOTATIONS or _keyword_ok(key, sub) for key, sub in schema.items())


def _keyword_ok(key: str, sub: Any) -> bool:
    if key == "type":
        names = sub if isinstance(sub, list) else [sub]
        return all(isinstance(n, str) and n in _TYPES for n in names)
    if key == "format":
        return bool(sub == "cas_ref")
    if key in ("items", "additionalProperties", "not"):
        return supported(sub)
    if key in ("anyOf", "oneOf", "allOf"):
        return isinstance(sub, list) and bool(sub) and all(supported(b) for b in sub)
    if key == "properties":
        return isinstance(sub, dict) and all(supported(b) for b in sub.values())
    if key == "enum":
        return isinstance(sub, list)
    if key == "required":
        return isinstance(sub, list) and all(isinstance(r, str) for r in sub)
    if key in _COUNTS:
        return isinstance(sub, int) and not isinstance(sub, bool) and sub >= 0
    if key in _BOUNDS:
        return _is_number(sub)
    if key == "pattern":
        return _compiles(sub)
    return key == "const"


#: Whether each schema named by a key (its node hash: a stored schema never changes) is inside
#: the subset, decided once per process rather than at every validation.
_SUPPORTED: dict[str, bool] = {}
_SUPPORTED_LIMIT = 4096


def is_valid(schema: Any, value: Any, key: str | None = None) -> bool | None:
    """True/False when the schema is inside the subset, else None (use jsonschema). ``key``
    names a schema that never changes (its node hash), so that the subset is checked once."""
    if key is None:
        inside = supported(schema)
    else:
        found = _SUPPORTED.get(key)
        if found is None:
            found = supported(schema)
            if len(_SUPPORTED) >= _SUPPORTED_LIMIT:
                _SUPPORTED.clear()
            _SUPPORTED[key] = found
        inside = found
    if not inside:
        return None
    return _valid(schema, value)


_TYPES = frozenset({"string", "object", "array", "null", "boolean", "number", "integer"})
_COUNTS = frozenset(
    {"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"}
)
_BOUNDS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"})


def _compiles(pattern: Any) -> bool:
    if not isinstance(pattern, str):
        return False
    try:
        re.compile(pattern)
    except re.error:
        return False
    return True


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _type_ok(name: str, v: Any) -> bool:
    if name == "string":
        return isinstance(v, str)
    if name == "object":
        return isinstance(v, dict)
    if name == "array":
        return isinstance(v, list)
    if name == "null":
        return v is None
    if name == "boolean":
        return isinstance(v, bool)
    if name == "number":
        return _is_number(v)
    # integer: 2020-12 counts 1.0 as an integer
    return _is_number(v) and (isinstance(v, int) or (math.isfinite(v) and v.is_integer()))


def _equal(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true is not 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


_NUMBER_TESTS: tuple[tuple[str, Callable[[Any, Any], bool]], ...] = (
    ("minimum", lambda a, b: a >= b),
    ("maximum", lambda a, b: a <= b),
    ("exclusiveMinimum", lambda a, b: a > b),
    ("exclusiveMaximum", lambda a, b: a < b),
)


def _valid(schema: Any, v: Any) -> bool:
    if isinstance(schema, bool):
        return schema
    t = schema.get("type")
    if t is not None and not any(_type_ok(n, v) for n in (t if isinstance(t, list) else [t])):
        return False
    if "enum" in schema and not any(_equal(v, e) for e in schema["enum"]):
        return False
    if "const" in schema and not _equal(v, schema["const"]):
        return False
    if "format" in schema and isinstance(v, str) and not is_hash(v):
        return False
    if "anyOf" in schema and not any(_valid(b, v) for b in schema["anyOf"]):
        return False
    if "oneOf" in schema and sum(1 for b in schema["oneOf"] if _valid(b, v)) != 1:
        return False
    if "allOf" in schema and not all(_valid(b, v) for b in schema["allOf"]):
        return False
    if "not" in schema and _valid(schema["not"], v):
        return False
    if _is_number(v):
        for key, test in _NUMBER_TESTS:
            if key in schema and not test(v, schema[key]):
                return False
    elif isinstance(v, str):
        if "minLength" in schema and len(v) < schema["minLength"]:
            return False
        if "maxLength" in schema and len(v) > schema["maxLength"]:
            return False
        if "pattern" in schema and re.search(schema["pattern"], v) is None:
            return False
    elif isinstance(v, list):
        if "minItems" in schema and len(v) < schema["minItems"]:
            return False
        if "maxItems" in schema and len(v) > schema["maxItems"]:
            return False
        if "items" in schema and not all(_valid(schema["items"], x) for x in v):
            return False
    elif isinstance(v, dict):
        if "minProperties" in schema and len(v) < schema["minProperties"]:
            return False
        if "maxProperties" in schema and len(v) > schema["maxProperties"]:
            return False
        if not all(k in v for k in schema.get("required", ())):
            return False
        props = schema.get("properties", {})
        if not all(_valid(sub, v[k]) for k, sub in props.items() if k in v):
            return False
        if "additionalProperties" in schema:
            extra = schema["additionalProperties"]
            if not all(_valid(extra, x) for k, x in v.items() if k not in props):
                return False
    return True
