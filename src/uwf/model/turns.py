"""The turns of a step: what its detail node records of the agent's conversation."""

from __future__ import annotations

from typing import Any

from uwf.cas.store import Store


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
