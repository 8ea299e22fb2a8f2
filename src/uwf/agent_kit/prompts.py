"""The texts every agent sends: role prompt, deliverable format, correction, and the whole
prompt of a turn (the thread's part of it, and the continuation, in ``thread_prompt``).

These are pure string builders (docs/agents.md, "A Python agent on the agent kit"). Their
wording is part of the contract: agents are tuned to it and the parity tests quote it, so
change a phrase only on purpose. Every JSON value inside a prompt is printed
JavaScript-compact (``{"a":1}``), like the original, so a prompt is byte-identical whichever
agent builds it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from uwf.agent_kit.thread_prompt import (
    FIRST_VISIT_QUOTA,
    build_continuation_prompt,
    build_thread_history,
)
from uwf.model import turns

if TYPE_CHECKING:
    from uwf.agent_kit.context import AgentContext

#: Sent through the agent's ``continue`` when its output has no usable frontmatter (kept
#: in ``uwf.model.turns``, where ``uwf eval``'s compliance judge counts the corrections).
CORRECTION_MESSAGE = turns.CORRECTION_MESSAGE


def correction_message(problems: Sequence[str] = ()) -> str:
    """The correction prompt: ``CORRECTION_MESSAGE``, with what was wrong after its first line
    when the fast path could say (a rejected field named with the validator's message)."""
    if not problems:
        return CORRECTION_MESSAGE
    first, rest = CORRECTION_MESSAGE.split("\n", 1)
    listed = "\n".join(f"- {problem}" for problem in problems)
    return f"{first}\nWhat was wrong:\n{listed}\n{rest}"


# -- role prompt --------------------------------------------------------------------------------


def cli_reference() -> str:
    """The packaged uwf CLI reference (generated from the Typer app), without trailing newlines.

    It is embedded in every role prompt so an agent knows how to inspect its own thread.
    """
    return _packaged_reference()


def _packaged_reference() -> str:
    from importlib.resources import files

    text = files("uwf.agent_kit").joinpath("cli_reference.md").read_text(encoding="utf-8")
    return text.rstrip("\n")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def build_role_prompt(role: dict[str, Any], cli_reference: str | None = None) -> str:
    """The role's system prompt: Goal, Capabilities, Prepare, Procedure, Output.

    Empty parts are left out. ``## Prepare`` carries the CLI reference the agent needs to
    read its thread (``cli_reference``: the packaged one when None; ``""`` leaves it out, for
    roles that never run uwf: ``cliReference`` in config.yaml) and the capabilities to load.
    The role ``description`` is for humans only.
    """
    reference = _packaged_reference() if cli_reference is None else cli_reference
    listed = role.get("capabilities")
    caps = [c for c in listed if isinstance(c, str)] if isinstance(listed, list) else []
    sections: list[tuple[str, str]] = []
    if goal := _text(role.get("goal")):
        sections.append(("Goal", goal))
    if caps:
        sections.append(("Capabilities", "\n".join(f"- {c}" for c in caps)))
    prepare = [reference] if reference else []
    if caps:
        prepare.append(
            "Before starting work, load the skills matching these capability keywords: "
            f"{', '.join(caps)}."
        )
    if prepare:
        sections.append(("Prepare", "\n\n".join(prepare)))
    if procedure := _text(role.get("procedure")):
        sections.append(("Procedure", procedure))
    if output := _text(role.get("output")):
        sections.append(("Output", output))
    return "\n\n".join(f"## {title}\n\n{body}" for title, body in sections)


# -- the generic agent prompt -------------------------------------------------------------------


def build_agent_prompt(
    *,
    format_instruction: str,
    role_def: dict[str, Any],
    task: str,
    steps: Sequence[Mapping[str, Any]],
    role: str,
    edge_prompt: str,
    first_visit: bool,
    cli_reference: str | None = None,
    offset: int = 0,
    summary: str | None = None,
    budget: int = FIRST_VISIT_QUOTA,
) -> str:
    """The whole prompt for one agent turn.

    ``first_visit`` (a stateless agent, or a new session) gets everything, every time: role
    prompt, the thread's task, the newest summary and the newest steps that fit ``budget``
    (``build_thread_history``: whatever role visits, however often it came before), the
    moderator's instruction. Otherwise (a re-entry into a live session, which remembers the
    rest) only what happened since the role's last turn. The deliverable format always
    comes first so it is the first thing the agent reads. ``steps`` are the steps after the
    summary (``AgentContext.history``), ``offset`` the number of steps before them.
    ``cli_reference`` ``""`` leaves the uwf CLI reference out of the role prompt.
    """
    lines: list[str] = []
    if format_instruction:
        lines += [format_instruction, ""]
    if not first_visit:
        lines.append(
            build_continuation_prompt(
                steps, role, edge_prompt, offset=offset, summary=summary, budget=budget
            )
        )
        return "\n".join(lines)
    lines += [build_role_prompt(role_def, cli_reference), "", "## Task", task]
    history = build_thread_history(steps, role, budget=budget, offset=offset, summary=summary)
    if history:
        lines += ["", history]
    lines += ["", "## Moderator Instruction", "", edge_prompt]
    return "\n".join(lines)


class PromptInputs(TypedDict):
    """What every agent's prompt is built from (``build_agent_prompt``, and ``uwf-builtin``'s
    messages)."""

    format_instruction: str
    role_def: dict[str, Any]
    task: str
    steps: Sequence[Mapping[str, Any]]
    offset: int
    summary: str | None
    role: str
    edge_prompt: str
    budget: int
    cli_reference: str | None


def prompt_inputs(ctx: AgentContext) -> PromptInputs:
    """The prompt inputs of ``ctx``: its role, task and edge prompt (with the children's
    results at the join of a fan-out), and what it shows of the thread
    (``AgentContext.history``: the newest summary and the steps after it), all within the
    context budget (``agent_kit.budget``)."""
    from uwf.agent_kit.budget import fit

    history = ctx.history
    fitted = fit(ctx, history)
    return PromptInputs(
        format_instruction=ctx.format_instruction,
        role_def=ctx.role_def,
        task=fitted.task,
        steps=history.steps,
        offset=history.offset,
        summary=history.summary,
        role=ctx.role,
        edge_prompt=fitted.edge_prompt,
        budget=fitted.budget,
        cli_reference=None if ctx.cli_reference else "",
    )


def agent_prompt(ctx: AgentContext, first_visit: bool) -> str:
    """``build_agent_prompt`` for ``ctx`` (``prompt_inputs``)."""
    return build_agent_prompt(**prompt_inputs(ctx), first_visit=first_visit)
