"""Steps written by people: an answer, checked against the role's schema, and its step.

An answer is a text in the frontmatter form — a ``---``-delimited YAML block with the role's
fields, then markdown (the step's content) — or a bare YAML or JSON mapping. It is checked
strictly (no coercion: a person sees the rejection and fixes it), a field left empty is left
out unless its schema accepts null, and a rejection names the field. The step is a StepNode
like any agent's; its detail (``HumanDetail``) says how it was written (docs/format.md,
"Steps written by hand"). ``thread fork --output/--edit``, ``thread answer`` and ``uwf-human``
all go through here.
"""

from __future__ import annotations

import getpass
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from uwf.cas.store import Store
from uwf.model import chain, cost
from uwf.model.turns import detail_schema, store_turns
from uwf.moderator import emits
from uwf.protocol import schemas
from uwf.protocol.workflow import Workflow
from uwf.util.base32 import NodeHash
from uwf.util.errors import InvalidInput, NotFound, SchemaViolation, UwfError
from uwf.util.frontmatter import load_mapping, split
from uwf.util.jsonfmt import dump_yaml, dumps
from uwf.util.tuples import NamedTuple

LABEL = "uwf-human"  # the StepNode's agent for every step a person wrote

HUMAN_DETAIL = detail_schema(
    "HumanDetail",
    {"via": {"type": "string"}},
    optional={
        # a plain hash, not a cas_ref: step-details would expand the whole original chain
        "editedFrom": {"type": "string", "minLength": 13, "maxLength": 13},
        "user": {"type": "string"},
        **cost.COST_FIELDS,
    },
)
HUMAN_DETAIL["description"] = (
    "A step written by a person (docs/format.md, 'Steps written by hand'): via is how "
    "(uwf-human, thread answer, thread fork --edit, thread fork --output); editedFrom the step "
    "whose output was edited."
)

T = TypeVar("T")


class Answer(NamedTuple):
    output: dict[str, Any]  # the role's fields
    body: str  # the markdown after the frontmatter: the step's content


def parse_answer(text: str) -> Answer:
    """An answer text: a frontmatter document, or a bare YAML/JSON mapping (no body)."""
    text = text.lstrip("\ufeff")
    block, body = split(text)
    if block is None:
        block, body = text, ""
    data = load_mapping(block)
    if data is None:
        raise InvalidInput(
            "answer is not a YAML mapping of the role's fields (a frontmatter block between "
            "--- lines followed by markdown, or YAML or JSON)"
        )
    return Answer(data, body.strip("\n"))


def role_schema(store: Store, workflow: Workflow, role: str) -> tuple[str, Any]:
    """(hash, payload) of a role's output schema."""
    found = workflow.role(role)
    if found is None:
        raise InvalidInput(f'unknown role "{role}" in workflow "{workflow.payload.get("name")}"')
    schema_hash = str(found.spec.get("meta"))
    node = store.get(schema_hash)
    if node is None:
        raise NotFound(f"CAS node not found: {schema_hash}")
    return schema_hash, node.payload


def clean(output: dict[str, Any], schema: Any) -> dict[str, Any]:
    """The output without the fields left empty (null) whose schema does not accept null."""
    from uwf.cas.schema import validate

    fields = {f.name: f.schema for f in emits.fields(schema)}
    return {
        name: value
        for name, value in output.items()
        if value is not None or (name in fields and not validate(fields[name], None))
    }


def check(role: str, schema: Any, output: dict[str, Any]) -> None:
    """SchemaViolation naming the field when ``output`` does not satisfy the role's schema."""
    from uwf.cas.schema import field_problems

    problems = field_problems(schema, output)
    if problems:
        shown = "; ".join(problems[:3]) + ("; …" if len(problems) > 3 else "")
        raise SchemaViolation(f'output rejected by the schema of role "{role}": {shown}')


def accept(store: Store, workflow: Workflow, role: str, output: dict[str, Any]) -> str:
    """Check a person's output against the role's schema (``clean`` first) and the graph's
    routing; store it and return its hash."""
    from uwf.moderator.evaluate import (
        BODY,
        ModeratorError,
        evaluate,
        require_instruction,
        rules_of,
    )

    schema_hash, schema = role_schema(store, workflow, role)
    output = clean(output, schema)
    check(role, schema, output)
    rules = rules_of(workflow)
    # the text that comes with the output is not known here: a prompt that shows it is not
    # blank for want of it (the step's own check, when it is recorded, reads the text)
    view = {**output, BODY: "…"} if rules.version == 1 else output
    try:
        decision = evaluate(workflow.graph, role, view, rules)
        require_instruction(workflow.graph, role, decision)
    except ModeratorError as exc:
        raise InvalidInput(f"the graph cannot route this output: {exc}") from None
    return store.put(schema_hash, output)


