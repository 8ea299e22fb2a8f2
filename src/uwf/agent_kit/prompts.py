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
from uwf.moderator import emits
from uwf.moderator.evaluate import SUSPEND
from uwf.util.errors import UwfError
from uwf.util.jsonfmt import canonical, dumps

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


_EXAMPLE_BODY = "... your markdown work here ..."
_NO_FIELDS = "  (schema fields will be extracted automatically)"


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


# -- deliverable format -------------------------------------------------------------------------


def _js_string(value: Any) -> str:
    """A value as JavaScript's ``String(value)`` prints it (objects as compact JSON)."""
    if isinstance(value, str):
        return value
    try:
        return dumps(canonical(value))
    except (UwfError, ValueError, TypeError):
        return str(value)


def _example_line(field: emits.Field) -> str:
    resolved = field.resolved
    parts = ["required"] if field.required else []
    enum = resolved.get("enum")
    kind = field.kind
    if isinstance(enum, list) and enum:
        parts += [_js_string(v) for v in enum]
        value = f" {_js_string(enum[0])}"
    elif kind == "boolean":
        parts += ["true", "false"]
        value = " true"
    elif kind == "string":
        value = " <string>"
    elif kind in ("number", "integer"):
        value = " <number>"
    elif kind == "array":
        value = "\n  - <item>"
    elif kind == "object":
        value = " <object>"
    else:
        value = " <value>"
    parts = [p for p in parts if p]
    comment = f"  # {' | '.join(parts)}" if parts else ""
    return f"{field.name}:{value}{comment}"


def build_output_format_instruction(schema: Any, key: str | None = None) -> str:
    """The ``## Deliverable Format`` block agents put first in their prompt.

    It shows a frontmatter example built from the role's output schema and lists its fields.
    ``None`` (the role's schema node is missing) gives ``""``: nothing to ask for. No standard
    field (status, next, confidence, artifacts, scope) is added unless the schema has it.

    ``key`` is the routing field of a version-1 workflow (``$status``): its line then lists
    every status the schema allows, each status's own fields follow the list when the schema
    has several shapes, and the block ends with how to suspend the step (``$SUSPEND``).
    """
    if schema is None:
        return ""
    fields = emits.fields(schema if key is None else _without_suspend(schema, key))
    if key is not None:
        fields = [_routing_field(f, schema, key) if f.name == key else f for f in fields]
    if fields:
        lines = "\n".join(_example_line(f) for f in fields)
        example = f"---\n{lines}\n---\n\n{_EXAMPLE_BODY}"
        field_list = "\n".join(
            f"  - `{f.name}`{' (required)' if f.required else ''}" for f in fields
        )
    else:
        example = f"---\n\n{_EXAMPLE_BODY}"
        field_list = _NO_FIELDS
    return (
        "## Deliverable Format\n"
        "\n"
        "Your response MUST begin with a YAML frontmatter block followed by your markdown work:\n"
        "\n"
        f"```\n{example}\n```\n"
        "\n"
        "The frontmatter is the **primary deliverable** — the engine reads it directly.\n"
        "Your meta output must satisfy these fields:\n"
        "\n"
        f"{field_list}\n"
        "\n"
        "Output ONLY the fields listed above. "
        "Do not add extra fields that are not specified in the schema.\n"
        "\n"
        "Focus exclusively on YOUR role's deliverable. "
        "Do not perform actions outside your role's scope."
    ) + (_version1_notes(schema, key) if key is not None else "")


def _suspends(shape: Any, key: str) -> bool:
    """A schema branch that only says how to suspend (``key: $SUSPEND``)."""
    props = shape.get("properties") if isinstance(shape, dict) else None
    spec = props.get(key) if isinstance(props, dict) else None
    return spec is not None and emits.Field(key, spec, True).choices == [SUSPEND]


def _without_suspend(schema: Any, key: str) -> Any:
    """The schema without its ``$SUSPEND`` branches: their fields are asked for apart."""
    if not isinstance(schema, dict) or isinstance(schema.get("properties"), dict):
        return schema
    out = dict(schema)
    for union in ("anyOf", "oneOf"):
        members = schema.get(union)
        if isinstance(members, list):
            out[union] = [m for m in members if not _suspends(m, key)]
    return out


def _routing_field(field: emits.Field, schema: Any, key: str) -> emits.Field:
    """The routing field with every status the schema allows (not only its first shape's)."""
    st = emits.statuses(schema, key)
    values = [v for v in st.values if v != SUSPEND]
    if not st.known or not values:
        return field
    return emits.Field(field.name, {"enum": values}, field.required)


def _version1_notes(schema: Any, key: str) -> str:
    """Each status's own fields (a schema of several shapes), and how to suspend."""
    paragraphs: list[str] = []
    lines = []
    for shape in emits.shapes(schema) if len(emits.shapes(schema)) > 1 else []:
        spec = shape.properties.get(key)
        choices = emits.Field(key, spec, True).choices if spec is not None else None
        if not choices or SUSPEND in choices:
            continue
        named = [
            f"`{name}`{' (required)' if name in shape.required else ''}"
            for name in shape.properties
            if name != key
        ]
        shown = " or ".join(f"`{key}: {_js_string(c)}`" for c in choices)
        lines.append(f"  - {shown}: {', '.join(named) or 'no other field'}")
    if lines:
        paragraphs.append("Each status asks for its own fields:\n\n" + "\n".join(lines))
    paragraphs.append(
        "If you cannot finish without something only a person can give you (an answer, an "
        f"access, a decision), answer instead with `{key}: {SUSPEND}` and `reason: <what you "
        "need>`: the thread then waits until a person resumes it with what you asked for."
    )
    return "\n\n" + "\n\n".join(paragraphs)


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
