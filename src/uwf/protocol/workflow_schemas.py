"""The Workflow node's schemas (docs/format.md, "Workflow"): a role, an edge, the Workflow of
uwf 0.5's files and its extended types (``compactAfter``, ``fanOut`` edges, a retry policy),
and the Workflow read from a version-1 file. Their hashes are ``uwf.protocol.schemas``'s,
with every other node type's."""

from __future__ import annotations

from typing import Any

from uwf.protocol.parts import ARTIFACTS, CAS_REF, RETRY, extended

ROLE_DEFINITION: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["description", "goal", "capabilities", "procedure", "output", "meta"],
    "properties": {
        "description": {"type": "string"},
        "goal": {"type": "string"},
        "capabilities": {"type": "array", "items": {"type": "string"}},
        "procedure": {"type": "string"},
        "output": {"type": "string"},
        "meta": CAS_REF,
    },
}

TARGET: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["role", "prompt"],
    "properties": {"role": {"type": "string"}, "prompt": {"type": "string"}},
}

WORKFLOW: dict[str, Any] = {
    "title": "Workflow",
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "description", "roles", "graph"],
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "roles": {"type": "object", "additionalProperties": ROLE_DEFINITION},
        "graph": {
            "type": "object",
            "additionalProperties": {"type": "object", "additionalProperties": TARGET},
        },
    },
}

#: A Workflow whose agents write a summary every ``compactAfter`` steps.
WORKFLOW_COMPACT = extended(
    WORKFLOW, "Workflow (compactAfter)", "compactAfter", {"type": "integer", "minimum": 1}
)

#: A workflow edge of a version-1 file may name the directory its agent works in
#: (``location``: a literal path, relative to the thread's working directory).
TARGET_V1: dict[str, Any] = {
    **TARGET,
    "properties": {**TARGET["properties"], "location": {"type": "string", "minLength": 1}},
}

FAN_OUT_MAX = 1000  # the most children one edge may start (``max``)

#: An edge's ``fanOut``: child threads started for each item of an output field.
FAN_OUT: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["field"],
    "properties": {
        "field": {"type": "string", "minLength": 1},
        "workflow": {"type": "string"},
        "task": {"type": "string"},
        "max": {"type": "integer", "minimum": 1, "maximum": FAN_OUT_MAX},
    },
}

#: A Workflow with at least one ``fanOut`` edge; ``compactAfter`` allowed.
WORKFLOW_FAN_OUT: dict[str, Any] = {
    **WORKFLOW,
    "title": "Workflow (fanOut)",
    "properties": {
        **WORKFLOW["properties"],
        "compactAfter": {"type": "integer", "minimum": 1},
        "graph": {
            "type": "object",
            "additionalProperties": {
                "type": "object",
                "additionalProperties": {
                    **TARGET,
                    "properties": {**TARGET["properties"], "fanOut": FAN_OUT},
                },
            },
        },
    },
}


def _with_retry(base: dict[str, Any], title: str) -> dict[str, Any]:
    """``base`` with an optional ``retry`` at its top and on each role."""
    roles = base["properties"]["roles"]
    role = roles["additionalProperties"]
    return {
        **base,
        "title": title,
        "properties": {
            **base["properties"],
            "retry": RETRY,
            "roles": {
                **roles,
                "additionalProperties": {
                    **role,
                    "properties": {**role["properties"], "retry": RETRY},
                },
            },
        },
    }


#: A uwf 0.5 Workflow with a retry policy at its top or on a role; ``compactAfter`` and
#: ``fanOut`` edges allowed.
WORKFLOW_RETRY = _with_retry(WORKFLOW_FAN_OUT, "Workflow (retry)")

#: A Workflow read from a version-1 file (uwf 0.8's format, docs/format.md "Version-1
#: workflow files"): routing reads ``$status``, edge prompts are Liquid, ``$START`` has the
#: edges ``new`` and ``resume``, an edge may carry ``location``; ``source`` lists the files it
#: was read from (Text nodes, as artifacts are listed) for ``workflow show --source``.
WORKFLOW_V1: dict[str, Any] = {
    **WORKFLOW,
    "title": "Workflow (version 1)",
    "required": ["version", *WORKFLOW["required"]],
    "properties": {
        "version": {"const": 1},
        **WORKFLOW["properties"],
        "graph": {
            "type": "object",
            "additionalProperties": {"type": "object", "additionalProperties": TARGET_V1},
        },
        "compactAfter": WORKFLOW_COMPACT["properties"]["compactAfter"],
        "source": ARTIFACTS,
    },
}

#: A Workflow (version 1) with a retry policy at its top or on a role.
WORKFLOW_V1_RETRY = _with_retry(WORKFLOW_V1, "Workflow (version 1, retry)")
