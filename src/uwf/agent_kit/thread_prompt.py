"""The thread as a prompt shows it: the newest compaction summary, the steps that fit the
context budget (each with its output, its agent and, on a full prompt, its content), where
the others are, and the moderator's instruction (docs/agents.md, "A Python agent on the
agent kit").

Agent text (contents, the summary) is fenced so that it cannot forge a step, and a step too
large for its share is cut with a marker naming the command that shows it whole. Like every
prompt text (``uwf.agent_kit.prompts``), the wording is part of the contract.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from uwf.model.window import step_cost, within_budget
from uwf.util.fences import cut, fence, one_line, shares
from uwf.util.frontmatter import body
from uwf.util.jsonfmt import canonical, dumps

#: The context budget (characters) of the history shown on a first visit.
FIRST_VISIT_QUOTA = 32000

#: The section that carries a compaction summary (docs/format.md, "Compaction").
SUMMARY_HEADING = "## Summary of Earlier Steps"

#: The section of a full prompt that shows the thread's newest steps (docs/agents.md).
THREAD_HEADING = "## The Thread So Far"


def _json(value: Any) -> str:
    return dumps(canonical(value))


def _whole(step: Mapping[str, Any]) -> str:
    """The command that shows a step whole (where a cut marker points)."""
    h = step.get("hash")
    return f"`uwf step read {h}`" if isinstance(h, str) and h else "`uwf thread read`"


def _step_block(
    step: Mapping[str, Any], number: int, include_content: bool, limit: float | None = None
) -> str:
    """One step: its number and role, its output as JSON, its agent, and (``include_content``)
    its content in a fence the content cannot close. A step that costs more than ``limit``
    characters (``step_cost``) has its output and its content cut, each to a fair share of it
    (the shorter kept whole when it fits its share), with a marker (docs/agents.md,
    "uwf-cmd")."""
    title = f"### Step {number}: {step.get('role')}"
    agent = f"Agent: {one_line(str(step.get('agent')))}"
    output = _json(step.get("output", {}))
    content = step.get("content") if include_content else None  # no detail read otherwise
    if isinstance(content, str):
        content = body(content).rstrip()
    if limit is not None and limit != float("inf") and step_cost(step) > limit:
        room = int(limit) - len(title) - len(agent) - len(_CONTENT_HEADING) - 16
        text = content if isinstance(content, str) else ""
        output_room, content_room = shares([len(output), len(text)], room)
        output = cut(output, output_room, _whole(step))
        if isinstance(content, str):
            content = cut(content, content_room, _whole(step))
    lines = [title, f"Output: {output}", agent]
    if content is not None:
        lines += ["", _CONTENT_HEADING, "", fence(str(content), "markdown")]
    return "\n".join(lines)


_CONTENT_HEADING = "#### Step Content"


def build_continuation_prompt(
    steps: Sequence[Mapping[str, Any]],
    role: str,
    edge_prompt: str,
    include_content: bool = False,
    quota: float | None = None,
    offset: int = 0,
    summary: str | None = None,
    budget: float | None = None,
) -> str:
    """What happened since ``role`` last spoke, then the moderator's instruction: the prompt
    of an agent that continues a session of its own (``uwf-hermes``'s re-entry,
    ``uwf-builtin``'s replayed visits), and what ``uwf-human`` shows a person.

    ``steps`` are the chain's steps, oldest first, as dicts ``{role, output, agent,
    edgePrompt, content}``. Steps are numbered absolutely (step 1 = first of the chain), except
    that when the quota (only applied with ``include_content``) drops older steps the shown
    ones are numbered from the first "since" number on — a quirk of the original, kept.
    ``steps`` may be a tail of the chain: ``offset`` is the number of steps before it, and
    ``summary`` (a compaction summary of those steps) is shown first unless the role's last
    visit is among ``steps``. A step over ``budget`` characters is cut with a marker.
    """
    last = max((i for i, s in enumerate(steps) if s.get("role") == role), default=-1)
    since = list(steps[last + 1 :])
    parts: list[str] = []
    if summary and last < 0:
        parts += [SUMMARY_HEADING, "", _summary_text(summary, budget), ""]
    if since:
        parts.append("## What Happened Since Your Last Turn")
        base = offset + last + 2
        limit = float("inf") if quota is None else quota
        shown = within_budget(since, limit) if include_content else since
        dropped = len(since) - len(shown)
        if dropped > 0:
            parts += [
                "",
                f"_Showing {len(shown)} of {len(since)} steps ({dropped} omitted due to quota)_",
            ]
        for i, step in enumerate(shown):
            parts += ["", _step_block(step, base + i, include_content, budget)]
        parts.append("")
    parts += ["## Moderator Instruction", "", edge_prompt]
    return "\n".join(parts)


def _summary_text(summary: str, budget: float | None) -> str:
    """A compaction summary as a prompt shows it: fenced (a model wrote it from agents'
    text), cut to the budget."""
    if budget is not None and budget != float("inf"):
        summary = cut(summary, int(budget), "`uwf thread read --full`")
    return fence(summary, "markdown")


def first_visit_history(
    steps: Sequence[Mapping[str, Any]],
    role: str,
    edge_prompt: str,
    offset: int = 0,
    summary: str | None = None,
    budget: int = FIRST_VISIT_QUOTA,
) -> str:
    """What ``uwf-builtin`` tells a role on its first visit of a session: the summary, the
    steps with their content (the newest within ``budget``), the moderator's instruction."""
    return build_continuation_prompt(
        steps,
        role,
        edge_prompt,
        include_content=True,
        quota=budget,
        offset=offset,
        summary=summary,
        budget=budget,
    )


def build_thread_history(
    steps: Sequence[Mapping[str, Any]],
    role: str,
    *,
    budget: int = FIRST_VISIT_QUOTA,
    offset: int = 0,
    summary: str | None = None,
) -> str:
    """What a stateless agent is shown of its thread on every visit, whatever role it plays
    and however often it came before: the newest compaction summary, then the newest
    ``steps`` (the steps after the summary, oldest first; ``offset`` steps come before
    them) that fit ``budget`` characters beside it, each with its output and content,
    numbered from the start of the thread. The newest step is always shown; when it alone
    exceeds the budget it is cut, with a marker naming the command that shows it whole.
    Agent text (contents, the summary) is fenced so that it cannot forge a step.
    """
    parts: list[str] = []
    room = budget
    if summary:
        text = _summary_text(summary, budget // 2)
        parts += [SUMMARY_HEADING, "", text, ""]
        room = max(0, budget - len(text))
    if not steps:
        return "\n".join(parts).rstrip("\n")
    shown = within_budget(steps, room)
    first = offset + len(steps) - len(shown) + 1
    parts.append(THREAD_HEADING)
    if first > 1:
        parts += ["", _earlier(first, offset if summary else 0)]
    if any(step.get("role") == role for step in shown):
        parts += ["", f"_Steps of the role {role} are your own earlier work._"]
    for i, step in enumerate(shown):
        parts += ["", _step_block(step, first + i, True, room)]
    return "\n".join(parts)


def _span(low: int, high: int) -> str:
    return f"step {low}" if low == high else f"steps {low}–{high}"


def _earlier(first: int, summarised: int) -> str:
    """The line that says where the steps before ``first`` are: steps 1..``summarised`` in
    the summary above, the others left out for the budget."""
    said = [f"{_span(1, summarised)} in the summary above"] if summarised else []
    if first - 1 > summarised:
        said.append(
            f"{_span(summarised + 1, first - 1)} left out (over the context budget; "
            "`uwf thread read` shows them)"
        )
    return f"_Earlier: {'; '.join(said)}._"
