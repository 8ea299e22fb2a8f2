"""Workflow definitions: every check, before anything is stored (docs/errors.md, "Workflow
files").

A workflow is a mapping with exactly ``name``, ``description``, ``roles`` and ``graph``, and
optionally ``compactAfter`` (a positive integer: steps between compaction summaries,
docs/format.md "Compaction").
:func:`validate` reports every problem at once, each as ``<where>: <what>``, so a user fixes
a file in one round instead of one error at a time. Pure: no file and no store is read.

What is checked, beyond the shape and the types of every field:

* Every role name is a plain identifier, so nothing from a workflow file can become a
  command-line flag or a path where a role reaches an agent's argv; ``name`` must equal the
  file stem and be a workflow name (``schemas.workflow_name_problem``: letters, digits, ``_``,
  ``-`` and ``.``, never a flag, a path, a hash or a file name).
* A role's ``meta`` (or its other name ``frontmatter``) is a JSON Schema mapping; unknown
  keys are refused at the top level, in roles and in targets (a typo is never silently
  dropped); the legacy list/``conditions`` graph form gets a message that explains the
  status-based form.
* The graph (``uwf.moderator.graphcheck``): ``$START`` routes on exactly the unit status
  ``_`` to a role; every target is a role or ``$END``; every graph key is a role or
  ``$START``; every role has an outgoing edge; every prompt is non-blank and parses as
  Mustache; a role's edges and the statuses its schema can emit agree
  (``uwf.moderator.emits``).

Warnings, not errors: roles that cannot be reached from ``$START``, prompt variables the
source role's output cannot have, a ``status`` without ``enum``, and a possible ``_`` status
with no edge.
"""

from __future__ import annotations

from typing import Any

from uwf.cas.schema import check_schema
from uwf.moderator import graphcheck
from uwf.moderator.problems import Problems, key_text, kind, loc, string
from uwf.protocol.schemas import is_name, workflow_name_problem
from uwf.util.base32 import describe
from uwf.util.errors import InvalidInput
from uwf.util.jsonfmt import canonical

ROLE_FIELDS = ("description", "goal", "capabilities", "procedure", "output", "meta")
TOP_FIELDS = ("name", "description", "roles", "graph", "compactAfter")
EXTENSIONS = (".yaml", ".yml")

NAME_RULE = "letters, digits, _ and -, starting with a letter or _, at most 64 characters"
LEGACY = (
    "graph uses the legacy list/conditions form; use status-based routing: "
    "graph[<role>][<status>] = {role: <next role or $END>, prompt: <mustache template>}"
)


def stem(basename: str) -> str:
    """A workflow file's name without ``.yaml``/``.yml``: the workflow name it implies."""
    for ext in EXTENSIONS:
        if basename.endswith(ext):
            return basename[: -len(ext)]
    return basename


def _check_meta(p: Problems, role: str, key: str, meta: Any) -> dict[str, Any] | None:
    where = loc("roles", role, key)
    if not isinstance(meta, dict):
        p.add(where, f"expected a JSON Schema mapping, got {kind(meta)}")
        return None
    try:
        meta = canonical(meta)
        check_schema(meta)
    except InvalidInput as exc:
        p.add(where, exc.message)
        return None
    result: dict[str, Any] = meta
    return result


def _check_capabilities(p: Problems, role: str, spec: dict[Any, Any]) -> list[Any] | None:
    caps = spec.get("capabilities")
    where = loc("roles", role, "capabilities")
    if "capabilities" not in spec:
        p.add(where, "missing (expected a list of strings)")
        return None
    if not isinstance(caps, list):
        p.add(where, f"expected a list of strings, got {kind(caps)}")
        return None
    for i, cap in enumerate(caps):
        if not isinstance(cap, str):
            p.add(f"{where}[{i}]", f"expected a string, got {kind(cap)}")
    return caps


def _schema_of(p: Problems, role: str, spec: dict[Any, Any]) -> dict[str, Any] | None:
    """The role's output schema, under ``meta`` or its other name ``frontmatter``."""
    if "meta" in spec and "frontmatter" in spec:
        p.add(
            loc("roles", role),
            'has both "meta" and "frontmatter" (one is another name for the other)',
        )
        return None
    key = "meta" if "meta" in spec or "frontmatter" not in spec else "frontmatter"
    if key not in spec:
        p.add(
            loc("roles", role, "meta"),
            'missing (expected a JSON Schema mapping; "frontmatter" is accepted as another name)',
        )
        return None
    return _check_meta(p, role, key, spec[key])


