"""Status-based routing (docs/format.md, "What a role can emit").

``evaluate(graph, last_role, last_output)`` looks up the edge ``graph[last_role][status]``
(``uwf.protocol.workflow.Graph``: the stored workflow's graph, typed) where the
status is the unit status ``_`` after ``$START`` (or when the output has no string
``status``), and renders the target's Mustache prompt against the last output with HTML
escaping off and JavaScript value rendering (``true``, ``1``, ``a,b``, ``[object Object]``;
``uwf.adapters.template`` renders). No I/O, no state: the same inputs always give the same
decision.

A workflow read from a version-1 file (uwf 0.8's format) routes by other ``Rules``
(``rules_of``): on the output's ``$status``, ``$START`` on ``new`` (a new thread) or
``resume`` (a thread that resumes an ended one: the caller says which, as the start's
``$status``), and its prompts are Liquid templates (the adapter's Liquid dialect). An edge of
such a workflow may name its agent's working directory (``Decision.location``).
"""

from __future__ import annotations

from typing import Any

from uwf.adapters import template as template_adapter
from uwf.protocol.workflow import Graph, Workflow
from uwf.util.errors import UwfError
from uwf.util.tuples import NamedTuple

START = "$START"
END = "$END"
UNIT = "_"
#: The status with which any agent suspends its step: never routed, the thread waits
#: (docs/format.md, "Suspending and resuming").
SUSPEND = "$SUSPEND"
#: In a version-1 prompt: the text of the output (its markdown after the frontmatter).
BODY = "_body"
MUSTACHE = template_adapter.MUSTACHE
LIQUID = template_adapter.LIQUID


class Rules(NamedTuple):
    """How a workflow routes: its version, the output field routing reads, the template
    language of its prompts, and the statuses ``$START`` routes on (the first: a new
    thread's)."""

    version: int
    key: str
    dialect: str
    start: tuple[str, ...]


V05 = Rules(0, "status", MUSTACHE, (UNIT,))
V1 = Rules(1, "$status", LIQUID, ("new", "resume"))


def rules_of(workflow: Workflow | None) -> Rules:
    """The rules of a stored workflow: version 1's when it says ``version: 1``."""
    return V1 if workflow is not None and workflow.version == 1 else V05


class ModeratorError(UwfError):
    """The graph has no route for the last output, or a prompt does not render."""


class BlankPrompt(ModeratorError):
    """The edge's prompt renders empty or blank: its role would run without an instruction
    (uwf 0.8 refused the step too). ``decision`` is the edge, for a caller that gives the
    role its instruction itself (``thread rerun --edge-prompt``, ``thread answer``)."""

    def __init__(self, message: str, decision: Decision) -> None:
        super().__init__(message)
        self.decision = decision


class Decision(NamedTuple):
    role: str
    prompt: str
    status: str
    location: str | None = None  # the edge's working directory (version 1), as written
    fan_out: dict[str, Any] | None = None  # the edge's ``fanOut``: children before ``role``

    @property
    def done(self) -> bool:
        return self.role == END


def status_of(last_role: str, last_output: Any, rules: Rules = V05) -> str:
    """The status an output routes on: its ``rules.key`` when a string, else ``_``; after
    ``$START`` always ``_`` under uwf 0.5's rules."""
    if last_role == START and rules.start == (UNIT,):
        return UNIT
    status = last_output.get(rules.key) if isinstance(last_output, dict) else None
    return status if isinstance(status, str) else UNIT


def evaluate(
    graph: Graph,
    last_role: str,
    last_output: Any,
    rules: Rules = V05,
    children: list[dict[str, Any]] | None = None,
) -> Decision:
    """The edge the last output takes, its prompt rendered against that output (plus
    ``children``, the joined children's results, at the end of a fan-out: docs/format.md,
    "Fan-out and join")."""
    status = status_of(last_role, last_output, rules)
    if graph.edges(last_role) is None:
        raise ModeratorError(f'no transitions defined for role "{last_role}"')
    edge = graph.edge(last_role, status)
    if edge is None or edge.role is None:
        raise ModeratorError(f'no transition for role "{last_role}" with status "{status}"')
    view = last_output if isinstance(last_output, dict) else {}
    if children is not None:
        view = {**view, "children": children}
    prompt = render(edge.prompt, view, rules.dialect)
    return Decision(edge.role, prompt, status, edge.location, edge.fan_out)


def require_instruction(
    graph: Graph, last_role: str, decision: Decision, joined: bool = False
) -> Decision:
    """``decision``, unless its role would run with a blank prompt: BlankPrompt then. An end
    runs no role, and a fan-out's role runs once its children are ``joined``, with them."""
    if decision.done or decision.prompt.strip() or (decision.fan_out and not joined):
        return decision
    edge = graph.edge(last_role, decision.status)
    template = " ".join((edge.prompt if edge is not None else "").split())
    template = template if len(template) <= 120 else template[:119] + "…"
    raise BlankPrompt(
        f"the prompt of graph.{last_role}.{decision.status} renders empty, so "
        f'"{decision.role}" would run without an instruction (template: "{template}")',
        decision,
    )


def check_template(template: str, dialect: str = MUSTACHE) -> str | None:
    """None if ``template`` parses (as Mustache, or ``dialect``), else the parser's message."""
    return template_adapter.check(template, dialect)


def output_names(template: str, dialect: str = MUSTACHE) -> list[str]:
    """The output fields a template looks up, in order: the first part of each variable and
    section name outside any section (``a`` of ``{{a.b}}``). Inside a section a name may be
    a field of the section's value, so those are not listed. The template must parse."""
    return template_adapter.names(template, dialect)


def render(template: str, view: dict[str, Any], dialect: str = MUSTACHE) -> str:
    """Render a Mustache template, HTML escaping off, values rendered the JavaScript way (or a
    template of ``dialect``)."""
    try:
        return template_adapter.render(template, view, dialect)
    except template_adapter.TemplateError as exc:
        raise ModeratorError(f"prompt template error: {exc}") from None
