"""The moderator is a pure function of (graph, last role, last output): a table of cases."""

from __future__ import annotations

from typing import Any

import pytest

from uwf.moderator import END, START, Graph, evaluate
from uwf.moderator.evaluate import ModeratorError, check_template, status_of
from uwf.protocol.workflow import Edge, Role, Workflow
from uwf.util.base32 import NodeHash

GRAPH = Graph(
    {
        "$START": {"_": {"role": "planner", "prompt": "Plan: {{task}}"}},
        "planner": {"_": {"role": "developer", "prompt": "Implement {{plan}}"}},
        "developer": {"_": {"role": "reviewer", "prompt": "Review {{summary}}"}},
        "reviewer": {
            "rejected": {"role": "developer", "prompt": "Fix: {{comments}}"},
            "approved": {"role": "$END", "prompt": "done"},
        },
    }
)

CASES = [
    # (last role, last output, next role, rendered prompt)
    (START, {}, "planner", "Plan: "),
    (START, {"status": "rejected", "task": "x"}, "planner", "Plan: x"),  # $START always routes on _
    ("planner", {"plan": "P"}, "developer", "Implement P"),  # no status -> unit status
    ("planner", {"status": 3, "plan": "P"}, "developer", "Implement P"),  # non-string -> _
    ("developer", "not an object", "reviewer", "Review "),
    ("reviewer", {"status": "rejected", "comments": "add tests"}, "developer", "Fix: add tests"),
    ("reviewer", {"status": "approved"}, END, "done"),
]


@pytest.mark.parametrize(("role", "output", "next_role", "prompt"), CASES)
def test_routing_table(role: str, output: Any, next_role: str, prompt: str) -> None:
    decision = evaluate(GRAPH, role, output)
    assert (decision.role, decision.prompt) == (next_role, prompt)
    assert decision.done is (next_role == END)


def test_unknown_role() -> None:
    with pytest.raises(ModeratorError) as err:
        evaluate(GRAPH, "unknown-role", {})
    assert str(err.value) == 'no transitions defined for role "unknown-role"'


def test_unknown_status() -> None:
    with pytest.raises(ModeratorError) as err:
        evaluate(GRAPH, "reviewer", {"status": "pending"})
    assert str(err.value) == 'no transition for role "reviewer" with status "pending"'


RENDER = [
    ("{{a.b}}", {"a": {"b": "nested"}}, "nested"),
    ("{{x}}", {"x": '<T> & "Result<T, E>"'}, '<T> & "Result<T, E>"'),
    ("{{{x}}}", {"x": "<b>&"}, "<b>&"),
    ("{{&x}}", {"x": "<b>"}, "<b>"),
    ("{{missing}}|", {}, "|"),
    ("{{n}} {{f}} {{z}}", {"n": 1, "f": 0.5, "z": 0}, "1 0.5 0"),
    ("{{t}} {{u}}", {"t": True, "u": False}, "true false"),
    ("{{l}}", {"l": ["a", 1, True, None]}, "a,1,true,"),
    ("{{o}}", {"o": {"k": 1}}, "[object Object]"),
    ("{{#l}}[{{.}}]{{/l}}", {"l": ["a", "b"]}, "[a][b]"),
    ("{{#t}}yes{{/t}}{{^u}}no{{/u}}", {"t": True, "u": False}, "yesno"),
    ("{{#u}}hidden{{/u}}", {"u": False}, ""),
    ("{{nil}}", {"nil": None}, ""),
]


@pytest.mark.parametrize(("template", "view", "expected"), RENDER)
def test_rendering_is_javascript_like_and_unescaped(
    template: str, view: dict[str, Any], expected: str
) -> None:
    graph = Graph({"r": {"_": {"role": "$END", "prompt": template}}})
    assert evaluate(graph, "r", view).prompt == expected


def test_status_of() -> None:
    assert status_of(START, {"status": "x"}) == "_"
    assert status_of("r", {"status": "x"}) == "x"
    assert status_of("r", None) == "_"


@pytest.mark.parametrize(
    ("template", "ok"),
    [
        ("plain", True),
        ("{{x}} {{#s}}a{{/s}}", True),
        ("{{#s}}unclosed", False),
        ("{{x", False),
        ("{{#a}}{{/b}}", False),
    ],
)
def test_check_template(template: str, ok: bool) -> None:
    problem = check_template(template)
    assert (problem is None) is ok
    if not ok:
        assert problem


def test_bad_template_at_render_time_is_a_moderator_error() -> None:
    graph = Graph({"r": {"_": {"role": "$END", "prompt": "{{#open}}"}}})
    with pytest.raises(ModeratorError, match="prompt template error"):
        evaluate(graph, "r", {})


