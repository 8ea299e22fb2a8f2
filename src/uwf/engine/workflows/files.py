"""Workflow files: read a YAML file, validate it (``uwf.moderator.validate``), and turn the
definition into the Workflow node that ``workflow put`` and ``thread start`` store.

One reader with one set of messages (docs/errors.md, "Workflow files"): a file-level problem
(missing, unreadable, not UTF-8, not YAML, not a mapping, an ``!include`` that cannot be
followed) is one line; problems of the content are one header line ``invalid workflow
<file>: <n> problems`` followed by one ``  - <where>: <what>`` line each.

A workflow is a file, or a folder holding ``index.yaml`` (or ``index.yml``) whose name is the
workflow's (docs/format.md, "Includes and folder workflows"); ``!include`` reads more files
from the workflow's directory (``uwf.util.includes``). Files of either format are read here:
uwf 0.5's, and version 1 (``version: 1``, uwf 0.8's), which the Workflow (version 1) type
stores with the files it was read from.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uwf.cas.store import Store
from uwf.moderator.filecheck import EXTENSIONS, implied_by, stem
from uwf.moderator.validate import validate
from uwf.protocol import schemas
from uwf.util import yamlio
from uwf.util.base32 import NodeHash
from uwf.util.errors import InvalidInput, NotFound, oneline
from uwf.util.includes import IncludeError, Reader, Source

NOT_A_MAPPING = "expected a mapping with name, description, roles and graph"
INDEX = tuple(f"index{ext}" for ext in EXTENSIONS)  # a folder workflow's file
LOCAL_DIRS = (".workflow", ".workflows")  # where project workflows live (discovery)


@dataclass
class Document:
    """A workflow file as read: its mapping, the name its path implies and every file it was
    read from (the entry file first, then what it includes)."""

    value: dict[Any, Any]
    path: Path
    implied: str
    sources: list[Source]

    @property
    def basename(self) -> str:
        """The file as its name check shows it: ``review.yaml``, or ``review/index.yaml``."""
        if self.path.name in INDEX and self.implied != stem(self.path.name):
            return f"{self.implied}/{self.path.name}"
        return self.path.name


def entry_file(path: Path) -> Path:
    """The file to read for ``path``: itself, or a folder's ``index.yaml``/``index.yml``."""
    if path.is_dir():
        for name in INDEX:
            if (path / name).is_file():
                return path / name
    return path


def implied_name(path: Path) -> str:
    """The workflow name a file's path implies: its stem, or for a folder workflow's
    ``index.yaml`` the folder's name (never a ``.workflows/`` directory's: a file
    ``.workflows/index.yaml`` is the workflow ``index``). A ``.workflow`` before the
    extension is not part of it: uwf 0.8's ``linear.workflow.yaml`` holds ``linear``."""
    folder = Path(os.path.abspath(path)).parent.name
    if path.name in INDEX and folder and folder not in LOCAL_DIRS:
        return folder
    return implied_by(path.name)


def read(path: Path) -> Document:
    """A workflow file (or folder) as read; one-line errors for file-level problems."""
    path = entry_file(path)
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
    reader = Reader(Path(os.path.abspath(path)).parent)
    reader.record(path, text)
    try:
        document = reader.load_yaml(text, path, source=f"workflow file {shown}", named=False)
        yamlio.check_limits(document)  # the whole value, included files and all
    except IncludeError as exc:
        raise InvalidInput(f"invalid workflow file {shown}: {exc.message}") from None
    except InvalidInput as exc:
        raise InvalidInput(_yaml_message(exc.message, shown)) from None
    if not isinstance(document, dict):
        raise InvalidInput(f"invalid workflow YAML in {shown}: {NOT_A_MAPPING}")
    return Document(document, path, implied_name(path), reader.sources)


def read_document(path: Path) -> dict[Any, Any]:
    """The parsed YAML mapping of a workflow file; one-line errors for file-level problems."""
    return read(path).value


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
    """Every check of ``workflow put`` on one file, nothing written; file-level errors raise.

    A version-1 definition keeps the files it was read from (``sources``), for its node."""
    document = read(path)
    definition, p = validate(document.value, document.basename, document.implied)
    if definition.get("version") == 1:
        definition["sources"] = document.sources
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
        shown = oneline(str(entry_file(path)))
        header = f"invalid workflow {shown}: {n} problem{'s' if n != 1 else ''}"
        raise InvalidInput("\n".join([header, *(f"  - {line}" for line in checked.problems)]))
    return {**checked.definition, "warnings": checked.warnings}


def materialise(store: Store, definition: dict[str, Any]) -> dict[str, Any]:
    """Store every role's schema and return the Workflow payload that refers to them.

    A schema without a ``title`` gets ``<workflow>.<role>``; the stored role keeps exactly the
    six fields, ``meta`` being the schema node's hash (and its ``retry``, when it has one).
    Edges keep what the validator normalised: ``role``, ``prompt``, and ``fanOut``
    (docs/format.md, "Fan-out and join") or a version-1 edge's ``location``. A version-1
    definition also stores its files as Text nodes (``source``) and keeps ``version``. The
    payload itself is not stored here.
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
            # a reference, not a type: put (refreshed), not put_schema (once per process)
            "meta": store.put(store.ensure_meta(), schema),
        }
        if "retry" in spec:  # only then the retry type: other hashes stay as they were
            roles[role]["retry"] = dict(spec["retry"])
    graph = {
        node: {status: dict(target) for status, target in edges.items()}
        for node, edges in definition["graph"].items()
    }
    payload: dict[str, Any] = {}
    if definition.get("version") == 1:
        payload["version"] = 1
    payload.update(name=name, description=definition["description"], roles=roles, graph=graph)
    if "compactAfter" in definition:  # only then the extended type: other hashes stay as they were
        payload["compactAfter"] = definition["compactAfter"]
    if "retry" in definition:
        payload["retry"] = dict(definition["retry"])
    if "sources" in definition:
        text = schemas.ensure(store).text
        payload["source"] = [
            {"path": s.path, "hash": store.put(text, s.text), "size": len(s.text.encode())}
            for s in definition["sources"]
        ]
    return payload


def has_fan_out(payload: dict[str, Any]) -> bool:
    """Whether any edge of a Workflow payload starts child threads."""
    return any("fanOut" in t for edges in payload["graph"].values() for t in edges.values())


def has_retry(payload: dict[str, Any]) -> bool:
    """Whether a Workflow payload sets a retry policy, at its top or on a role."""
    return "retry" in payload or any("retry" in role for role in payload["roles"].values())


def store_definition(store: Store, definition: dict[str, Any]) -> NodeHash:
    """Materialise a validated definition and store it as a Workflow node; return its hash.

    A workflow read from a version-1 file is a Workflow (version 1) node — Workflow (version
    1, retry) when it sets a retry policy —; a uwf 0.5 one that sets a retry policy is a
    Workflow (retry) node, else one with a ``fanOut`` edge a Workflow (fanOut) node, else one
    with ``compactAfter`` a Workflow (compactAfter) node (docs/format.md, "Extended types");
    any other keeps the plain Workflow type and its hash. (Version-1 files have no ``fanOut``:
    the validator refuses it.)"""
    h = schemas.ensure(store)
    payload = materialise(store, definition)
    retry = has_retry(payload)
    if payload.get("version") == 1:
        return store.put(h.workflow_v1_retry if retry else h.workflow_v1, payload)
    if retry:
        return store.put(h.workflow_retry, payload)
    if has_fan_out(payload):
        return store.put(h.workflow_fan_out, payload)
    return store.put(h.workflow_compact if "compactAfter" in payload else h.workflow, payload)
