"""The one wording of a JSON Schema's problems (uwf.cas.wording, uwf.cas.schema.problems):
what every schema check prints, table-tested (docs/errors.md, "Schema problems")."""

from __future__ import annotations

from typing import Any

import pytest

from uwf.cas import wording
from uwf.cas.schema import field_problems, validate

ITEM: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["status", "notes"],
    "properties": {
        "status": {"type": "string", "enum": ["ok", "again"]},
        "notes": {"type": "string"},
        "items": {"type": "array", "items": {"type": "integer"}},
        "prev": {"anyOf": [{"type": "string", "format": "cas_ref"}, {"type": "null"}]},
        "odd key": {"type": "integer", "minimum": 0},
    },
}


@pytest.mark.parametrize(
    ("schema", "noun"),
    [
        ({"type": "string"}, "a string"),
        ({"type": "string", "minLength": 1}, "a non-empty string"),
        ({"type": "string", "maxLength": 5}, "a string of at most 5 characters"),
        ({"type": "string", "pattern": "^[a-z]+$"}, "a string matching ^[a-z]+$"),
        ({"type": "string", "format": "cas_ref"}, "a 13-character node hash"),
        ({"type": "integer", "minimum": 1}, "a positive integer"),
        ({"type": "integer", "minimum": 0}, "a non-negative integer"),
        ({"type": "number", "exclusiveMinimum": 0}, "a positive number"),
        ({"type": "integer", "minimum": 2, "maximum": 9}, "an integer >= 2 and <= 9"),
        ({"type": "array", "items": {"type": "string"}}, "a list of strings"),
        ({"type": "array"}, "a list"),
        ({"type": ["object", "null"]}, "a mapping or null"),
        ({"enum": ["ok", 1, None]}, 'one of "ok", 1, null'),
        ({"const": True}, "true"),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "a string or null"),
        ({"type": "object", "x-expected": "a mapping {role, prompt}"}, "a mapping {role, prompt}"),
        (True, "any value"),
        (False, "nothing (no value is allowed here)"),
    ],
)
def test_what_a_schema_expects(schema: Any, noun: str) -> None:
    assert wording.expected(schema) == noun


@pytest.mark.parametrize(
    ("payload", "lines"),
    [
        ({"status": "ok", "notes": "n"}, []),
        (
            {"status": "maybe", "notes": False, "items": [1, "x"], "zz": 1, "prev": 3},
            [  # top to bottom of the document
                'status: expected one of "ok", "again", got "maybe"',
                "notes: expected a string, got a boolean",
                "items[1]: expected an integer, got a string",
                'zz: unknown key "zz" (known keys: status, notes, items, prev, odd key)',
                "prev: expected a 13-character node hash or null, got an integer",
            ],
        ),
        ({"status": "ok"}, ["notes: missing (expected a string)"]),
        (
            {"status": "ok", "notes": "n", "prev": "abc"},
            ['prev: expected a 13-character node hash, got "abc"'],
        ),
        (
            {"status": "ok", "notes": "n", "odd key": -1},
            ['["odd key"]: expected a non-negative integer, got -1'],
        ),
        ("text", ["expected a mapping, got a string"]),
    ],
)
def test_field_problems(payload: Any, lines: list[str]) -> None:
    assert field_problems(ITEM, payload) == lines


def test_a_node_payload_is_located_by_json_pointer() -> None:
    assert validate(ITEM, {"status": "ok", "notes": "n", "items": [True]}) == [
        "at /items/0: expected an integer, got a boolean"
    ]
    assert validate(ITEM, []) == ["expected a mapping, got a list"]


def test_a_keyword_without_words_keeps_the_validators_message() -> None:
    assert field_problems({"type": "array", "uniqueItems": True}, [1, 1]) == [
        "[1, 1] has non-unique elements"
    ]


@pytest.mark.parametrize(
    ("value", "text"),
    [("x", '"x"'), (0, "0"), (1.5, "1.5"), (None, "null"), (False, "false"), ([1], "a list")],
)
def test_a_found_value_is_shown_as_json(value: Any, text: str) -> None:
    assert wording.literal(value) == text