FAN_GRAPH: dict[str, Any] = {
    "planner": {
        "_": {
            "role": "reviewer",
            "prompt": "{{plan}}: {{#children}}{{task}}={{status}} {{/children}}",
            "fanOut": {"field": "subtasks", "task": "{{index}}. {{item}} ({{plan}})", "max": 2},
        }
    }
}
FAN = Graph(FAN_GRAPH)


def test_a_fan_out_edge_is_part_of_the_decision_and_the_join_renders_the_children() -> None:
    from uwf.moderator import fanout

    output = {"plan": "P", "subtasks": ["a", "b"]}
    decided = evaluate(FAN, "planner", output)
    assert (decided.role, decided.prompt, decided.fan_out) == (
        "reviewer",
        "P: ",
        FAN_GRAPH["planner"]["_"]["fanOut"],
    )
    assert fanout.tasks(FAN_GRAPH["planner"]["_"]["fanOut"], output) == ["0. a (P)", "1. b (P)"]
    children = [{"task": "a", "status": "completed"}, {"task": "b", "status": "killed"}]
    joined = evaluate(FAN, "planner", output, children=children)
    assert joined.prompt == "P: a=completed b=killed "
    assert evaluate(GRAPH, "planner", {"plan": "P"}).fan_out is None


@pytest.mark.parametrize(
    ("output", "message"),
    [
        ({"subtasks": "a"}, 'fan-out field "subtasks" is not a list (got: str)'),
        ({}, 'fan-out field "subtasks" is not a list (got: missing)'),
        ({"subtasks": [1, 2, 3]}, 'fan-out field "subtasks" has 3 items, more than max 2'),
        ({"subtasks": [" "]}, "fan-out task 0 renders empty"),
    ],
)
def test_fan_out_items_that_cannot_start_children(output: dict[str, Any], message: str) -> None:
    from uwf.moderator import fanout

    spec = {"field": "subtasks", "max": 2}
    with pytest.raises(ModeratorError) as raised:
        fanout.tasks(spec, output)
    assert raised.value.message == message


# The typed workflow the moderator is given (uwf.protocol.workflow): views over the stored
# payload that read a key only when asked, a key of the wrong type reading as absent.
WORKFLOW_PAYLOAD: dict[str, Any] = {
    "name": "wf",
    "version": 1,
    "retry": {"attempts": 3},
    "compactAfter": 4,
    "roles": {"a": {"meta": "M" * 52, "retry": {"backoff": 2}}, "bad": "not a mapping"},
    "graph": {
        "$START": {"new": {"role": "a", "prompt": "go", "location": "sub"}},
        "a": {"_": {"prompt": "no role"}, "x": "not a mapping"},
        "b": "not a mapping",
    },
}


@pytest.mark.parametrize(
    ("source", "status", "edge"),
    [
        ("$START", "new", ("a", "go", "sub", None)),
        ("a", "_", (None, "no role", None, None)),  # an edge naming no role: the moderator's error
        ("a", "x", None),  # not a mapping: no edge
        ("a", "missing", None),
        ("b", "_", None),  # the role's edges are not a mapping
        ("nobody", "_", None),
    ],
)
def test_a_graph_reads_each_edge_as_stored(source: str, status: str, edge: Any) -> None:
    graph = Workflow(NodeHash("W" * 52), WORKFLOW_PAYLOAD).graph
    found = graph.edge(source, status)
    if edge is None:
        assert found is None
        return
    assert isinstance(found, Edge)
    assert (found.role, found.prompt, found.location, found.fan_out) == edge
    assert found.target is WORKFLOW_PAYLOAD["graph"][source][status]  # read, not copied


def test_a_workflow_reads_its_name_version_roles_and_retry_policies() -> None:
    workflow = Workflow(NodeHash("W" * 52), WORKFLOW_PAYLOAD)
    assert (workflow.name, workflow.version, workflow.compact_after) == ("wf", 1, 4)
    assert workflow.retry == {"attempts": 3}
    assert workflow.role("a") == Role("a", WORKFLOW_PAYLOAD["roles"]["a"])
    role = workflow.role("a")
    assert role is not None and (role.meta, role.retry) == ("M" * 52, {"backoff": 2})
    assert workflow.role("bad") is None and workflow.role("nobody") is None
    assert workflow.graph.edges("b") is None
    bare = Workflow(NodeHash("W" * 52), {"graph": [], "roles": [], "compactAfter": True})
    assert (bare.name, bare.version, bare.compact_after, bare.retry) == ("", 0, None, None)
    assert bare.graph.edges("$START") is None and bare.role("a") is None
    with pytest.raises(ModeratorError) as err:
        evaluate(bare.graph, START, {})
    assert str(err.value) == 'no transitions defined for role "$START"'
    with pytest.raises(ModeratorError) as err:
        evaluate(workflow.graph, "a", {})
    assert str(err.value) == 'no transition for role "a" with status "_"'
