"""Workflow definitions: every check, before anything is stored (docs/errors.md, "Workflow
files").

:func:`validate` reports every problem at once, each as ``<where>: <what>``, so a user fixes
a file in one round instead of one error at a time. Pure: no file and no store is read.

**The shape** of a file — its keys, their types, what is required, what is unknown — has one
source: the Workflow node's JSON Schema (``uwf.protocol.schemas``: ``WORKFLOW_RETRY``, the
Workflow with everything a file may add — ``compactAfter``, ``fanOut`` edges, ``retry``
policies at the top and on roles), read through ``filecheck.file_schema``, which adds
only what a file writes differently from a node: a role's schema inline under ``meta`` (or
its other name ``frontmatter``) where the node has a hash, an empty node of the graph
(``reviewer:``) left to the "no outgoing edge" check, a prompt that is not blank, and the
words of its messages (``x-expected``). ``uwf.cas.schema.problems`` words every problem of
that shape, as it words every schema's (``uwf.cas.wording``).

**What a schema cannot say** is checked here, after the shape:

* Every role name is a plain identifier, so nothing from a workflow file can become a
  command-line flag or a path where a role reaches an agent's argv; ``name`` must equal the
  file stem and be a workflow name (``schemas.workflow_name_problem``: letters, digits, ``_``,
  ``-`` and ``.``, never a flag, a path, a hash or a file name).
* A role's ``meta`` (or ``frontmatter``, not both) is a valid JSON Schema of JSON values;
  the legacy list/``conditions`` graph form gets a message that explains the status-based
  form.
* The graph (``uwf.moderator.graphcheck``): ``$START`` routes on exactly the unit status
  ``_`` to a role; every target is a role or ``$END``; every graph key is a role or
  ``$START``; every role has an outgoing edge; every prompt parses as Mustache; a role's
  edges and the statuses its schema can emit agree (``uwf.moderator.emits``).

Warnings, not errors: roles that cannot be reached from ``$START``, prompt variables the
source role's output cannot have, a ``status`` without ``enum``, and a possible ``_`` status
with no edge.

A file with ``version: 1`` (uwf 0.8's format) is checked by ``uwf.moderator.version1``, the
same way with that format's shape and rules; any other ``version`` is refused.
"""

from __future__ import annotations

from typing import Any

from uwf.cas.schema import problems
from uwf.cas.wording import literal, where
from uwf.moderator import graphcheck
from uwf.moderator.filecheck import check_name, check_roles, file_schema, implied_by
from uwf.moderator.problems import Problems, loc

VERSIONS = "uwf-py reads version 1 files (uwf 0.8's format) and files without a version (uwf 0.5's)"

LEGACY = (
    "graph uses the legacy list/conditions form; use status-based routing: "
    "graph[<role>][<status>] = {role: <next role or $END>, prompt: <mustache template>}"
)


def _is_legacy(raw: Any) -> bool:
    return isinstance(raw, list) or (
        isinstance(raw, dict) and any(isinstance(v, list) for v in raw.values())
    )


def _check_graph(p: Problems, raw: Any, names: list[str], roles: dict[str, Any]) -> dict[str, Any]:
    if not isinstance(raw, dict):
        return {}  # missing, not a mapping (the file schema said so) or the legacy form
    graph = graphcheck.check_graph(p, raw, set(names))
    graphcheck.check_start(p, raw)
    graphcheck.check_statuses(p, names, roles, raw)
    return graph


def validate(
    document: dict[Any, Any], basename: str, implied: str | None = None
) -> tuple[dict[str, Any], Problems]:
    """The normalised definition of a workflow document, and every problem and warning.

    The definition is ``{name, description, roles, graph}`` (and ``compactAfter`` when the
    file has it) — roles carry their schema inline under ``meta`` (``frontmatter`` renamed),
    targets are ``{role, prompt}`` — and is only complete when no problem was found.
    ``basename`` is the file's name and ``implied`` the workflow name its path implies (its
    stem, or a folder workflow's folder): the file's ``name`` must be that. A version-1 file's
    definition also has ``version`` (``uwf.moderator.version1``).
    """
    version = document.get("version")
    if version == 1 and not isinstance(version, bool):
        from uwf.moderator import version1

        return version1.validate_v1(document, basename, implied or implied_by(basename))
    p = Problems()
    if "version" in document:  # checked as a uwf 0.5 file, but for this one problem
        document = {k: v for k, v in document.items() if k != "version"}
        p.add("version", f"{VERSIONS}, got {literal(version)}")
    legacy = "conditions" in document or _is_legacy(document.get("graph"))
    shaped = dict(document)
    if legacy:  # one message explains the status-based form instead of its every detail
        shaped.pop("conditions", None)
        shaped["graph"] = {}
    for path, what in problems(file_schema(), shaped, "uwf:workflow-file"):
        p.add(where(shaped, path), what)
    name = check_name(p, document, basename, implied)
    names, roles = check_roles(p, document)
    graph = _check_graph(p, None if legacy else document.get("graph"), names, roles)
    if legacy:
        p.add("", LEGACY)
    if not p.lines:
        for role in graphcheck.unreachable(graph, roles):
            p.warn(loc("roles", role), "not reachable from $START")
        graphcheck.check_variables(p, graph, roles)
    definition = {
        "name": name,
        "description": document.get("description"),
        "roles": roles,
        "graph": graph,
    }
    for key in ("compactAfter", "retry"):
        if key in document:
            definition[key] = document[key]
    return definition, p
