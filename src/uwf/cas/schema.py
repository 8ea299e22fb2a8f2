"""The meta-schema and JSON Schema 2020-12 validation with the ``cas_ref`` format.

jsonschema is imported only here and only when something is validated, so read-only
commands never pay for it.
"""

from __future__ import annotations

import functools
from typing import Any

from uwf.cas import codec, wording
from uwf.util.base32 import NodeHash, is_hash
from uwf.util.errors import InvalidInput

META_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "(meta-schema)",
    "description": (
        "uwf meta-schema: every JSON Schema in the store is a node of this type, and this node "
        "is its own type. Node hash: crockford13(xxh64(ascii(type) ++ dcbor(payload)))."
    ),
    "type": ["object", "boolean"],
}


@functools.cache
def meta_hash() -> NodeHash:
    return codec.self_typed_hash(META_SCHEMA)


@functools.cache
def _format_checker() -> Any:
    from jsonschema import FormatChecker

    checker = FormatChecker()
    # a format constrains strings only (2020-12); other types pass it
    checker.checks("cas_ref")(lambda value: not isinstance(value, str) or is_hash(value))
    return checker


#: Each stored schema's validator, by its node hash (a stored schema never changes): at most
#: ``_VALIDATORS`` of them, a process running for days forgetting them all at once past that.
_validators: dict[str, Any] = {}
_VALIDATORS = 256


def _validator(schema: Any, key: str | None) -> Any:
    from jsonschema import Draft202012Validator

    if key is not None and key in _validators:
        return _validators[key]
    validator = Draft202012Validator(schema, format_checker=_format_checker())
    if key is not None:
        if len(_validators) >= _VALIDATORS:
            _validators.clear()
        _validators[key] = validator
    return validator


def validate(schema: Any, payload: Any, key: str | None = None) -> list[str]:
    """Problems of a node's ``payload`` against ``schema`` (empty when valid), one line each,
    located by JSON Pointer: ``at /n: expected a number, got "one"``.

    The fast subset validator answers for valid payloads of ordinary schemas without importing
    jsonschema; jsonschema decides everything else, and ``uwf.cas.wording`` words it.
    """
    return [
        f"at {wording.pointer(path)}: {what}" if path else what
        for path, what in problems(schema, payload, key)
    ]


def field_problems(schema: Any, payload: Any, key: str | None = None) -> list[str]:
    """Problems of a document against its schema, each naming its field the way an author
    reads it: ``notes: expected a string, got a boolean``, ``phases[0].name: …``."""
    return [
        f"{wording.where(payload, path)}: {what}" if path else what
        for path, what in problems(schema, payload, key)
    ]


def problems(schema: Any, payload: Any, key: str | None = None) -> list[tuple[list[Any], str]]:
    """(path, what) of every problem of ``payload``, top to bottom of the document; [] when
    it is valid. jsonschema only when the fast subset validator cannot say it is valid."""
    from uwf.cas import fastschema

    if fastschema.is_valid(schema, payload, key) is True:
        return []
    found: dict[tuple[tuple[Any, ...], str], list[Any]] = {}
    for error in _validator(schema, key).iter_errors(payload):
        for path, what in _worded(error):
            found.setdefault((tuple(path), what), path)
    ranked = sorted(found.items(), key=lambda item: wording.order(payload, item[1]))
    return [(path, what) for (_, what), path in ranked]


# Keywords whose failure is a value out of range (not of the wrong type): "got <the value>".
_VALUE_KEYWORDS = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "format",
        "enum",
        "const",
        "minItems",
        "maxItems",
    }
)


def _worded(error: Any) -> list[tuple[list[Any], str]]:
    """One jsonschema error in uwf's words (``uwf.cas.wording``); a keyword it has no words
    for keeps jsonschema's message."""
    path, instance, sub = list(error.absolute_path), error.instance, error.schema
    keyword, value = error.validator, error.validator_value
    if keyword == "required" and isinstance(instance, dict) and isinstance(sub, dict):
        properties = sub.get("properties", {})
        return [
            ([*path, name], _missing(properties.get(name)))
            for name in value
            if name not in instance
        ]
    if keyword == "additionalProperties" and value is False and isinstance(instance, dict):
        return _unknown_keys(path, instance, sub)
    if keyword == "type":
        return [(path, f"expected {wording.expected(sub)}, got {wording.kind(instance)}")]
    if keyword in _VALUE_KEYWORDS:
        return [(path, f"expected {wording.expected(sub)}, got {wording.literal(instance)}")]
    if keyword in ("anyOf", "oneOf") and error.context:
        return _branches(error, path)
    return [(path, _short(error.message))]


def _missing(schema: Any) -> str:
    return "missing" if schema is None else f"missing (expected {wording.expected(schema)})"


def _unknown_keys(
    path: list[Any], instance: dict[Any, Any], sub: Any
) -> list[tuple[list[Any], str]]:
    import re

    known = list(sub.get("properties", {})) if isinstance(sub, dict) else []
    patterns = list(sub.get("patternProperties", {})) if isinstance(sub, dict) else []
    hint = f" (known keys: {', '.join(known)})" if known else ""
    return [
        ([*path, key], f"unknown key {wording.key_text(key)}{hint}")
        for key in instance
        if key not in known
        and not (isinstance(key, str) and any(re.search(p, key) for p in patterns))
    ]


def _branches(error: Any, path: list[Any]) -> list[tuple[list[Any], str]]:
    """An ``anyOf``/``oneOf`` no branch of which accepts the value: the type every branch
    expects when none takes the value's type, else the most relevant branch's problem."""
    from jsonschema.exceptions import best_match

    deeper = [e for e in error.context if e.validator != "type" or e.relative_path]
    if not deeper:  # no branch takes the value's type
        found = wording.kind(error.instance)
        return [(path, f"expected {wording.expected(error.schema)}, got {found}")]
    return _worded(best_match(deeper))


def check_schema(schema: Any) -> None:
    """Raise InvalidInput unless ``schema`` is a valid JSON Schema 2020-12."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import SchemaError

    if not isinstance(schema, (dict, bool)):
        raise InvalidInput("a schema must be a JSON object or a boolean")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise InvalidInput(f"invalid JSON Schema: {_short(exc.message)}") from None


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"
