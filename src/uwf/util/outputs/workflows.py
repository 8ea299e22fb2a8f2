"""What the ``workflow`` commands print.

One part of ``uwf.util.outputs`` (its docstring says what these types are for)."""

# No ``from __future__ import annotations``: Python 3.11 reads ``NotRequired`` only from
# annotations that are evaluated.
from typing import Any, TypedDict

from uwf.util.base32 import NodeHash


class WorkflowRef(TypedDict):
    """``workflow put``."""

    name: str
    hash: NodeHash


class WorkflowChecked(TypedDict):
    """One file of ``workflow check``: ``hash`` is what ``put`` would give (null: refused)."""

    file: str
    name: str | None
    hash: NodeHash | None
    problems: list[str]


class WorkflowShown(TypedDict):
    """``workflow show``: ``name`` is the registry name pointing at the hash, if any."""

    hash: NodeHash
    name: str | None
    type: NodeHash
    payload: Any
    timestamp: int


class WorkflowListed(TypedDict):
    """One workflow of ``workflow list``: ``origin`` is ``local`` (a project file, hash
    ``(local)``), ``global`` (the registry) or ``paths`` (a file of ``workflowPaths``, hash
    ``(file)``)."""

    name: str
    hash: str
    origin: str


class WorkflowVersion(TypedDict):
    """One version of ``workflow history``."""

    hash: NodeHash
    timestamp: int
    current: bool


class WorkflowRolledBack(TypedDict):
    """``workflow rollback``."""

    name: str
    hash: NodeHash
    previous: NodeHash | None
