"""Stored workflows: ``workflow put``/``check``/``show``/``list``/``history``/``rollback``, and
which workflow ``thread start`` runs.

Files are read and validated by ``uwf.engine.workflows.files`` (checks in
``uwf.moderator.validate``); project workflows are found by ``uwf.engine.workflows.discovery``. The
registry (name -> current hash) is changed only through the backend; ``history`` and
``rollback`` work from the type indexes of both Workflow schemas (plain, and with
``compactAfter``), so every version ever stored stays available. ``resolve_for_start``: a
hash, then an explicit file path, then a project workflow, then the registry.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from uwf.backend.base import Backend
from uwf.cas.store import Store
from uwf.engine.workflows import discovery
from uwf.engine.workflows.files import check_file, load_file, store_definition
from uwf.model.chain import workflow_node
from uwf.protocol import schemas
from uwf.protocol.schemas import is_workflow_name, workflow_name_problem
from uwf.util.base32 import NodeHash, check_hash, describe, is_hash
from uwf.util.errors import InvalidInput, NotFound, UwfError, oneline
from uwf.util.log import ProcessLog

if TYPE_CHECKING:
    from uwf.util.outputs import (
        WorkflowChecked,
        WorkflowListed,
        WorkflowRef,
        WorkflowRolledBack,
        WorkflowShown,
        WorkflowVersion,
    )


@dataclass(frozen=True)
class PutResult:
    """What ``workflow put`` prints (``output()``) and what it reports on stderr."""

    name: str
    hash: NodeHash
    warnings: list[str]

    def output(self) -> WorkflowRef:
        return {"name": self.name, "hash": self.hash}


def put_workflow(backend: Backend, path: Path) -> PutResult:
    """Validate a workflow file, store it and point the registry entry of its name at it.

    Nothing is written unless the whole file is valid. Putting the same file twice gives the
    same hash and leaves the registry file untouched.
    """
    definition = load_file(path)
    h = store_definition(backend.nodes, definition)
    name = definition["name"]
    previous = backend.registry.set(name, h)
    if previous != h:
        ProcessLog(backend.root, workflow=h).write(
            "H5R9C2X7", f"workflow registered name={name} hash={h} previous={previous}"
        )
    return PutResult(name, h, list(definition["warnings"]))


@dataclass(frozen=True)
class CheckResult:
    """``workflow check`` of one file: the hash ``put`` would give (None when refused)."""

    file: str
    name: str | None
    hash: NodeHash | None
    problems: list[str]
    warnings: list[str]

    def output(self) -> WorkflowChecked:
        return {"file": self.file, "name": self.name, "hash": self.hash, "problems": self.problems}


def check_workflow(path: Path) -> CheckResult:
    """Every check of ``put``, including the stored node's own, in a store of its own: nothing
    is written. A file-level problem (missing, not YAML…) is the one problem."""
    from uwf.backend.memory import MemoryStore

    shown = oneline(str(path))
    try:
        checked = check_file(path)
        if checked.problems:
            return CheckResult(shown, None, None, checked.problems, checked.warnings)
        h = store_definition(MemoryStore(), checked.definition)
    except UwfError as exc:
        return CheckResult(shown, None, None, [exc.message], [])
    return CheckResult(shown, checked.definition["name"], h, [], checked.warnings)


def _ident_text(ident: str) -> str:
    return ident if ident.isprintable() and len(ident) <= 100 else describe(ident, 100)


def show_workflow(backend: Backend, ident: str) -> WorkflowShown:
    """``{hash, name, type, payload, timestamp}`` of a registered name or a Workflow hash.

    ``name`` is the registry name pointing at that hash (null when no entry does, e.g. an
    older version).
    """
    ident = ident.strip()
    if not ident:
        raise InvalidInput("workflow ID cannot be empty")
    registry = backend.registry.read()
    name: str | None
    if ident in registry:
        h, name = registry[ident], ident
    elif is_hash(ident):
        h = ident
        name = next((k for k, v in registry.items() if v == h), None)
    else:
        raise NotFound(f"workflow not found: {_ident_text(ident)}")
    node = workflow_node(backend.nodes, h)
    return {
        "hash": h,
        "name": name,
        "type": node.type,
        "payload": node.payload,
        "timestamp": node.timestamp,
    }


def workflow_source(backend: Backend, ident: str) -> str:
    """The files a stored version-1 workflow was read from, as written: the one file's text;
    several (``!include``) each after a ``==> <path> <==`` line, as ``head`` shows files."""
    shown = show_workflow(backend, ident)
    payload = shown["payload"]
    files = payload.get("source") if isinstance(payload, dict) else None
    if not isinstance(files, list) or not files:
        raise InvalidInput(
            f"workflow {shown['hash']} has no stored source: only a version-1 file's node keeps "
            "the files it was read from (a uwf 0.5 file's node is its content: "
            "`uwf workflow show` prints it)"
        )
    texts: list[tuple[str, str]] = []
    for entry in files:
        node = backend.nodes.get(str(entry.get("hash")))
        if node is None or not isinstance(node.payload, str):
            raise NotFound(f"CAS node not found: {entry.get('hash')}")
        texts.append((str(entry.get("path")), node.payload))
    if len(texts) == 1:
        return texts[0][1]
    return "\n".join(f"==> {path} <==\n{text}" for path, text in texts)


def list_workflows(backend: Backend, cwd: Path) -> list[WorkflowListed]:
    """Project workflows first (``uwf.engine.workflows.discovery``), then the registry entries
    they do not shadow, then the files of ``workflowPaths`` neither shadows (the order
    ``thread start <name>`` looks in). Files are listed by name, not read."""
    local = discovery.project_workflows(cwd)
    out: list[WorkflowListed] = [{"name": n, "hash": "(local)", "origin": "local"} for n in local]
    registry = backend.registry.read()
    for name, h in registry.items():
        if name not in local:
            out.append({"name": name, "hash": h, "origin": "global"})
    for name in discovery.directory_workflows(discovery.paths(backend.root)):
        if name not in local and name not in registry:
            out.append({"name": name, "hash": "(file)", "origin": "paths"})
    return out


def workflow_file(root: Path, ident: str, cwd: Path) -> Path:
    """The file ``workflow put``/``check`` read for ``ident``: the path given, or — for a bare
    workflow name that names no file here — the project workflow of that name, else the one
    in ``workflowPaths`` (``uwf.engine.workflows.discovery``)."""
    path = Path(ident)
    if discovery.looks_like_path(ident) or not is_workflow_name(ident) or path.exists():
        return path
    found = discovery.find(ident, cwd) or discovery.find_in(ident, discovery.paths(root))
    if found is None:
        raise NotFound(
            f"file not found: {_ident_text(ident)} (nor a workflow of that name in .workflows/ up "
            "the tree or in workflowPaths)"
        )
    return found


def workflow_versions(store: Store) -> list[NodeHash]:
    """Every stored Workflow node, from the type index of both Workflow types."""
    return [h for t in schemas.hashes().workflows for h in store.index(t)]


def history(backend: Backend, name: str) -> list[WorkflowVersion]:
    """Every stored version of a workflow, oldest first, marking the registry's current one."""
    if not name.strip():
        raise InvalidInput("workflow ID cannot be empty")
    store = backend.nodes
    current = backend.registry.get(name)
    out: list[WorkflowVersion] = []
    for h in workflow_versions(store):
        node = store.get(h)
        if node is None or not isinstance(node.payload, dict) or node.payload.get("name") != name:
            continue
        out.append({"hash": h, "timestamp": node.timestamp, "current": h == current})
    out.sort(key=lambda v: v["timestamp"])  # the two Workflow types have an index each
    if current is not None and all(v["hash"] != current for v in out):
        node = store.get(current)
        if node is not None and node.type in schemas.hashes().workflows:
            out.append({"hash": current, "timestamp": node.timestamp, "current": True})
    if not out:
        raise NotFound(f"workflow not found: {_ident_text(name)}")
    return out


