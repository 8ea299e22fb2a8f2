"""The ``## Deliverable Format`` block of a role's output schema: the first part of every
prompt an agent sends a model (docs/agents.md). A module of its own, below the prompts and the
agent's context alike: ``AgentContext.format_instruction`` builds it on first read without
importing the rest of the prompts. Its wording is part of the contract, as the prompts' is.
"""

from __future__ import annotations

from typing import Any

from uwf.moderator import emits
from uwf.moderator.evaluate import SUSPEND
from uwf.util.errors import UwfError
from uwf.util.jsonfmt import canonical, dumps

__all__ = ["build_output_format_instruction"]

_EXAMPLE_BODY = "... your markdown work here ..."
_NO_FIELDS = "  (schema fields will be extracted automatically)"


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