def _check_role(p: Problems, role: Any, spec: Any) -> dict[str, Any] | None:
    """Normalise one role definition (``frontmatter`` becomes ``meta``).

    Returns the role as far as it could be read (None without a usable schema), so that its
    edges are still checked against its statuses: every problem is reported in one round.
    The result is only used when no problem at all was found.
    """
    if not isinstance(role, str):
        p.add("roles", f"role name {key_text(role)} is not a string")
        return None
    if not is_name(role):
        p.add(loc("roles", role), f"role name is not a plain identifier ({NAME_RULE})")
    if not isinstance(spec, dict):
        p.add(loc("roles", role), f"expected a mapping (a role definition), got {kind(spec)}")
        return None
    for key in spec:
        if key not in ROLE_FIELDS and key != "frontmatter":
            p.add(
                loc("roles", role, key) if isinstance(key, str) else loc("roles", role),
                f"unknown key {key_text(key)} (a role has description, goal, capabilities, "
                "procedure, output and meta)",
            )
    out: dict[str, Any] = {}
    for key in ("description", "goal", "procedure", "output"):
        out[key] = string(p, spec.get(key), "roles", role, key, present=key in spec)
    out["capabilities"] = _check_capabilities(p, role, spec)
    meta = _schema_of(p, role, spec)
    if meta is None:
        return None
    out["meta"] = meta
    return {key: out.get(key) for key in ROLE_FIELDS}


def _check_name(p: Problems, document: dict[Any, Any], basename: str) -> str | None:
    name = string(p, document.get("name"), "name", present="name" in document)
    if name is None:
        return None
    problem = workflow_name_problem(name)
    if problem is not None:
        p.add("name", f"{describe(name)} {problem}")
    implied = stem(basename)
    if implied != name:
        p.add(
            "",
            f'workflow name mismatch: file "{basename}" implies name "{implied}" '
            f'but YAML declares name "{name}"',
        )
    return name


def _check_roles(p: Problems, document: dict[Any, Any]) -> tuple[list[str], dict[str, Any]]:
    """The role names (for edges) and the roles that could be read."""
    roles: dict[str, dict[str, Any]] = {}
    names: list[str] = []
    raw = document.get("roles")
    if "roles" not in document:
        p.add("roles", "missing (expected a mapping of role name -> role definition)")
    elif not isinstance(raw, dict):
        p.add("roles", f"expected a mapping of role name -> role definition, got {kind(raw)}")
    else:
        for role, spec in raw.items():
            if isinstance(role, str):
                names.append(role)
            checked = _check_role(p, role, spec)
            if checked is not None:
                roles[role] = checked
    return names, roles


def _is_legacy(raw: Any) -> bool:
    return isinstance(raw, list) or (
        isinstance(raw, dict) and any(isinstance(v, list) for v in raw.values())
    )


def _check_graph(
    p: Problems, document: dict[Any, Any], names: list[str], roles: dict[str, Any]
) -> dict[str, Any]:
    raw = document.get("graph")
    if "graph" not in document:
        p.add(
            "graph",
            "missing (expected a mapping: graph[<role or $START>][<status>] = {role, prompt})",
        )
        return {}
    if _is_legacy(raw):
        return {}
    if not isinstance(raw, dict):
        p.add("graph", f"expected a mapping of node -> status -> {{role, prompt}}, got {kind(raw)}")
        return {}
    graph = graphcheck.check_graph(p, raw, set(names))
    graphcheck.check_start(p, raw)
    graphcheck.check_statuses(p, names, roles, raw)
    return graph


def validate(document: dict[Any, Any], basename: str) -> tuple[dict[str, Any], Problems]:
    """The normalised definition of a workflow document, and every problem and warning.

    The definition is ``{name, description, roles, graph}`` — roles carry their schema
    inline under ``meta`` (``frontmatter`` renamed), targets are ``{role, prompt}`` — and is
    only complete when no problem was found. ``basename`` is the file's name (its stem must
    be the workflow's name).
    """
    p = Problems()
    for key in document:
        if key not in TOP_FIELDS and key != "conditions":
            p.add(
                loc(key) if isinstance(key, str) else "",
                f"unknown top-level key {key_text(key)} "
                "(a workflow has name, description, roles and graph)",
            )
    name = _check_name(p, document, basename)
    description = string(
        p, document.get("description"), "description", present="description" in document
    )
    names, roles = _check_roles(p, document)
    graph = _check_graph(p, document, names, roles)
    if "conditions" in document or _is_legacy(document.get("graph")):
        p.add("", LEGACY)
    if not p.lines:
        for role in graphcheck.unreachable(graph, roles):
            p.warn(loc("roles", role), "not reachable from $START")
        graphcheck.check_variables(p, graph, roles)
    definition = {"name": name, "description": description, "roles": roles, "graph": graph}
    _check_compact_after(p, document, definition)
    return definition, p


def _check_compact_after(p: Problems, document: dict[Any, Any], out: dict[str, Any]) -> None:
    """The optional ``compactAfter``: a positive integer, copied into the definition."""
    if "compactAfter" not in document:
        return
    every = document["compactAfter"]
    if isinstance(every, bool) or not isinstance(every, int):
        p.add("compactAfter", f"expected a positive integer (steps), got {kind(every)}")
    elif every < 1:
        p.add("compactAfter", f"expected a positive integer (steps), got {every}")
    out["compactAfter"] = every
