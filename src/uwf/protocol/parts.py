"""The pieces uwf's node schemas share: a CAS reference, a type extended by one field
(docs/format.md, "Extended types"), the ``artifacts`` list a step's detail and a version-1
Workflow's ``source`` both hold, and the retry policy a Workflow and config.yaml both hold."""

from __future__ import annotations

from typing import Any

CAS_REF: dict[str, Any] = {"type": "string", "format": "cas_ref"}


def extended(base: dict[str, Any], title: str, field: str, spec: Any) -> dict[str, Any]:
    """``base`` with one more property, required: nodes with it get a type of their own."""
    return {
        **base,
        "title": title,
        "required": [*base["required"], field],
        "properties": {**base["properties"], field: spec},
    }


#: What the agent kit records of the files an agent left in ``$UWF_ARTIFACTS_DIR``: the
#: ``artifacts`` field of a step's detail (docs/format.md, "Artifacts").
ARTIFACTS: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "additionalProperties": False,
        "required": ["path", "hash", "size"],
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "hash": CAS_REF,  # a Text node (UTF-8 text) or a Blob node (anything else)
            "size": {"type": "integer", "minimum": 0},
        },
    },
}

#: A retry policy (docs/format.md, "Retries"), at the top or on a role of a Workflow, and as
#: config.yaml writes one (``uwf.config.schema.retry_policy``): its keys, none required.
RETRY: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "attempts": {"type": "integer", "minimum": 1},
        "backoff": {"type": "number", "minimum": 0},
        "maxBackoff": {"type": "number", "minimum": 0},
    },
}