def rollback(backend: Backend, name: str, h: str) -> WorkflowRolledBack:
    """Point the registry entry of ``name`` at an earlier (or any) stored version ``h``."""
    problem = workflow_name_problem(name)
    if problem is not None:
        raise InvalidInput(f"{describe(name)} {problem}")
    version = check_hash(h)
    node = workflow_node(backend.nodes, version)
    stored_name = node.payload.get("name") if isinstance(node.payload, dict) else None
    if stored_name != name:
        raise InvalidInput(
            f'workflow {h} is named {json.dumps(stored_name, ensure_ascii=False)}, not "{name}"'
        )
    previous = backend.registry.set(name, version)
    if previous != h:
        ProcessLog(backend.root, workflow=h).write(
            "T3G8B5N2", f"workflow rolled back name={name} hash={h} previous={previous}"
        )
    return {"name": name, "hash": version, "previous": previous}


def _store_file(backend: Backend, path: Path) -> NodeHash:
    return store_definition(backend.nodes, load_file(path))


def resolve_for_start(backend: Backend, ident: str, cwd: Path) -> NodeHash:
    """The Workflow hash ``thread start <ident>`` runs.

    In order: a well-formed hash (must be a stored Workflow); an explicit file path (contains
    ``/`` or ``\\``, or ends in ``.yaml``/``.yml``; relative to ``cwd``); a project workflow
    (``uwf.engine.workflows.discovery``); the registry; a file of ``workflowPaths``. Files
    are validated and stored, never registered.
    """
    ident = ident.strip()
    if not ident:
        raise InvalidInput("workflow ID cannot be empty")
    store = backend.nodes
    if is_hash(ident):
        workflow_node(store, ident)
        return ident
    if discovery.looks_like_path(ident):
        path = Path(ident)
        if not path.is_absolute():
            path = Path(os.path.abspath(cwd / path))
        return _store_file(backend, path)
    found = discovery.find(ident, cwd)
    if found is not None:
        return _store_file(backend, found)
    h = backend.registry.get(ident) if is_workflow_name(ident) else None
    if h is not None:
        workflow_node(store, h)
        return h
    found = discovery.find_in(ident, discovery.paths(backend.root))
    if found is not None:  # workflowPaths: a name that is not stored
        return _store_file(backend, found)
    raise NotFound(f"workflow not found: {_ident_text(ident)}")
