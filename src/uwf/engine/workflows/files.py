"""Workflow files: read a YAML file, validate it (``uwf.moderator.validate``), and turn the
definition into the Workflow node that ``workflow put`` and ``thread start`` store.

One reader with one set of messages (docs/errors.md, "Workflow files"): a file-level problem
(missing, unreadable, not UTF-8, not YAML, not a mapping) is one line; problems of the
content are one header line ``invalid workflow <file>: <n> problems`` followed by one
``  - <where>: <what>`` line each.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uwf.cas.store import Store
from uwf.moderator.validate import validate
from uwf.protocol import schemas
from uwf.util import yamlio
from uwf.util.base32 import NodeHash
from uwf.util.errors import InvalidInput, NotFound, oneline

NOT_A_MAPPING = "expected a mapping with name, description, roles and graph"


def read_document(path: Path) -> dict[Any, Any]:
    """The parsed YAML mapping of a workflow file; one-line errors for file-level problems."""
    shown = oneline(str(path))
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise NotFound(f"file not found: {shown}") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read workflow file {shown}: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"invalid workflow file {shown}: not UTF-8 text "
            f"(byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    try:
        document = yamlio.load(text, source=f"workflow file {shown}")
    except InvalidInput as exc:
        raise InvalidInput(_yaml_message(exc.message, shown)) from None
    if not isinstance(document, dict):
        raise InvalidInput(f"invalid workflow YAML in {shown}: {NOT_A_MAPPING}")
    return document


def _yaml_message(message: str, shown: str) -> str:
    """``invalid YAML in <file>: <parser message>``: the file named once, up front."""
    message = message.replace(' in "<unicode string>",', ",").replace("<unicode string>", shown)
    prefix = "invalid YAML: "
    if message.startswith(prefix):
        return f"invalid YAML in {shown}: {message[len(prefix) :]}"
    return message


@dataclass
class Checked:
    """A file's definition (complete only without problems), problems and warnings."""

    definition: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def check_file(path: Path) -> Checked:
    """Every check of ``workflow put`` on one file, nothing written; file-level errors raise."""
    definition, p = validate(read_document(path), path.name)
    return Checked(definition, p.lines, p.warnings)


def load_file(path: Path) -> dict[str, Any]:
    """Read and validate a workflow file; return its normalised definition.

    The result is ``{name, description, roles, graph, warnings}`` (``uwf.moderator.validate``);
    ``warnings`` lists non-fatal findings for the caller to show. Raises NotFound for a
    missing file, InvalidInput for everything else — one header line and one line per problem.
    """
    checked = check_file(path)
    if checked.problems:
        n = len(checked.problems)
        header = f"invalid workflow {oneline(str(path))}: {n} problem{'s' if n != 1 else ''}"
        raise InvalidInput("\n".join([header, *(f"  - {line}" for line in checked.problems)]))
    return {**checked.definition, "warnings": checked.warnings}


def materialise(store: Store, definition: dict[str, Any]) -> dict[str, Any]:
    """Store every role's schema and return the Workflow payload that refers to them.

    A schema without a ``title`` gets ``<workflow>.<role>``; the stored role keeps exactly the
    six fields, ``meta`` being the schema node's hash. The payload itself is not stored here.
    """
    name = definition["name"]
    roles: dict[str, Any] = {}
    for role, spec in definition["roles"].items():
        schema = dict(spec["meta"])
        schema.setdefault("title", f"{name}.{role}")
        roles[role] = {
            "description": spec["description"],
            "goal": spec["goal"],
            "capabilities": list(spec["capabilities"]),
            "procedure": spec["procedure"],
            "output": spec["output"],
            "meta": store.put_schema(schema),
        }
    graph = {
        node: {status: _target(t) for status, t in edges.items()}
        for node, edges in definition["graph"].items()
    }
    payload = {"name": name, "description": definition["description"], "roles": roles}
    payload["graph"] = graph
    if "compactAfter" in definition:  # only then the extended type: other hashes stay as they were
        payload["compactAfter"] = definition["compactAfter"]
    return payload


def _target(target: dict[str, Any]) -> dict[str, Any]:
    out = {"role": target["role"], "prompt": target["prompt"]}
    if "fanOut" in target:  # docs/format.md, "Fan-out and join"
        out["fanOut"] = dict(target["fanOut"])
    return out


def has_fan_out(payload: dict[str, Any]) -> bool:
    """Whether any edge of a Workflow payload starts child threads."""
    return any("fanOut" in t for edges in payload["graph"].values() for t in edges.values())


def store_definition(store: Store, definition: dict[str, Any]) -> NodeHash:
    """Materialise a validated definition and store it as a Workflow node; return its hash.

    A workflow with a ``fanOut`` edge is a Workflow (fanOut) node, else one with
    ``compactAfter`` a Workflow (compactAfter) node (docs/format.md, "Extended types"); any
    other keeps the plain Workflow type and its hash."""
    h = schemas.ensure(store)
    payload = materialise(store, definition)
    if has_fan_out(payload):
        return store.put(h.workflow_fan_out, payload)
    return store.put(h.workflow_compact if "compactAfter" in payload else h.workflow, payload)
