"""The moderator is a pure function of (graph, last role, last output): a table of cases."""

from __future__ import annotations

from typing import Any

import pytest

from uwf.moderator import END, START, evaluate
from uwf.moderator.evaluate import ModeratorError, check_template, status_of

GRAPH: dict[str, Any] = {
    "$START": {"_": {"role": "planner", "prompt": "Plan: {{task}}"}},
    "planner": {"_": {"role": "developer", "prompt": "Implement {{plan}}"}},
    "developer": {"_": {"role": "reviewer", "prompt": "Review {{summary}}"}},
    "reviewer": {
        "rejected": {"role": "developer", "prompt": "Fix: {{comments}}"},
        "approved": {"role": "$END", "prompt": "done"},
    },
}

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
    graph = {"r": {"_": {"role": "$END", "prompt": template}}}
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
    graph = {"r": {"_": {"role": "$END", "prompt": "{{#open}}"}}}
    with pytest.raises(ModeratorError, match="prompt template error"):
        evaluate(graph, "r", {})


FAN = {
    "planner": {
        "_": {
            "role": "reviewer",
            "prompt": "{{plan}}: {{#children}}{{task}}={{status}} {{/children}}",
            "fanOut": {"field": "subtasks", "task": "{{index}}. {{item}} ({{plan}})", "max": 2},
        }
    }
}


def test_a_fan_out_edge_is_part_of_the_decision_and_the_join_renders_the_children() -> None:
    from uwf.moderator import fanout

    output = {"plan": "P", "subtasks": ["a", "b"]}
    decided = evaluate(FAN, "planner", output)
    assert (decided.role, decided.prompt, decided.fan_out) == (
        "reviewer",
        "P: ",
        FAN["planner"]["_"]["fanOut"],
    )
    assert fanout.tasks(FAN["planner"]["_"]["fanOut"], output) == ["0. a (P)", "1. b (P)"]
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
