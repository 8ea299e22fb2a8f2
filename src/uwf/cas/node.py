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


_TYPES_SEEN: set[str] = set()  # type hashes found well-formed: a store holds few types
_TYPES_KEPT = 1024


def _type_ok(value: object) -> bool:
    """Whether a record's type is a well-formed hash; those seen are remembered (a history
    checks 30,000 records of a handful of types)."""
    if value.__class__ is str and value in _TYPES_SEEN:  # a list or a dict: not hashable
        return True
    if not is_hash(value):
        return False
    if len(_TYPES_SEEN) >= _TYPES_KEPT:
        _TYPES_SEEN.clear()
    _TYPES_SEEN.add(value)
    return True


def decode_node(claimed: str, data: dict[str, Any] | Any, *, rehash: bool = True) -> Node:
    """Check a decoded node record and that it hashes to ``claimed``; raise CorruptNode.

    ``rehash=False`` skips the hash when the bytes are known to be ones that did hash to
    ``claimed`` (a packed record whose check matched: docs/format.md, "Packs").
    """
    if (
        not isinstance(data, dict)
        or len(data) != 3  # exactly these three keys: no set built per node read
        or "type" not in data
        or "payload" not in data
        or not _type_ok(data["type"])
        or type(data.get("timestamp")) is not int  # an integer, not a bool (nor missing)
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
