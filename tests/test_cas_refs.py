"""References between nodes: collect, refs, walk and expand (docs/format.md, "Nodes")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from uwf.backend.memory import MemoryStore
from uwf.cas import codec
from uwf.cas.refs import collect, expand, refs, walk
from uwf.cas.schema import meta_hash
from uwf.protocol import schemas, workflow_schemas
from uwf.util.errors import NotFound

CAS_REF: dict[str, Any] = {"type": "string", "format": "cas_ref"}
A, B, C = (codec.node_hash("0000000000000", i) for i in range(3))

# -- collect ----------------------------------------------------------------------------------


def test_collect_cas_ref() -> None:
    assert collect(CAS_REF, A) == [A]


@pytest.mark.parametrize("value", ["not a hash", "0123456789abc", "", 42, None, [A], {"x": A}])
def test_collect_cas_ref_ignores_what_is_not_a_hash_string(value: Any) -> None:
    assert collect(CAS_REF, value) == []


def test_collect_ignores_strings_without_the_format() -> None:
    assert collect({"type": "string"}, A) == []
    assert collect({"type": "object", "properties": {"x": {"type": "string"}}}, {"x": A}) == []


@pytest.mark.parametrize("key", ["anyOf", "oneOf"])
def test_collect_union_branches(key: str) -> None:
    schema = {key: [CAS_REF, {"type": "null"}]}
    assert collect(schema, A) == [A]
    assert collect(schema, None) == []
    array_or_ref = {key: [CAS_REF, {"type": "array", "items": CAS_REF}]}
    assert collect(array_or_ref, [B, C]) == [B, C]


def test_collect_items() -> None:
    schema = {"type": "array", "items": CAS_REF}
    assert collect(schema, [A, B, A, "nope", None]) == [A, B]
    assert collect(schema, []) == []
    assert collect({"type": "array", "items": {"type": "string"}}, [A]) == []


def test_collect_properties_in_schema_order() -> None:
    schema = {
        "type": "object",
        "properties": {"first": CAS_REF, "second": CAS_REF, "absent": CAS_REF, "text": {}},
    }
    value = {"text": C, "second": B, "first": A, "unlisted": C}
    assert collect(schema, value) == [A, B]


def test_collect_additional_properties() -> None:
    schema = {"type": "object", "properties": {"own": CAS_REF}, "additionalProperties": CAS_REF}
    assert collect(schema, {"x": B, "own": A, "y": C}) == [A, B, C]
    for flag in (True, False):
        closed = {"type": "object", "properties": {"own": CAS_REF}, "additionalProperties": flag}
        assert collect(closed, {"own": A, "x": B}) == [A]


def test_collect_nested_additional_properties() -> None:
    # The Workflow shape: roles is a map of role definitions, each with a cas_ref ``meta``.
    roles = {"planner": {"meta": A, "goal": B}, "coder": {"meta": C}}
    assert collect(workflow_schemas.WORKFLOW, {"roles": roles, "graph": {}}) == [A, C]


def test_collect_null_and_non_schemas() -> None:
    assert collect(CAS_REF, None) == []
    assert collect({"type": "object", "properties": {"x": CAS_REF}}, {"x": None}) == []
    assert collect(True, A) == []
    assert collect(None, A) == []


def test_collect_appends_to_out_without_duplicates() -> None:
    out = [A]
    assert collect({"type": "array", "items": CAS_REF}, [A, B], out) is out
    assert out == [A, B]


# -- a stored chain ---------------------------------------------------------------------------

ROLE_SCHEMA: dict[str, Any] = {
    "title": "plan",
    "type": "object",
    "required": ["status"],
    "properties": {"status": {"type": "string"}, "plan": {"type": "string"}},
}


@dataclass
class Chain:
    store: MemoryStore
    role_schema: str
    workflow: str
    start: str
    out1: str
    det1: str
    step1: str
    out2: str
    det2: str
    step2: str


@pytest.fixture
def chain() -> Chain:
    """A workflow, a StartNode and two StepNodes, each with an output and a detail."""
    store = MemoryStore()
    h = schemas.ensure(store)
    role_schema = store.put_schema(ROLE_SCHEMA)
    role = {
        "description": "plans",
        "goal": "a plan",
        "capabilities": ["think"],
        "procedure": "think",
        "output": "a plan",
        "meta": role_schema,
    }
    workflow = store.put(
        h.workflow,
        {
            "name": "demo",
            "description": "a demo",
            "roles": {"planner": role},
            "graph": {
                "$START": {"_": {"role": "planner", "prompt": "go"}},
                "planner": {"_": {"role": "$END", "prompt": "done"}},
            },
        },
    )
    start = store.put(h.start, {"workflow": workflow, "prompt": "do it"})
    out1 = store.put(role_schema, {"status": "_", "plan": "one"})
    det1 = store.put(h.text, "the first transcript")
    step1 = store.put(
        h.step,
        {
            "start": start,
            "prev": None,
            "role": "planner",
            "output": out1,
            "detail": det1,
            "agent": "uwf-mock",
        },
    )
    out2 = store.put(role_schema, {"status": "_", "plan": "two"})
    det2 = store.put(h.text, "the second transcript")
    step2 = store.put(
        h.step,
        {
            "start": start,
            "prev": step1,
            "role": "planner",
            "output": out2,
            "detail": det2,
            "agent": "uwf-mock",
        },
    )
    return Chain(store, role_schema, workflow, start, out1, det1, step1, out2, det2, step2)


def test_refs_of_step_nodes(chain: Chain) -> None:
    assert refs(chain.store, chain.step1) == [chain.start, chain.out1, chain.det1]
    assert refs(chain.store, chain.step2) == [chain.start, chain.step1, chain.out2, chain.det2]


def test_refs_of_other_nodes(chain: Chain) -> None:
    assert refs(chain.store, chain.start) == [chain.workflow]
    assert refs(chain.store, chain.workflow) == [chain.role_schema]
    assert refs(chain.store, chain.out1) == []
    assert refs(chain.store, chain.det1) == []
    assert refs(chain.store, chain.role_schema) == []  # the type link is not a ref
    assert refs(chain.store, meta_hash()) == []


def test_refs_of_a_missing_node(chain: Chain) -> None:
    with pytest.raises(NotFound) as info:
        refs(chain.store, A)
    assert str(info.value) == f"node not found: {A}"


def test_refs_when_the_type_schema_is_missing(chain: Chain) -> None:
    chain.store.delete(schemas.hashes().start)
    assert refs(chain.store, chain.start) == []


def test_walk_is_breadth_first_root_first(chain: Chain) -> None:
    assert walk(chain.store, chain.step2) == [
        chain.step2,
        chain.start,
        chain.step1,
        chain.out2,
        chain.det2,
        chain.workflow,
        chain.out1,
        chain.det1,
        chain.role_schema,
    ]


def test_walk_visits_each_node_once(chain: Chain) -> None:
    order = walk(chain.store, chain.step2)
    assert len(order) == len(set(order))
    assert walk(chain.store, chain.start) == [chain.start, chain.workflow, chain.role_schema]


def test_walk_skips_missing_nodes(chain: Chain) -> None:
    chain.store.delete(chain.step1)
    chain.store.delete(chain.workflow)
    assert walk(chain.store, chain.step2) == [chain.step2, chain.start, chain.out2, chain.det2]


def test_walk_of_a_missing_root(chain: Chain) -> None:
    assert walk(chain.store, A) == []


def test_walk_diamond() -> None:
    store = MemoryStore()
    link = store.put_schema(
        {"type": "object", "properties": {"to": {"type": "array", "items": CAS_REF}}}
    )
    d = store.put(link, {"to": []})
    b = store.put(link, {"to": [d]})
    c = store.put(link, {"to": [d, "00000000000AB"]})
    a = store.put(link, {"to": [b, c]})
    assert walk(store, a) == [a, b, c, d]


# -- expand -----------------------------------------------------------------------------------


def test_expand_step_node(chain: Chain) -> None:
    node = chain.store.require(chain.step2)
    expanded = expand(chain.store, schemas.STEP_NODE, node.payload)
    workflow = chain.store.require(chain.workflow).payload
    step1 = expanded["prev"]
    assert expanded["start"] == {"workflow": workflow, "prompt": "do it"}
    # additionalProperties is not followed by expand: the role's meta stays a hash.
    assert expanded["start"]["workflow"]["roles"]["planner"]["meta"] == chain.role_schema
    assert expanded["output"] == {"status": "_", "plan": "two"}
    assert expanded["detail"] == "the second transcript"
    assert step1["prev"] is None
    assert step1["output"] == {"status": "_", "plan": "one"}
    assert step1["start"] == expanded["start"]
    assert expanded["role"] == "planner"


def test_expand_keeps_missing_refs_and_raw_payloads(chain: Chain) -> None:
    node = chain.store.require(chain.step1)
    chain.store.delete(chain.det1)
    chain.store.delete(schemas.hashes().start)  # the start node's type is gone: raw payload
    expanded = expand(chain.store, schemas.STEP_NODE, node.payload)
    assert expanded["detail"] == chain.det1
    assert expanded["start"] == {"workflow": chain.workflow, "prompt": "do it"}


def test_expand_cycle_guard(chain: Chain) -> None:
    node = chain.store.require(chain.step2)
    expanded = expand(chain.store, schemas.STEP_NODE, node.payload, frozenset({chain.start}))
    assert expanded["start"] == chain.start  # already being expanded: left as the hash
    assert expanded["prev"]["start"] == chain.start
    assert expanded["output"] == {"status": "_", "plan": "two"}


def test_expand_items_and_non_refs() -> None:
    store = MemoryStore()
    text = schemas.ensure(store).text
    t1, t2 = store.put(text, "one"), store.put(text, "two")
    schema = {"type": "array", "items": CAS_REF}
    assert expand(store, schema, [t1, t2, "nope"]) == ["one", "two", "nope"]
    assert expand(store, {"type": "string"}, t1) == t1
    assert expand(store, CAS_REF, None) is None
