"""What both formats of a workflow file check alike (``uwf.moderator.validate`` for uwf 0.5's,
``uwf.moderator.version1`` for version 1): the file's shape as the Workflow node's schema
gives it with the words of its messages (``file_schema``; a retry policy's are config.yaml's,
``uwf.config.schema.retry_policy``), the name its file name implies (``stem``,
``implied_by``, ``check_name``) and its roles (``check_roles``: plain identifiers, one JSON
Schema each under ``meta`` or ``frontmatter``).
"""

from __future__ import annotations

import functools
from typing import Any

from uwf.cas.fastschema import EXPECTED
from uwf.cas.schema import check_schema
from uwf.config.schema import retry_policy
from uwf.moderator.problems import Problems, key_text, loc
from uwf.protocol import workflow_schemas
from uwf.protocol.schemas import is_name, workflow_name_problem
from uwf.util.base32 import describe
from uwf.util.errors import InvalidInput
from uwf.util.jsonfmt import canonical

EXTENSIONS = (".yaml", ".yml")

NAME_RULE = "letters, digits, _ and -, starting with a letter or _, at most 64 characters"


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
            "retry": retry_policy(nullable=False),
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
            "retry": retry_policy(nullable=False),
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
