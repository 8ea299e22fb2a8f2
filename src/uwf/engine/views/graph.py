"""Routing graphs as data and as text: Mermaid (GitHub renders it) and Graphviz DOT.

Pure functions of plain data: a Workflow payload gives the nodes (``$START``, the roles in
their order, ``$END``) and one edge per status; the roles and statuses of a thread's steps
mark the edges it took (with how often), the nodes it visited and where it is now. Nothing
here reads the store, so ``uwf workflow graph``, ``uwf thread graph`` and the web view draw
the same graph from the same data (docs/ui.md).

Node ids in the text are positional (``n0``, ``n1`` …): a role named ``end`` or ``class``
would otherwise be a Mermaid keyword. Labels are quoted, and quotes, ``#``, markup, brackets
and control characters are written as entity codes, so a status such as ``<b>"x"</b>`` is
shown as text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from uwf.moderator.evaluate import END, START, UNIT

_UNSAFE = re.compile(r'["#<>&`\\{}\[\]|]|[^\S ]|[\x00-\x1f\x7f]')

# One palette for the text formats; the web view's CSS uses the same colours.
TAKEN = "#2563eb"
CURRENT_FILL = "#fde68a"
CURRENT_STROKE = "#b45309"
VISITED_FILL = "#dbeafe"


@dataclass(frozen=True)
class Arrow:
    """One edge of a workflow's routing graph as drawn (``protocol.workflow.Edge`` is the
    edge as stored)."""

    source: str
    status: str
    target: str
    fan_out: str | None = None  # a fanOut edge: the workflow its children run (docs/format.md)


@dataclass
class Diagram:
    """A workflow's routing graph as drawn, optionally marked with one thread's path
    (``protocol.workflow.Graph`` is the graph as stored, which routing reads)."""

    name: str
    nodes: list[str]
    edges: list[Arrow]
    taken: dict[int, int] = field(default_factory=dict)  # edge index -> times taken
    visited: set[str] = field(default_factory=set)
    current: str | None = None  # where the thread is: the next (or running) role, or $END
    pending: int | None = None  # the edge an active thread takes next
    state: str | None = None  # the thread's status (idle, running, completed, …)

    def label(self, index: int) -> str:
        """An edge's label: its status (and, for a fan-out, the children's workflow), and how
        often the thread took it."""
        edge = self.edges[index]
        times = self.taken.get(index, 0)
        text = edge.status if edge.fan_out is None else f"{edge.status} ⇉ fan-out: {edge.fan_out}"
        return f"{text} ×{times}" if times else text

    def edge_index(self, source: str, status: str) -> int | None:
        for i, edge in enumerate(self.edges):
            if edge.source == source and edge.status == status:
                return i
        return None


def of_workflow(payload: dict[str, Any]) -> Diagram:
    """The routing graph of a Workflow payload (``{name, roles, graph}``)."""
    roles = [r for r in payload.get("roles", {}) if isinstance(r, str)]
    graph = payload.get("graph", {})
    edges: list[Arrow] = []
    for source in (START, *roles, *(k for k in graph if k not in roles and k != START)):
        targets = graph.get(source)
        if not isinstance(targets, dict):
            continue
        for status, target in targets.items():
            if isinstance(target, dict) and isinstance(target.get("role"), str):
                edges.append(Arrow(source, str(status), target["role"], _fan_out(target)))
    nodes = [START, *roles]
    for edge in edges:  # targets the roles do not list still get a node (never for $END)
        for node in (edge.source, edge.target):
            if node not in nodes and node != END:
                nodes.append(node)
    nodes.append(END)
    return Diagram(str(payload.get("name", "")), nodes, edges)


def _fan_out(target: dict[str, Any]) -> str | None:
    """The workflow a ``fanOut`` edge's children run (its own name when it names none)."""
    spec = target.get("fanOut")
    if not isinstance(spec, dict):
        return None
    workflow = spec.get("workflow")
    return str(workflow) if isinstance(workflow, str) and workflow else "children"


