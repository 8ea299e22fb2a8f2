"""The moderator's decision for a thread's head: what ``uwf.moderator.evaluate`` is given.

``evaluate`` is pure; this module reads what it needs from the store. After a step it is the
step's output; at a StartNode there is no output: uwf 0.5's rules route ``$START`` on ``_``
with nothing to render, version 1's on ``new`` — or ``resume`` for a StartNode (resume) —
with ``_body`` the task (``new``) or what the person resuming wrote (``resume``). After a
step of a version-1 workflow ``_body`` is the step's text, the markdown after its
frontmatter, read from its detail only when the chosen edge's prompt names it.
"""

from __future__ import annotations

from typing import Any

from uwf.cas.store import Store
from uwf.model import chain
from uwf.model.turns import last_assistant_content
from uwf.moderator.evaluate import (
    BODY,
    START,
    Decision,
    Rules,
    evaluate,
    require_instruction,
    rules_of,
    status_of,
)
from uwf.protocol.workflow import Graph, Workflow
from uwf.util.frontmatter import split


def start_view(start: chain.Start, rules: Rules) -> dict[str, Any]:
    """What ``$START`` routes on and renders: nothing (uwf 0.5), else its ``$status`` (``new``
    or ``resume``) and ``_body``."""
    if rules.version == 0:
        return {}
    new, resume = rules.start
    if start.resumes is not None:
        return {rules.key: resume, BODY: start.resume_text}
    return {rules.key: new, BODY: start.prompt}


def body_of(store: Store, step: chain.Step) -> str:
    """A step's text: its content (the last assistant turn of its detail) after the
    frontmatter; empty when it recorded none."""
    content = last_assistant_content(store, step.payload.get("detail"))
    if not content:
        return ""
    return split(content)[1].strip()


def view_of(store: Store, workflow: Workflow, step: chain.Step, output: Any) -> Any:
    """The output a step's edge prompt renders: its output, plus ``_body`` (version 1) when
    the edge its status takes names it."""
    rules = rules_of(workflow)
    if rules.version == 0 or not isinstance(output, dict):
        return output
    edge = workflow.graph.edge(step.role, status_of(step.role, output, rules))
    if edge is not None and BODY in edge.prompt:
        return {**output, BODY: body_of(store, step)}
    return output


def decide(
    store: Store,
    workflow: Workflow,
    head: chain.Start | chain.Step,
    output: Any = None,
    children: list[Any] | None = None,
) -> Decision:
    """The moderator's decision for a head (``$START`` for a thread with no steps yet);
    ``output``: the step's, when the caller has read it already; ``children``: the joined
    children's results at the end of a fan-out (docs/format.md, "Fan-out and join").

    Resuming an ended thread, the text the person wrote follows the ``$START.resume`` prompt
    when that prompt does not show it itself (``_body``). A prompt that renders blank for a
    role that runs is ``BlankPrompt`` (docs/format.md, "Edge prompts")."""
    rules = rules_of(workflow)
    graph = workflow.graph
    if isinstance(head, chain.Start):
        decision = evaluate(graph, START, start_view(head, rules), rules)
        text = head.resume_text.strip()
        if head.resumes is not None and text and BODY not in _prompt(graph, decision.status):
            decision = decision._replace(prompt=f"{decision.prompt.rstrip()}\n\n{text}".lstrip())
        return require_instruction(graph, START, decision)
    if output is None:
        output = chain.output_of(store, head)
    view = view_of(store, workflow, head, output)
    decision = evaluate(graph, head.role, view, rules, children=children)
    return require_instruction(graph, head.role, decision, joined=children is not None)


def _prompt(graph: Graph, status: str) -> str:
    edge = graph.edge(START, status)
    return edge.prompt if edge is not None else ""


def step_status(workflow: Workflow, role: str, output: Any) -> str:
    """The status a step's output routes on, by its workflow's rules."""
    return status_of(role, output, rules_of(workflow))