def _field_lines(field: emits.Field, values: dict[str, Any]) -> list[str]:
    notes = ["required"] if field.required else ["optional"]
    choices = field.choices
    if choices:
        notes.append(" | ".join(dumps(v) if not isinstance(v, str) else v for v in choices))
    elif field.kind:
        notes.append(str(field.kind))
    description = field.schema.get("description") if isinstance(field.schema, dict) else None
    lines = [f"# {line}" for line in str(description or "").splitlines() if line.strip()]
    if field.name in values:
        dumped = dump_yaml({field.name: values[field.name]}).rstrip("\n").splitlines()
        lines += [f"{dumped[0]}  # {', '.join(notes)}", *dumped[1:]]
    else:
        lines.append(f"{field.name}:  # {', '.join(notes)}")
    return lines


def template(
    schema: Any, values: dict[str, Any] | None = None, body: str = "", notes: Sequence[str] = ()
) -> str:
    """A frontmatter document to fill in: one line per field of the role's schema (with
    ``values`` where given, else empty) with whether it is required and its choices or type,
    the ``notes`` as comments at the top, and ``body`` after the block."""
    values = dict(values or {})
    lines = [f"# {note}" for note in notes]
    names = set()
    for field in emits.fields(schema):
        names.add(field.name)
        lines += _field_lines(field, values)
    for name in values:  # fields the schema does not list (e.g. a schema without properties)
        if name not in names:
            lines += dump_yaml({name: values[name]}).rstrip("\n").splitlines()
    return "---\n" + "\n".join(lines) + "\n---\n\n" + (body.strip("\n") + "\n" if body else "")


def with_note(text: str, note: str) -> str:
    """``text`` with ``# note`` lines first in its frontmatter block (or at its top)."""
    comment = "".join(f"# {line}\n" for line in note.splitlines())
    if text.startswith("---\n"):
        return "---\n" + comment + text[4:]
    return comment + text


def edit_answer(text: str, accept: Callable[[str], T], tty: str | None = None) -> T | None:
    """Open the editor on ``text`` until ``accept`` takes what the person wrote.

    ``accept`` raises UwfError to reject: the editor opens again on the person's text with
    the rejection as a comment on top. None when the person leaves the text unchanged (or
    empties it): no answer.
    """
    from uwf.adapters.editor import edit

    fd, name = tempfile.mkstemp(prefix="uwf-answer-", suffix=".md")
    path = Path(name)
    try:
        os.close(fd)
        shown = text
        while True:
            path.write_text(shown, encoding="utf-8")
            edit(path, tty)
            written = path.read_text(encoding="utf-8", errors="replace")
            if written == shown or not written.strip():
                return None
            try:
                return accept(written)
            except UwfError as exc:
                shown = with_note(written, f"rejected: {exc.message}")
    finally:
        path.unlink(missing_ok=True)


def user() -> str | None:
    """Who is writing, as the system knows them (None when it does not)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def store_detail(
    store: Store,
    prev: chain.Start | chain.Step,
    body: str,
    detail: dict[str, Any],
    duration_ms: int | None = None,
) -> str:
    """A HumanDetail for a step after ``prev``: ``detail`` (``via``, ``editedFrom``), who
    wrote it, the cost fields, and its content as one turn; the detail's hash."""
    turns = store_turns(store, [{"role": "assistant", "content": body}] if body.strip() else [])
    who = user()
    payload = {
        **detail,
        **({"user": who} if who else {}),
        **cost.fields(store, prev, duration_ms, None),
        "turns": turns,
    }
    return store.put(store.put_schema(HUMAN_DETAIL), payload)


def write_step(
    store: Store,
    prev: chain.Start | chain.Step,
    *,
    role: str,
    edge_prompt: str,
    output: NodeHash | str,
    body: str,
    detail: dict[str, Any],
    duration_ms: int | None = None,
    children: tuple[NodeHash, ...] | None = None,
    previous_attempts: dict[str, Any] | None = None,
) -> NodeHash:
    """Store a person's step after ``prev``: its detail (``store_detail``, with the failed
    attempts it came after: ``uwf.model.attempts``) and the StepNode; the StepNode's hash."""
    detail_hash = store_detail(store, prev, body, detail, duration_ms)
    if previous_attempts is not None:
        from uwf.model import attempts

        detail_hash = attempts.attach(store, detail_hash, previous_attempts)
    start = chain.start_of(store, prev)
    step = {
        "start": start.hash,
        "prev": None if isinstance(prev, chain.Start) else prev.hash,
        "role": role,
        "output": output,
        "detail": detail_hash,
        "agent": LABEL,
        "edgePrompt": edge_prompt,
        "depth": chain.depth_of(store, prev) + 1,
    }
    if children is not None:  # the join of a fan-out (docs/format.md, "Fan-out and join")
        return store.put(schemas.ensure(store).step_join, {**step, "children": list(children)})
    return store.put(schemas.ensure(store).step, step)
