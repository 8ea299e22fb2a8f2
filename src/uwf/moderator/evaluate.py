"""Status-based routing (docs/format.md, "What a role can emit").

``evaluate(graph, last_role, last_output)`` looks up ``graph[last_role][status]`` where the
status is the unit status ``_`` after ``$START`` (or when the output has no string
``status``), and renders the target's Mustache prompt against the last output with HTML
escaping off and JavaScript value rendering (``true``, ``1``, ``a,b``, ``[object Object]``;
``uwf.adapters.template`` renders). No I/O, no state: the same inputs always give the same
decision.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from uwf.adapters import template as template_adapter
from uwf.util.errors import UwfError

START = "$START"
END = "$END"
UNIT = "_"


class ModeratorError(UwfError):
    """The graph has no route for the last output, or a prompt does not render."""


class Decision(NamedTuple):
    role: str
    prompt: str
    status: str
    fan_out: dict[str, Any] | None = None  # the edge's ``fanOut``: children before ``role``

    @property
    def done(self) -> bool:
        return self.role == END


def status_of(last_role: str, last_output: Any) -> str:
    if last_role == START:
        return UNIT
    status = last_output.get("status") if isinstance(last_output, dict) else None
    return status if isinstance(status, str) else UNIT


def evaluate(
    graph: dict[str, Any],
    last_role: str,
    last_output: Any,
    children: list[dict[str, Any]] | None = None,
) -> Decision:
    """The edge the last output takes, its prompt rendered against that output (plus
    ``children``, the joined children's results, at the end of a fan-out: docs/format.md,
    "Fan-out and join")."""
    status = status_of(last_role, last_output)
    edges = graph.get(last_role)
    if not isinstance(edges, dict):
        raise ModeratorError(f'no transitions defined for role "{last_role}"')
    target = edges.get(status)
    if not isinstance(target, dict) or not isinstance(target.get("role"), str):
        raise ModeratorError(f'no transition for role "{last_role}" with status "{status}"')
    view = last_output if isinstance(last_output, dict) else {}
    if children is not None:
        view = {**view, "children": children}
    fan_out = target.get("fanOut")
    spec = fan_out if isinstance(fan_out, dict) else None
    return Decision(target["role"], render(str(target.get("prompt", "")), view), status, spec)


def check_template(template: str) -> str | None:
    """None if ``template`` parses as Mustache, else the parser's message."""
    return template_adapter.check(template)


def output_names(template: str) -> list[str]:
    """The output fields a template looks up, in order: the first part of each variable and
    section name outside any section (``a`` of ``{{a.b}}``). Inside a section a name may be
    a field of the section's value, so those are not listed. The template must parse."""
    return template_adapter.names(template)


def render(template: str, view: dict[str, Any]) -> str:
    """Render a Mustache template, HTML escaping off, values rendered the JavaScript way."""
    try:
        return template_adapter.render(template, view)
    except template_adapter.TemplateError as exc:
        raise ModeratorError(f"prompt template error: {exc}") from None
