"""The turns of a step: what its detail node records of the agent's conversation.

``TURN_SCHEMA`` and ``detail_schema`` are the shapes uwf's agents (and the steps uwf writes
for people: docs/format.md, "Steps written by hand") give their details, so that
``thread read`` and the agents' history prompts can show a step's content.
"""

from __future__ import annotations

from typing import Any

from uwf.cas.store import Store
from uwf.protocol.parts import ARTIFACTS

#: The correction prompt the agent kit sends when an answer has no usable frontmatter; a
#: detail records it as a user turn (``uwf-cmd``, ``uwf-builtin``), so its first line marks
#: a correction (``is_correction``).
CORRECTION_MESSAGE = (
    "Your previous answer did not contain valid YAML frontmatter matching the role schema.\n"
    "Your response must start with a YAML frontmatter block delimited by `---` lines.\n"
    "Output only the corrected frontmatter, followed by your work."
)


def is_correction(turn: dict[str, Any]) -> bool:
    """True for a user turn that is the agent kit's correction prompt."""
    content = turn.get("content")
    first = CORRECTION_MESSAGE.split("\n", 1)[0]
    return turn.get("role") == "user" and isinstance(content, str) and content.startswith(first)


TURN_SCHEMA: dict[str, Any] = {
    "title": "AgentTurn",
    "type": "object",
    "additionalProperties": False,
    "required": ["index", "role", "content"],
    "properties": {
        "index": {"type": "integer", "minimum": 0},
        "role": {"type": "string"},
        "content": {"type": "string"},
        "toolCalls": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name", "args"],
                        "properties": {"name": {"type": "string"}, "args": {"type": "string"}},
                    },
                },
            ]
        },
        "reasoning": {"anyOf": [{"type": "null"}, {"type": "string"}]},
    },
}


def detail_schema(
    title: str, properties: dict[str, Any], optional: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A detail-node schema: the agent's own fields (``optional`` ones may be left out) plus
    ``turns`` (refs to AgentTurn nodes) and the optional ``artifacts`` the agent kit fills in
    (docs/format.md, "Artifacts")."""
    return {
        "title": title,
        "type": "object",
        "additionalProperties": False,
        "required": [*properties, "turns"],
        "properties": {
            **properties,
            **(optional or {}),
            "turns": {"type": "array", "items": {"type": "string", "format": "cas_ref"}},
            "artifacts": ARTIFACTS,
        },
    }


def store_turns(store: Store, turns: list[dict[str, Any]]) -> list[str]:
    """Store each turn as an AgentTurn node; return their hashes in order."""
    turn_type = store.put_schema(TURN_SCHEMA)
    return [store.put(turn_type, {"index": i, **t}) for i, t in enumerate(turns)]


def turns(store: Store, detail_hash: Any) -> list[dict[str, Any]]:
    """The turn payloads of a detail node, in order (missing turn nodes skipped)."""
    if not isinstance(detail_hash, str) or not detail_hash:
        return []
    node = store.get(detail_hash)
    if node is None or not isinstance(node.payload, dict):
        return []
    turn_refs = node.payload.get("turns")
    if not isinstance(turn_refs, list):
        return []
    out = []
    for ref in turn_refs:
        if isinstance(ref, str):
            turn = store.get(ref)
            if turn is not None and isinstance(turn.payload, dict):
                out.append(turn.payload)
    return out


def last_assistant_content(store: Store, detail_hash: Any) -> str | None:
    """The newest non-blank assistant turn text of a step's detail, or None."""
    for turn in reversed(turns(store, detail_hash)):
        content = turn.get("content")
        if turn.get("role") == "assistant" and isinstance(content, str) and content.strip():
            return content
    return None
