"""The messages ``uwf-builtin`` sends: the system message and one (user, assistant) pair per
earlier visit of the role, then this visit's user message.

The role's first user message starts with the thread's task (``## Task``) and carries the
compaction summary, if any, and the history before it with each step's content (within the
first-visit quota), like the other agents' first-visit prompt. Only the steps after the newest
summary are replayed (``AgentContext.history``), so the messages stay within the context
budget however long the thread. Because the chain is immutable, a re-entry rebuilds exactly
the messages of the earlier visits since that summary, so their prefix is identical
(cache-friendly) until the next summary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from uwf.config.config import DEFAULT_CONTEXT_BUDGET


def workflow_section(cwd: Path | str, allow_outside: bool = False) -> str:
    """The ``## Workflow`` part of the system message: where the agent works and how it ends."""
    where = "Paths outside it are allowed." if allow_outside else "Paths outside it are refused."
    return (
        "## Workflow\n"
        "\n"
        f"Your working directory is `{cwd}`. Relative paths are resolved against it. {where}\n"
        "You have three tools: `read_file`, `write_file` and `run_command`.\n"
        "Your task and the moderator's instruction are in the user messages: do not use the "
        "uwf CLI to discover them.\n"
        "Work with the tools until your role's deliverable is done. Then reply without a tool "
        "call, with the YAML frontmatter described in the deliverable format followed by your "
        "markdown work. If you run out of turns, reply with the frontmatter anyway and say what "
        "is missing (use a failure status if the schema has one).\n"
        "Your final reply must start with `---` at position 0."
    )


def build_system_message(
    format_instruction: str,
    role_def: dict[str, Any],
    cwd: Path | str,
    allow_outside: bool = False,
    cli_reference: str | None = None,
) -> str:
    from uwf.agent_kit.prompts import build_role_prompt

    parts = [format_instruction] if format_instruction else []
    parts += [build_role_prompt(role_def, cli_reference), workflow_section(cwd, allow_outside)]
    return "\n\n".join(parts)


def _visit_message(
    steps: Sequence[Mapping[str, Any]],
    role: str,
    edge_prompt: str,
    task: str,
    first: bool,
    offset: int = 0,
    summary: str | None = None,
    budget: int = DEFAULT_CONTEXT_BUDGET,
) -> str:
    """What the role is told at one visit: (task and summary on the first), history since,
    instruction; a step over ``budget`` characters cut with a marker."""
    from uwf.agent_kit.thread_prompt import build_continuation_prompt, first_visit_history

    if not first:
        return build_continuation_prompt(steps, role, edge_prompt, offset=offset, budget=budget)
    history = first_visit_history(steps, role, edge_prompt, offset, summary, budget)
    return f"## Task\n{task}\n\n{history}"


def build_messages(
    *,
    format_instruction: str,
    role_def: dict[str, Any],
    task: str,
    steps: Sequence[Mapping[str, Any]],
    role: str,
    edge_prompt: str,
    cwd: Path | str,
    allow_outside: bool = False,
    cli_reference: str | None = None,
    offset: int = 0,
    summary: str | None = None,
    budget: int = DEFAULT_CONTEXT_BUDGET,
) -> list[dict[str, Any]]:
    """The messages of a visit: system, one (user, assistant) pair per earlier visit, user.

    ``steps`` are the steps after the newest compaction summary, oldest first (``{role,
    output, agent, edgePrompt, content}``, as ``AgentContext.history``), ``offset`` the
    number of steps before them and ``summary`` the summary of those (or the whole chain,
    with no summary). Every earlier visit among ``steps`` is replayed (outputs and contents
    are read only where a message shows them). Step numbers are absolute.
    """
    from uwf.util.fences import cut
    from uwf.util.jsonfmt import canonical, dumps

    system = build_system_message(format_instruction, role_def, cwd, allow_outside, cli_reference)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    visits = [i for i, s in enumerate(steps) if s.get("role") == role]
    for n, i in enumerate(visits):
        past = steps[i]
        edge = str(past.get("edgePrompt") or "")
        said = _visit_message(steps[:i], role, edge, task, n == 0, offset, summary, budget)
        messages.append({"role": "user", "content": said})
        whole = f"`uwf step read {past.get('hash')}`"
        answer = cut(dumps(canonical(past.get("output"))), budget, whole)
        messages.append({"role": "assistant", "content": answer})
    now = _visit_message(steps, role, edge_prompt, task, not visits, offset, summary, budget)
    messages.append({"role": "user", "content": now})
    return messages
