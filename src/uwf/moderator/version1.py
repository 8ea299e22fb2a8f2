"""Version-1 workflow files — the format of uwf 0.8 — checked before anything is stored
(docs/format.md, "Version-1 workflow files"; docs/errors.md, "Workflow files").

A file with ``version: 1`` differs from a uwf 0.5 file in what it may leave out and in how it
routes; everything else is checked by the same code (``uwf.moderator.validate``,
``uwf.moderator.graphcheck``) with the version-1 ``Rules``:

* ``name`` may be left out: it is then the name the file's path implies (its stem, or a
  folder workflow's folder); ``description`` and each role's ``description``, ``goal``,
  ``capabilities``, ``procedure`` and ``output`` may be left out (empty). A role's output
  schema is its ``frontmatter`` (``meta`` is accepted too), often ``oneOf`` branches each
  keyed by a ``$status`` const.
* Routing reads ``$status``; ``$START`` routes on ``new`` (a new thread, required) and
  ``resume`` (a thread resuming an ended one); prompts are Liquid templates and may be left
  out; an edge may name its agent's working directory, ``location`` (a literal path).

**The shape** has one source, as for uwf 0.5 files: the Workflow (version 1) node's schema
(``workflow_schemas.WORKFLOW_V1_RETRY``: Workflow (version 1) with its optional ``retry`` policies),
read through :func:`file_schema`, which relaxes what a file may
leave out and drops ``source`` (what uwf records of the files, never written in one). A key
uwf-py does not know — a construct of uwf 0.8 it does not support — is an ``unknown key``
problem that names its place and the keys it could have been (a top-level ``x-…`` key is an
extension field, read past: uwf 0.8's ``debate.yaml`` keeps a YAML anchor in one); an edge's
``fanOut`` (uwf-py's fan-out, written in uwf 0.5's format only) is refused with a line saying
so (``NO_FAN_OUT``).
"""

from __future__ import annotations

import functools
from typing import Any

from uwf.cas.fastschema import EXPECTED
from uwf.cas.schema import problems
from uwf.cas.wording import where
from uwf.moderator import emits, filecheck, graphcheck
from uwf.moderator.evaluate import BODY, V1
from uwf.moderator.problems import Problems, loc, seg
from uwf.protocol import workflow_schemas
from uwf.protocol.schemas import workflow_name_problem
from uwf.util.base32 import describe

VERSION = 1
#: What a version-1 role may leave out, and what it is then.
ROLE_DEFAULTS: dict[str, Any] = {
    "description": "",
    "goal": "",
    "capabilities": [],
    "procedure": "",
    "output": "",
}


@functools.cache
def file_schema() -> dict[str, Any]:
    """The JSON Schema of a version-1 file: the Workflow (version 1) node's, as a file
    writes it (the uwf 0.5 file's role, with every field but the schema optional)."""
    node, target = workflow_schemas.WORKFLOW_V1_RETRY, workflow_schemas.TARGET_V1
    base = filecheck.file_schema()["properties"]
    role = {**base["roles"]["additionalProperties"], "required": []}
    to = target["properties"]
    file_target = {
        **target,
        EXPECTED: "a mapping {role, prompt, location}",
        "required": ["role"],
        "properties": {
            "role": {**to["role"], EXPECTED: "a role name or $END"},
            "prompt": {**to["prompt"], EXPECTED: "a Liquid template"},
            "location": {**to["location"], EXPECTED: "a directory path"},
        },
    }
    edges = {
        **base["graph"]["additionalProperties"],
        EXPECTED: "a mapping of <status> -> {role, prompt, location}",
        "additionalProperties": file_target,
    }
    top = {key: spec for key, spec in node["properties"].items() if key != "source"}
    return {
        **node,
        "required": ["version", "roles", "graph"],
        "properties": {
            **top,
            "version": {**top["version"], EXPECTED: "1"},
            "name": base["name"],
            "description": base["description"],
            "roles": {**base["roles"], "additionalProperties": role},
            "graph": {
                **base["graph"],
                EXPECTED: "a mapping of <role or $START> -> <status> -> {role, prompt, location}",
                "additionalProperties": edges,
            },
            "compactAfter": base["compactAfter"],
            "retry": base["retry"],
        },
    }


#: A version-1 edge with ``fanOut`` (docs/format.md, "Fan-out and join"): fan-out is uwf-py's
#: own, written in uwf 0.5's format only, whose Mustache prompts render the joined children.
NO_FAN_OUT = (
    "fan-out is not supported in a version-1 file (uwf 0.8's format has no fanOut); "
    "write this workflow without `version: 1`, in uwf 0.5's format, to fan out"
)


def is_extension(key: Any) -> bool:
    """Whether a top-level key is an extension field (``x-…``), a place for YAML anchors and
    notes that uwf reads past, as Compose files do: kept in the stored source, not in the
    definition (docs/format.md, "Version-1 workflow files")."""
    return isinstance(key, str) and key.startswith("x-")


