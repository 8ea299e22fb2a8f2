"""What a role can emit: one rule for the validator, the prompts and the fast path.

Table tests of ``uwf.moderator.emits`` (shapes, fields, statuses), then checks that the three
users agree on the schemas where they used to disagree (nested unions, an ``anyOf`` with no
object member beside a ``oneOf``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from uwf.agent_kit.deliverable import build_output_format_instruction
from uwf.agent_kit.fastpath import candidate
from uwf.engine.workflows.files import load_file
from uwf.moderator import emits
from uwf.moderator.emits import Field, Statuses

S = {"type": "string"}
ENUM_AB = {"enum": ["a", "b"]}

# schema -> the names of its fields (in order) and which are required
FIELD_TABLE: list[tuple[Any, list[tuple[str, bool]]]] = [
    (True, []),
    ({}, []),
    ({"type": "string"}, []),
    ({"properties": "nope"}, []),
    ({"anyOf": "nope"}, []),
    ({"properties": {"x": S}}, [("x", False)]),
    ({"properties": {"x": S, "y": S}, "required": ["y", 3]}, [("x", False), ("y", True)]),
    # the schema's own properties win over its unions
    ({"properties": {"x": S}, "anyOf": [{"properties": {"y": S}}]}, [("x", False)]),
    # a union: fields in order of first appearance, required if any member requires them
    (
        {"anyOf": [{"properties": {"x": S}}, {"properties": {"x": S, "y": S}, "required": ["x"]}]},
        [("x", True), ("y", False)],
    ),
    # nested unions are read recursively
    (
        {"anyOf": [{"oneOf": [{"properties": {"x": S}}]}, {"properties": {"y": S}}]},
        [("x", False), ("y", False)],
    ),
    # anyOf first; oneOf only when anyOf gives no shape
    ({"anyOf": [{"properties": {"x": S}}], "oneOf": [{"properties": {"y": S}}]}, [("x", False)]),
    ({"anyOf": [{"type": "null"}], "oneOf": [{"properties": {"y": S}}]}, [("y", False)]),
]


@pytest.mark.parametrize(("schema", "expected"), FIELD_TABLE)
def test_fields(schema: Any, expected: list[tuple[str, bool]]) -> None:
    assert [(f.name, f.required) for f in emits.fields(schema)] == expected


def test_the_first_shape_naming_a_field_decides_its_schema() -> None:
    schema = {
        "oneOf": [
            {"properties": {"a": S}},
            {"properties": {"a": {"type": "number"}}, "required": ["a"]},
        ]
    }
    assert emits.fields(schema) == [Field("a", S, True)]


def test_unions_deeper_than_the_limit_give_no_shape() -> None:
    schema: dict[str, Any] = {"properties": {"x": S}}
    for _ in range(emits.MAX_DEPTH + 2):
        schema = {"anyOf": [schema]}
    assert emits.shapes(schema) == []


@pytest.mark.parametrize(
    ("prop", "resolved", "choices", "kind"),
    [
        (S, S, None, "string"),
        ({"enum": ["x", "y"]}, {"enum": ["x", "y"]}, ["x", "y"], None),
        ({"const": "x"}, {"const": "x"}, ["x"], None),
        ({"anyOf": [{"type": "null"}, {"type": "integer"}]}, {"type": "integer"}, None, "integer"),
        ({"type": ["boolean", "null"]}, {"type": ["boolean", "null"]}, None, "boolean"),
        ({"type": ["string", "number"]}, {"type": ["string", "number"]}, None, None),
        ("odd", {}, None, None),
    ],
)
def test_a_fields_values(prop: Any, resolved: Any, choices: Any, kind: Any) -> None:
    field = Field("f", prop, False)
    assert (field.resolved, field.choices, field.kind) == (resolved, choices, kind)


STATUS_TABLE: list[tuple[Any, Statuses]] = [
    ({}, emits.OPEN),
    (True, emits.OPEN),
    ({"properties": {"status": S}}, Statuses(known=False, open_status=True)),
    ({"properties": {"x": S}}, Statuses(known=True, unit_possible=True, declared=False)),
    (
        {"properties": {"status": ENUM_AB}, "required": ["status"]},
        Statuses(known=True, values=("a", "b")),
    ),
    (
        {"properties": {"status": ENUM_AB}},
        Statuses(known=True, values=("a", "b"), unit_possible=True),
    ),
    (
        {
            "properties": {"status": {"anyOf": [{"const": "a"}, {"type": "null"}]}},
            "required": ["status"],
        },
        Statuses(known=True, values=("a",), unit_possible=True),
    ),
    (
        {"properties": {"status": {"enum": ["a", None, True]}}, "required": ["status"]},
        Statuses(known=True, values=("a",), unit_possible=True, bad=(True,)),
    ),
    # a nested union: the status of the inner shape counts (one level only, before)
    (
        {
            "anyOf": [
                {"oneOf": [{"properties": {"status": {"const": "a"}}, "required": ["status"]}]}
            ]
        },
        Statuses(known=True, values=("a",)),
    ),
    # a shape without status routes on "_"
    (
        {
            "anyOf": [
                {"properties": {"status": {"const": "a"}}, "required": ["status"]},
                {"properties": {"x": S}},
            ]
        },
        Statuses(known=True, values=("a",), unit_possible=True),
    ),
]


@pytest.mark.parametrize(("schema", "expected"), STATUS_TABLE)
def test_statuses(schema: Any, expected: Statuses) -> None:
    assert emits.statuses(schema) == expected


# -- the three users agree ---------------------------------------------------------------------

NESTED = {
    "anyOf": [
        {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {"status": {"enum": ["approved", "rejected"]}, "notes": S},
                    "required": ["status"],
                }
            ]
        }
    ]
}


def _workflow(tmp_path: Path, meta: dict[str, Any], edges: dict[str, str]) -> Path:
    doc = {
        "name": "wf",
        "description": "d",
        "roles": {
            "reviewer": {
                "description": "d",
                "goal": "g",
                "capabilities": [],
                "procedure": "p",
                "output": "o",
                "meta": meta,
            }
        },
        "graph": {
            "$START": {"_": {"role": "reviewer", "prompt": "review"}},
            "reviewer": {s: {"role": "$END", "prompt": p} for s, p in edges.items()},
        },
    }
    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_validator_prompts_and_fast_path_read_a_nested_union_alike(tmp_path: Path) -> None:
    edges = {"approved": "ok: {{notes}}", "rejected": "no: {{notes}}"}
    assert load_file(_workflow(tmp_path, NESTED, edges))["warnings"] == []
    text = build_output_format_instruction(NESTED)
    assert "status: approved  # required | approved | rejected\nnotes: <string>\n" in text
    assert candidate("status: rejected\nnotes: fix it\nother: 1\n", NESTED) == {
        "status": "rejected",
        "notes": "fix it",
    }
