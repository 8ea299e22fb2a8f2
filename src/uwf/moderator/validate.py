"""Workflow definitions: every check, before anything is stored (docs/errors.md, "Workflow
files").

:func:`validate` reports every problem at once, each as ``<where>: <what>``, so a user fixes
a file in one round instead of one error at a time. Pure: no file and no store is read.

**The shape** of a file — its keys, their types, what is required, what is unknown — has one
source: the Workflow node's JSON Schema (``uwf.protocol.schemas``: ``WORKFLOW_RETRY``, the
Workflow with everything a file may add — ``compactAfter``, ``fanOut`` edges, ``retry``
policies at the top and on roles), read through :func:`file_schema`, which adds
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

import functools
from typing import Any

from uwf.cas.fastschema import EXPECTED
from uwf.cas.schema import check_schema, problems
from uwf.cas.wording import shown, where
from uwf.moderator import graphcheck
from uwf.moderator.problems import Problems, key_text, loc
from uwf.protocol import workflow_schemas
from uwf.protocol.schemas import is_name, workflow_name_problem
from uwf.util.base32 import describe
from uwf.util.errors import InvalidInput
from uwf.util.jsonfmt import canonical

EXTENSIONS = (".yaml", ".yml")
VERSIONS = "uwf-py reads version 1 files (uwf 0.8's format) and files without a version (uwf 0.5's)"

NAME_RULE = "letters, digits, _ and -, starting with a letter or _, at most 64 characters"
LEGACY = (
    "graph uses the legacy list/conditions form; use status-based routing: "
    "graph[<role>][<status>] = {role: <next role or $END>, prompt: <mustache template>}"
)


@functools.cache
def file_schema() -> dict[str, Any]:
    """The JSON Schema of a workflow file: the Workflow node's, as a file writes it."""
    node, target = workflow_schemas.WORKFLOW_RETRY, workflow_schemas.TARGET
    role = node["properties"]["roles"]["additionalProperties"]
    inline = {"type": "object", EXPECTED: "a JSON Schema mapping"}
    file_role = {
        **role,
        EXPECTED: "a mapping (a role definition)",
        # ``meta`` or ``frontmatter``: which one, and the message when neither, is _schema_of's
        "required": [key for key in role["required"] if key != "meta"],
        "properties": {
            **workflow_schemas.ROLE_DEFINITION["properties"],
            "meta": inline,
            "frontmatter": inline,
            "retry": retry_schema(),
        },
    }
    to = target["properties"]
    file_target = {
        **target,
        EXPECTED: "a mapping {role, prompt}",
        "properties": {
            "role": {**to["role"], EXPECTED: "a role name or $END"},
            "prompt": {**to["prompt"], "pattern": r"\S", EXPECTED: "a non-blank Mustache template"},
            "fanOut": {
                **workflow_schemas.FAN_OUT,
                EXPECTED: "a mapping {field, workflow, task?, max?}",
            },
        },
    }
    top = node["properties"]
    edges = {
        **top["graph"]["additionalProperties"],
        "type": ["object", "null"],  # `reviewer:` with nothing under it: "has no outgoing edge"
        EXPECTED: "a mapping of <status> -> {role, prompt}",
        "additionalProperties": file_target,
    }
    return {
        **node,
        "required": workflow_schemas.WORKFLOW["required"],  # compactAfter is optional
        "properties": {
            **top,
            "retry": retry_schema(),
            "roles": {
                **top["roles"],
                EXPECTED: "a mapping of role name -> role definition",
                "additionalProperties": file_role,
            },
            "graph": {
                **top["graph"],
                EXPECTED: "a mapping of <role or $START> -> <status> -> {role, prompt}",
                "additionalProperties": edges,
            },
        },
    }


def retry_schema() -> dict[str, Any]:
    """A retry policy as a file writes it (``workflow_schemas.RETRY``, with the words of its
    messages)."""
    spec = workflow_schemas.RETRY
    keys = spec["properties"]
    return {
        **spec,
        EXPECTED: "a mapping {attempts, backoff, maxBackoff}",
        "properties": {
            "attempts": {**keys["attempts"], EXPECTED: "a positive integer"},
            "backoff": {**keys["backoff"], EXPECTED: "a number of seconds (0 or more)"},
            "maxBackoff": {**keys["maxBackoff"], EXPECTED: "a number of seconds (0 or more)"},
        },
    }


def stem(basename: str) -> str:
    """A workflow file's name without ``.yaml``/``.yml``: the workflow name it implies."""
    for ext in EXTENSIONS:
        if basename.endswith(ext):
            return basename[: -len(ext)]
    return basename


#: What uwf 0.8's test files add to their stem (``linear.workflow.yaml`` holds ``linear``).
SUFFIX = ".workflow"


def implied_by(basename: str) -> str:
    """The workflow name a file name implies: its stem, less a ``.workflow`` suffix
    (docs/format.md, "Moving from uwf 0.8"); ``check_name`` also takes the whole stem."""
    name = stem(basename)
    return name[: -len(SUFFIX)] if name.endswith(SUFFIX) and len(name) > len(SUFFIX) else name


def _check_meta(p: Problems, role: str, key: str, meta: Any) -> dict[str, Any] | None:
    if not isinstance(meta, dict):
        return None  # not a mapping: the file schema said so
    try:
        meta = canonical(meta)
        check_schema(meta)
    except InvalidInput as exc:
        p.add(loc("roles", role, key), exc.message)
        return None
    result: dict[str, Any] = meta
    return result


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
    """One role definition, normalised (``frontmatter`` becomes ``meta``).

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
        return None  # the file schema said what a role is
    meta = _schema_of(p, role, spec)
    if meta is None:
        return None
    checked = {
        key: meta if key == "meta" else spec.get(key)
        for key in workflow_schemas.ROLE_DEFINITION["properties"]
    }
    if "retry" in spec:
        checked["retry"] = spec["retry"]
    return checked


def check_name(
    p: Problems,
    document: dict[Any, Any],
    basename: str,
    implied: str | None = None,
    hint: bool = False,
) -> str | None:
    """The file's ``name``, which its file name must imply (``implied_by``); ``hint``: the
    mismatch says how to name the file (a version-1 file, as uwf 0.8's tests name theirs)."""
    name = document.get("name")
    if not isinstance(name, str):
        return None  # missing or not a string: the file schema said so
    problem = workflow_name_problem(name)
    if problem is not None:
        p.add("name", f"{describe(name)} {problem}")
    implied = implied_by(basename) if implied is None else implied
    if name not in (implied, stem(basename)):
        fix = f" (name the file {name}.yaml or {name}{SUFFIX}.yaml)" if hint and not problem else ""
        p.add(
            "",
            f'workflow name mismatch: file "{basename}" implies name "{implied}" '
            f'but YAML declares name "{name}"{fix}',
        )
    return name


def check_roles(p: Problems, document: dict[Any, Any]) -> tuple[list[str], dict[str, Any]]:
    """The role names (for edges) and the roles that could be read."""
    roles: dict[str, dict[str, Any]] = {}
    names: list[str] = []
    raw = document.get("roles")
    if isinstance(raw, dict):
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
        p.add("version", f"{VERSIONS}, got {shown(version)}")
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