def _is_fan_out(path: list[Any]) -> bool:
    """Whether a schema problem's path is a ``fanOut`` key of an edge."""
    return len(path) == 4 and path[0] == "graph" and path[3] == "fanOut"


def _name(p: Problems, document: dict[Any, Any], basename: str, implied: str) -> str | None:
    """The workflow's name: ``name`` (which must be the implied one), else the implied one."""
    if "name" in document:
        return filecheck.check_name(p, document, basename, implied, hint=True)
    problem = workflow_name_problem(implied)
    if problem is not None:
        p.add("name", f"missing, and the name the file implies, {describe(implied)}, {problem}")
        return None
    return implied


def _roles(p: Problems, document: dict[Any, Any]) -> tuple[list[str], dict[str, Any]]:
    """The role names and the roles that could be read, what they left out filled in."""
    names, roles = filecheck.check_roles(p, document)
    raw = document.get("roles")
    for role, spec in roles.items():
        for key, default in ROLE_DEFAULTS.items():
            if spec.get(key) is None:
                spec[key] = list(default) if isinstance(default, list) else default
        written = raw.get(role) if isinstance(raw, dict) else None
        if isinstance(written, dict) and "frontmatter" in written:
            spec["schemaKey"] = "frontmatter"  # the key problems name; never stored
    return names, roles


def _shapes_at(schema: Any, where: str, depth: int = 0) -> list[tuple[str, dict[str, Any]]]:
    """The object shapes of a role's schema with their places, by the rule of
    ``emits.shapes`` (its ``properties``, else the members of its ``anyOf``, else of its
    ``oneOf``)."""
    if not isinstance(schema, dict) or depth > emits.MAX_DEPTH:
        return []
    if isinstance(schema.get("properties"), dict):
        return [(where, schema)]
    for key in ("anyOf", "oneOf"):
        members = schema.get(key)
        if isinstance(members, list):
            found = [
                shape
                for i, member in enumerate(members)
                for shape in _shapes_at(member, f"{where}.{key}[{i}]", depth + 1)
            ]
            if found:
                return found
    return []


def check_schemas(p: Problems, roles: dict[str, Any]) -> None:
    """What uwf 0.8 refused in a role's schema, and so does a version-1 file (docs/format.md,
    "Moving from uwf 0.8"): a field named ``_body``, which prompts read as the output's text;
    a ``$status`` not fixed with ``const`` (routing tells the shapes apart by it); and, among
    shapes of which one fixes ``$status``, a shape without it."""
    key = V1.key
    for role, spec in roles.items():
        shapes = _shapes_at(spec["meta"], loc("roles", role, spec.get("schemaKey", "meta")))
        with_status = [place for place, shape in shapes if key in shape["properties"]]
        for place, shape in shapes:
            props = shape["properties"]
            if BODY in props:
                p.add(
                    f"{place}.properties{seg(BODY)}",
                    f"{BODY} is reserved: a prompt reads it as the output's text (the markdown "
                    "after its frontmatter); give the field another name",
                )
            if key in props:
                status = props[key]
                if not (isinstance(status, dict) and isinstance(status.get("const"), str)):
                    p.add(f"{place}.properties{seg(key)}", CONST_STATUS)
            elif with_status:
                p.add(place, f"{key} is missing: {CONST_STATUS}")


#: What a version-1 role's ``$status`` must be: one ``const`` per shape, as uwf 0.8 had it.
CONST_STATUS = (
    "a version-1 file fixes $status with const, one status per shape (uwf 0.8's rule; not "
    "enum): write oneOf branches, each with $status: {const: <status>} and its own fields"
)


def validate_v1(
    document: dict[Any, Any], basename: str, implied: str
) -> tuple[dict[str, Any], Problems]:
    """The normalised definition of a version-1 document, and every problem and warning.

    The definition is ``validate.validate``'s plus ``version: 1``; its edges keep
    ``location``."""
    p = Problems()
    document = {key: value for key, value in document.items() if not is_extension(key)}
    for path, what in problems(file_schema(), document, "uwf:workflow-file-v1"):
        p.add(where(document, path), NO_FAN_OUT if _is_fan_out(path) else what)
    name = _name(p, document, basename, implied)
    names, roles = _roles(p, document)
    check_schemas(p, roles)
    graph: dict[str, Any] = {}
    raw = document.get("graph")
    if isinstance(raw, dict):
        graph = graphcheck.check_graph(p, raw, set(names), V1)
        graphcheck.check_start(p, raw, V1)
        graphcheck.check_statuses(p, names, roles, raw, V1)
    if not p.lines:
        for role in graphcheck.unreachable(graph, roles):
            p.warn(loc("roles", role), "not reachable from $START")
        graphcheck.check_variables(p, graph, roles, V1)
    definition: dict[str, Any] = {
        "version": VERSION,
        "name": name,
        "description": document.get("description") or "",
        "roles": roles,
        "graph": graph,
    }
    for key in ("compactAfter", "retry"):
        if key in document:
            definition[key] = document[key]
    return definition, p
