"""Project workflows: the one rule ``workflow list`` and ``thread start`` share.

A project workflow is a file ``<name>.yaml`` or ``<name>.yml`` — or a folder ``<name>/``
holding ``index.yaml`` or ``index.yml`` — in a ``.workflow/`` or ``.workflows/`` directory of
the current directory or of any directory above it. The closest directory wins; in one
directory ``.workflow/`` comes before ``.workflows/``, a file before a folder and ``.yaml``
before ``.yml``. Only stems that are workflow names count (``schemas.is_workflow_name``):
only those can be started by name. A project workflow shadows a registered one of the same
name.

``workflowPaths`` in config.yaml (docs/format.md, "Workflow directories") names more
directories, each holding workflow files directly (``<dir>/<name>.yaml``, ``<dir>/<name>/
index.yaml``): searched in order, after the project and — for ``thread start`` — after the
registry (``paths``, ``find_in``, ``directory_workflows``).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from uwf.engine.workflows.files import INDEX, LOCAL_DIRS
from uwf.moderator.filecheck import EXTENSIONS, stem
from uwf.protocol.schemas import is_workflow_name

__all__ = [
    "LOCAL_DIRS",
    "directory_workflows",
    "find",
    "find_in",
    "looks_like_path",
    "paths",
    "project_workflows",
]


def looks_like_path(ident: str) -> bool:
    """A workflow argument that names a file: it contains a slash or ends in .yaml/.yml."""
    return "/" in ident or "\\" in ident or ident.endswith(EXTENSIONS)


def _directories(cwd: Path) -> Iterator[Path]:
    """The project directories to search, closest first."""
    start = Path(os.path.abspath(cwd))
    for directory in (start, *start.parents):
        for sub in LOCAL_DIRS:
            yield directory / sub


def find(name: str, cwd: Path) -> Path | None:
    """The project workflow file for ``name``, or None."""
    return find_in(name, _directories(cwd))


def find_in(name: str, directories: Iterable[Path]) -> Path | None:
    """The workflow file for ``name`` in the first of ``directories`` that has one, or None."""
    if not is_workflow_name(name):
        return None
    for directory in directories:
        for ext in EXTENSIONS:
            candidate = directory / f"{name}{ext}"
            if candidate.is_file():
                return candidate
        for index in INDEX:
            candidate = directory / name / index
            if candidate.is_file():
                return candidate
    return None


def _names_in(directory: Path) -> list[tuple[str, Path]]:
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []
    found = []
    for entry in entries:
        name = stem(entry.name)
        if name != entry.name and is_workflow_name(name) and entry.is_file():
            found.append((name, Path(entry.path)))
        elif is_workflow_name(entry.name) and entry.is_dir():
            indexes = [Path(entry.path, i) for i in INDEX if Path(entry.path, i).is_file()]
            if indexes:
                found.append((entry.name, indexes[0]))
    # a file before a folder, .yaml before .yml for the same name, as ``find`` has it
    found.sort(
        key=lambda pair: (
            pair[0],
            pair[1].name in INDEX,
            not pair[1].name.endswith(".yaml"),
        )
    )
    return found


def project_workflows(cwd: Path) -> dict[str, Path]:
    """Every name ``find`` resolves from ``cwd``, with its file, sorted by name (files not read)."""
    return directory_workflows(_directories(cwd))


def directory_workflows(directories: Iterable[Path]) -> dict[str, Path]:
    """Every name ``find_in`` resolves in ``directories``, with its file, sorted by name."""
    out: dict[str, Path] = {}
    for directory in directories:
        for name, path in _names_in(directory):
            out.setdefault(name, path)
    return dict(sorted(out.items()))


def paths(root: Path) -> list[Path]:
    """The directories ``workflowPaths`` of ``<root>/config.yaml`` names, in its order: ``~``
    is the home directory, a relative path is relative to the storage root."""
    from uwf.config.config import load_config

    found = []
    for entry in load_config(root).workflow_paths:
        path = Path(os.path.expanduser(entry.strip()))
        found.append(Path(os.path.abspath(root / path)))
    return found
