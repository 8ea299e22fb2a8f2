"""The fast subset validator must agree with jsonschema on every answer it gives."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, FormatChecker

from support import tiers
from uwf.cas import fastschema
from uwf.protocol import schemas, workflow_schemas
from uwf.util.base32 import is_hash

CHECKER = FormatChecker()
CHECKER.checks("cas_ref")(lambda v: not isinstance(v, str) or is_hash(v))

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5)
    | st.sampled_from([0.0, 1.0, 1.5, -2.5])
    | st.sampled_from(["", "a", "abc", "0123456789ABC", "_", "approved"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["a", "b", "status", "x"]), inner, max_size=3)
    ),
    max_leaves=8,
)

type_names = st.sampled_from(["string", "object", "array", "null", "boolean", "number", "integer"])


def schemas_strategy() -> st.SearchStrategy[Any]:
    leaf = st.one_of(
        st.booleans(),
        st.builds(lambda t: {"type": t}, type_names | st.lists(type_names, min_size=1, max_size=3)),
        st.builds(lambda e: {"enum": e}, st.lists(json_values, min_size=1, max_size=3)),
        st.builds(lambda c: {"const": c}, json_values),
        st.just({"type": "string", "format": "cas_ref"}),
        st.just({"format": "cas_ref"}),
        st.builds(lambda n: {"minLength": n}, st.integers(0, 3)),
        st.builds(lambda n: {"maxItems": n}, st.integers(0, 2)),
        st.builds(lambda n: {"minimum": n}, st.integers(-2, 2)),
        st.builds(lambda n: {"exclusiveMaximum": n}, st.sampled_from([0, 1.5, 3])),
        st.just({"pattern": "^a"}),
        st.builds(
            lambda r: {"type": "object", "required": r},
            st.lists(st.sampled_from(["a", "b", "status"]), max_size=2, unique=True),
        ),
    )

    def extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        return st.one_of(
            st.builds(
                lambda p, extra: {"type": "object", "properties": p, "additionalProperties": extra},
                st.dictionaries(st.sampled_from(["a", "b", "status"]), inner, max_size=2),
                inner,
            ),
            st.builds(lambda i: {"type": "array", "items": i}, inner),
            st.builds(lambda bs: {"anyOf": bs}, st.lists(inner, min_size=1, max_size=3)),
            st.builds(lambda bs: {"oneOf": bs}, st.lists(inner, min_size=1, max_size=3)),
            st.builds(lambda bs: {"allOf": bs}, st.lists(inner, min_size=1, max_size=2)),
            st.builds(lambda n: {"not": n}, inner),
            st.builds(
                lambda a, b: {**a, **b} if isinstance(a, dict) and isinstance(b, dict) else a,
                inner,
                inner,
            ),
        )

    return st.recursive(leaf, extend, max_leaves=6)


@tiers("examples", 300, 1500)
def test_agrees_with_jsonschema(examples: int) -> None:
    @settings(max_examples=examples, deadline=None)
    @given(schemas_strategy(), json_values)
    def agrees(schema: Any, value: Any) -> None:
        verdict = fastschema.is_valid(schema, value)
        assert verdict is not None  # every generated schema is inside the subset
        expected = Draft202012Validator(schema, format_checker=CHECKER).is_valid(value)
        assert verdict is expected

    agrees()


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/$defs/x"},
        {"format": "email"},
        {"patternProperties": {}},
        {"type": "object", "properties": {"a": {"uniqueItems": True}}},
        {"prefixItems": []},
        {"items": {"contains": {}}},
        {"type": "date"},
        "not a schema",
    ],
)
def test_anything_else_is_left_to_jsonschema(schema: Any) -> None:
    assert fastschema.supported(schema) is False
    assert fastschema.is_valid(schema, {}) is None


def test_uwf_schemas_are_inside_the_subset() -> None:
    for schema in (workflow_schemas.WORKFLOW, schemas.START_NODE, schemas.STEP_NODE, schemas.TEXT):
        assert fastschema.supported(schema)