def with_path(graph: Diagram, steps: Sequence[tuple[str, str]], state: str) -> Diagram:
    """Mark the path of a thread: ``steps`` are its (role, status) pairs, oldest first.

    Each step was reached by an edge from the previous role (or ``$START``) on the previous
    status; a completed thread also took the last role's edge to ``$END``. An active thread is
    ``current`` at the target of its last status (the role that runs next) and that edge is
    ``pending``; a killed or max_rounds thread stays at its last role.
    """
    marked = Diagram(graph.name, graph.nodes, graph.edges, state=state)
    # a version-1 workflow starts on "new" (docs/format.md, "Version-1 workflow files")
    source, status = START, UNIT if graph.edge_index(START, UNIT) is not None else "new"
    marked.visited.add(START)
    for role, step_status in steps:
        index = graph.edge_index(source, status)
        if index is not None and graph.edges[index].target == role:
            marked.taken[index] = marked.taken.get(index, 0) + 1
        marked.visited.add(role)
        source, status = role, step_status
    last = graph.edge_index(source, status)
    if state == "completed":
        if last is not None and graph.edges[last].target == END:
            marked.taken[last] = marked.taken.get(last, 0) + 1
        marked.visited.add(END)
        marked.current = END
    elif state in ("idle", "running", "waiting", "active"):
        marked.pending = last
        marked.current = graph.edges[last].target if last is not None else source
    else:
        marked.current = source
    return marked


# -- text ---------------------------------------------------------------------------------


def _mermaid_text(text: str) -> str:
    return _UNSAFE.sub(lambda m: f"#{ord(m.group())};", text)


def _dot_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "")


def _summary(graph: Diagram) -> str | None:
    if graph.state is None:
        return None
    taken = sum(graph.taken.values())
    return f"status {graph.state}, current {graph.current}, {taken} transitions taken"


def to_mermaid(graph: Diagram) -> str:
    """A ``flowchart TD`` that GitHub renders inside a ```` ```mermaid ```` block."""
    ids = {node: f"n{i}" for i, node in enumerate(graph.nodes)}
    lines = ["flowchart TD"]
    summary = _summary(graph)
    if summary:
        lines.append(f"  %% {_mermaid_text(summary)}")
    for node in graph.nodes:
        text = _mermaid_text(node)
        lines.append(
            f'  {ids[node]}(["{text}"])' if node in (START, END) else f'  {ids[node]}["{text}"]'
        )
    for i, edge in enumerate(graph.edges):
        arrow = "-.->" if i == graph.pending else "==>" if edge.fan_out else "-->"
        label = _mermaid_text(graph.label(i))
        lines.append(f'  {ids[edge.source]} {arrow}|"{label}"| {ids[edge.target]}')
    if graph.state is not None:
        lines.append(f"  classDef visited fill:{VISITED_FILL},stroke:{TAKEN}")
        lines.append(
            f"  classDef current fill:{CURRENT_FILL},stroke:{CURRENT_STROKE},stroke-width:3px"
        )
        visited = [ids[n] for n in graph.nodes if n in graph.visited and n != graph.current]
        if visited:
            lines.append(f"  class {','.join(visited)} visited")
        if graph.current in ids:
            lines.append(f"  class {ids[graph.current]} current")
        taken = sorted(graph.taken)
        if taken:
            lines.append(f"  linkStyle {','.join(map(str, taken))} stroke:{TAKEN},stroke-width:3px")
        if graph.pending is not None:
            lines.append(f"  linkStyle {graph.pending} stroke:{CURRENT_STROKE},stroke-width:2px")
    return "\n".join(lines) + "\n"


def to_dot(graph: Diagram) -> str:
    """A Graphviz ``digraph`` (``dot -Tsvg`` draws it)."""
    ids = {node: f"n{i}" for i, node in enumerate(graph.nodes)}
    lines = [f'digraph "{_dot_text(graph.name)}" {{']
    summary = _summary(graph)
    if summary:
        lines.append(f"  // {summary}")
    lines.append("  rankdir=TB;")
    lines.append(
        '  node [shape=box, style="rounded,filled", fillcolor="white", fontname="sans-serif"];'
    )
    lines.append('  edge [fontname="sans-serif", fontsize=11];')
    for node in graph.nodes:
        attrs = [f'label="{_dot_text(node)}"']
        if node in (START, END):
            attrs.append("shape=oval")
        if node == graph.current:
            attrs += [f'fillcolor="{CURRENT_FILL}"', f'color="{CURRENT_STROKE}"', "penwidth=3"]
        elif node in graph.visited:
            attrs += [f'fillcolor="{VISITED_FILL}"', f'color="{TAKEN}"']
        lines.append(f"  {ids[node]} [{', '.join(attrs)}];")
    for i, edge in enumerate(graph.edges):
        attrs = [f'label="{_dot_text(graph.label(i))}"']
        if edge.fan_out is not None:
            attrs.append("style=bold")
        if i in graph.taken:
            attrs += [f'color="{TAKEN}"', "penwidth=2.5"]
        elif i == graph.pending:
            attrs += [f'color="{CURRENT_STROKE}"', "style=dashed", "penwidth=2"]
        lines.append(f"  {ids[edge.source]} -> {ids[edge.target]} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render(graph: Diagram, fmt: str) -> str:
    return to_dot(graph) if fmt == "dot" else to_mermaid(graph)
