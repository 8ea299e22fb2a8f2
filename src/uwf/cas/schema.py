"""The meta-schema and JSON Schema 2020-12 validation with the ``cas_ref`` format.

jsonschema is imported only here and only when something is validated, so read-only
commands never pay for it.
"""

from __future__ import annotations

import functools
from typing import Any

from uwf.cas import codec
from uwf.util.base32 import is_hash
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
def meta_hash() -> str:
    return codec.self_typed_hash(META_SCHEMA)


@functools.cache
def _format_checker() -> Any:
    from jsonschema import FormatChecker

    checker = FormatChecker()
    # a format constrains strings only (2020-12); other types pass it
    checker.checks("cas_ref")(lambda value: not isinstance(value, str) or is_hash(value))
    return checker


_validators: dict[str, Any] = {}


def _validator(schema: Any, key: str | None) -> Any:
    from jsonschema import Draft202012Validator

    if key is not None and key in _validators:
        return _validators[key]
    validator = Draft202012Validator(schema, format_checker=_format_checker())
    if key is not None:
        _validators[key] = validator
    return validator


def validate(schema: Any, payload: Any, key: str | None = None) -> list[str]:
    """Problems of ``payload`` against ``schema`` (empty when valid), best first, one line each.

    The fast subset validator answers for valid payloads of ordinary schemas without importing
    jsonschema; jsonschema decides everything else and words every problem.
    """
    out = []
    for path, message in _errors(schema, payload, key):
        where = "/".join(str(p) for p in path)
        out.append(f"{'at /' + where + ': ' if where else ''}{message}")
    return out


def field_problems(schema: Any, payload: Any) -> list[str]:
    """Problems of an output against its role's schema, each naming its field the way an
    author reads it: ``notes: False is not of type 'string'``, ``phases[0].name: …``."""
    out = []
    for path, message in _errors(schema, payload, None):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
        out.append(f"{where}: {message}" if where else message)
    return out


def _errors(schema: Any, payload: Any, key: str | None) -> list[tuple[list[Any], str]]:
    """(path, message) of every problem, best first; jsonschema only when the fast subset
    validator cannot answer for a valid payload."""
    from uwf.cas import fastschema

    if fastschema.is_valid(schema, payload) is True:
        return []
    validator = _validator(schema, key)
    errors = sorted(validator.iter_errors(payload), key=lambda e: (len(e.path), str(e.path)))
    return [(list(err.absolute_path), _short(err.message)) for err in errors]


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
