"""Every part of a prompt inside the context budget (docs/format.md, "Compaction", "What the
agent sees").

What a prompt shows of its thread — the task, the moderator's instruction (the edge prompt),
at a join the children's section, and the history (the newest summary and steps) — comes from
people and agents, and any of it can be long: one answer printed into the next edge prompt,
twenty children's outputs. Together they get ``contextBudget`` characters. When they fit,
nothing changes; when they do not, the budget is shared out fairly
(``uwf.util.fences.shares``): a part that needs less than an equal share keeps all of it,
and the longest parts are cut to one common length, each with a marker naming the command
that shows it whole. So one answer never makes
a prompt that no agent can take (a ``{prompt}`` argument holds at most 128 KiB).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from uwf.model.window import step_cost
from uwf.util.fences import cut, shares
from uwf.util.tuples import NamedTuple

if TYPE_CHECKING:
    from uwf.agent_kit.context import AgentContext
    from uwf.agent_kit.history import History


class Fitted(NamedTuple):
    """The parts of a prompt, fitted: the task, the edge prompt (with the children's section
    at a join) and the budget the history is shown within."""

    task: str
    edge_prompt: str
    budget: int


def fit(ctx: AgentContext, history: History) -> Fitted:
    """``ctx``'s task, edge prompt and children's section, and ``history``, within the
    context budget (``history.budget``)."""
    from uwf.agent_kit import children

    budget = history.budget
    kids = children.read(ctx.store, ctx.children, budget) if ctx.children is not None else None
    past = len(history.summary or "") + sum(step_cost(step) for step in history.steps)
    demands = [len(ctx.task), len(ctx.edge_prompt), children.size(kids) if kids else 0, past]
    if sum(demands) <= budget:
        task, edge, room, shown = ctx.task, ctx.edge_prompt, None, budget
    else:
        task_room, edge_room, room, shown = shares(demands, budget)
        task = cut(ctx.task, task_room, f"`uwf thread read {ctx.thread}`")
        source = ctx.head if ctx.prev is not None else None
        whole = f"`uwf step read {source}`" if source else f"`uwf thread read {ctx.thread}`"
        edge = cut(ctx.edge_prompt, edge_room, whole)
    if kids is not None:
        edge = f"{edge}\n\n{children.section(kids, room)}"
    return Fitted(task, edge, shown)
