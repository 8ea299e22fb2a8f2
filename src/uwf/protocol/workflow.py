"""A stored workflow, typed: ``Workflow``, its ``Role``s, its ``Graph`` and each ``Edge``.

Thin, read-only views over a Workflow node's payload (docs/format.md, "Workflow"), in the
manner of ``uwf.model.chain.Step``: a view holds the payload it was made from and reads a key
only when asked, so making one copies and validates nothing (a step makes a few, per
loaded workflow). A stored payload passed the Workflow node's schema when it was put, but a
node can be put around the validator, so the views read defensively: a key of the wrong
type reads as absent (``None``, an empty mapping), never as a crash; the moderator turns an
absent edge into its error.

Workflow *files* are checked before they are stored (``uwf.moderator.validate``): those
checks read the file's raw mapping, since a file may be anything.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from uwf.util.base32 import NodeHash
from uwf.util.tuples import NamedTuple

__all__ = ["Edge", "Graph", "Role", "Workflow"]

_EMPTY: Mapping[str, Any] = {}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else _EMPTY


class Edge(NamedTuple):
    """The transition ``graph[source][status]``: the role it runs and the prompt it gives it
    (``target``: the edge as stored)."""

    source: str
    status: str
    target: Mapping[str, Any]

    @property
    def role(self) -> str | None:
        """The role the edge runs (``$END`` ends the thread); None when the edge names none."""
        role = self.target.get("role")
        return role if isinstance(role, str) else None

    @property
    def prompt(self) -> str:
        """The edge's prompt template, as written ("" when it has none)."""
        prompt = self.target.get("prompt")
        return "" if prompt is None else str(prompt)

    @property
    def location(self) -> str | None:
        """The directory the role's agent works in (a version-1 edge), as written."""
        location = self.target.get("location")
        return location if isinstance(location, str) else None

    @property
    def fan_out(self) -> dict[str, Any] | None:
        """The edge's ``fanOut``: the children started before its role runs
        (docs/format.md, "Fan-out and join")."""
        fan_out = self.target.get("fanOut")
        return fan_out if isinstance(fan_out, dict) else None


class Graph(NamedTuple):
    """A workflow's routing graph: for each role, its edges by status."""

    by_role: Mapping[str, Any]

    def edges(self, role: str) -> Mapping[str, Any] | None:
        """The edges out of ``role``, by status; None when the graph has none for it."""
        edges = self.by_role.get(role)
        return edges if isinstance(edges, dict) else None

    def edge(self, role: str, status: str) -> Edge | None:
        """The edge ``role`` takes on ``status``; None when there is none."""
        target = _mapping(self.edges(role)).get(status)
        return Edge(role, status, target) if isinstance(target, dict) else None


class Role(NamedTuple):
    """A role of a workflow (``spec``: its definition as stored)."""

    name: str
    spec: dict[str, Any]

    @property
    def meta(self) -> NodeHash | None:
        """The hash of the schema of the role's structured output."""
        meta = self.spec.get("meta")
        return NodeHash(meta) if isinstance(meta, str) else None

    @property
    def retry(self) -> Mapping[str, float] | None:
        """The role's retry policy, as written (docs/format.md, "Retries")."""
        retry = self.spec.get("retry")
        return retry if isinstance(retry, dict) else None


class Workflow(NamedTuple):
    """The Workflow node ``hash``, read through its ``payload``."""

    hash: NodeHash
    payload: dict[str, Any]  # as stored: read, never changed

    @property
    def name(self) -> str:
        name = self.payload.get("name")
        return name if isinstance(name, str) else ""

    @property
    def version(self) -> int:
        """1 for a workflow read from a version-1 file (uwf 0.8's format), else 0."""
        return 1 if self.payload.get("version") == 1 else 0

    @property
    def graph(self) -> Graph:
        return Graph(_mapping(self.payload.get("graph")))

    @property
    def roles(self) -> Mapping[str, Any]:
        """The role definitions by name, as stored (``role`` reads one)."""
        return _mapping(self.payload.get("roles"))

    def role(self, name: str) -> Role | None:
        """The role ``name``; None when the workflow defines no such role."""
        spec = self.roles.get(name)
        return Role(name, spec) if isinstance(spec, dict) else None

    @property
    def retry(self) -> Mapping[str, float] | None:
        """The retry policy at the workflow's top, as written."""
        retry = self.payload.get("retry")
        return retry if isinstance(retry, dict) else None

    @property
    def compact_after(self) -> int | None:
        """Every how many steps its agents write a summary (``compactAfter``), if set."""
        value = self.payload.get("compactAfter")
        return value if isinstance(value, int) and not isinstance(value, bool) else None
