"""A stored node: its record (``Node``: type, payload, timestamp), what ``cas gc`` knows of
it (``NodeInfo``), and the check that a record read back is one and hashes to its name
(``decode_node``), the same for every backend (docs/format.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uwf.cas import codec
from uwf.util.base32 import NodeHash, is_hash
from uwf.util.errors import CorruptNode, InvalidInput
from uwf.util.tuples import NamedTuple

if TYPE_CHECKING:
    from uwf.util.outputs import NodeShown

__all__ = ["Node", "NodeInfo", "decode_node"]


class Node(NamedTuple):
    type: NodeHash
    payload: Any
    timestamp: int

    def as_json(self, *, timestamp: bool = True) -> NodeShown:
        """``{"type","payload","timestamp"}``: the record a node is stored as (``cas get``
        prints it, without ``timestamp`` unless asked)."""
        out: NodeShown = {"type": self.type, "payload": self.payload}
        if timestamp:
            out["timestamp"] = self.timestamp
        return out


class NodeInfo(NamedTuple):
    """What ``cas gc`` needs to judge a node it is about to collect."""

    type: NodeHash
    last_put: int  # unix ms of the latest put: the first write, or a later put that found it
    size: int  # bytes freed by deleting it


def decode_node(claimed: str, data: dict[str, Any] | Any, *, rehash: bool = True) -> Node:
    """Check a decoded node record and that it hashes to ``claimed``; raise CorruptNode.

    ``rehash=False`` skips the hash when the bytes are known to be ones that did hash to
    ``claimed`` (a packed record whose check matched: docs/format.md, "Packs").
    """
    if (
        not isinstance(data, dict)
        or set(data) != {"type", "payload", "timestamp"}
        or not is_hash(data["type"])
        or not isinstance(data["timestamp"], int)
        or isinstance(data["timestamp"], bool)
    ):
        raise CorruptNode(f"corrupt node {claimed}: not a {{type, payload, timestamp}} record")
    if not rehash:
        return Node(NodeHash(data["type"]), data["payload"], data["timestamp"])
    try:
        type_hash = None if data["type"] == claimed else data["type"]
        actual = codec.stored_hash(type_hash, data["payload"])
    except (InvalidInput, ValueError, TypeError, OverflowError):
        raise CorruptNode(f"corrupt node {claimed}: payload is not canonical JSON") from None
    if actual != claimed:
        raise CorruptNode(f"corrupt node {claimed}: content hashes to {actual}")
    return Node(
        actual if type_hash is None else NodeHash(type_hash), data["payload"], data["timestamp"]
    )
