"""The node hash: ``crockford13(xxh64(ascii(type) ++ dcbor(payload)))`` (docs/format.md,
"Nodes").

``dcbor`` is RFC 8949 deterministic CBOR (cbor2's canonical mode: map keys sorted by their
encoded bytes, shortest heads, shortest exact float) applied to the canonical payload, in
which integral floats within ±2^53 are integers. The meta-schema is self-typed: its hash
leaves out the type prefix.
"""

from __future__ import annotations

from typing import Any

import xxhash

from uwf.util.base32 import NodeHash, encode64
from uwf.util.jsonfmt import canonical


def _cbor(value: Any) -> bytes:
    """cbor2's canonical encoding, imported on the first hash: a process that only reads
    packed nodes (checked by their pack's checksum, not re-hashed) never needs it."""
    from cbor2 import dumps

    return dumps(value, canonical=True)


def dcbor(payload: Any) -> bytes:
    """Deterministic CBOR of a JSON value (canonicalised first)."""
    return _cbor(canonical(payload))


def hash_bytes(data: bytes) -> NodeHash:
    return NodeHash(encode64(xxhash.xxh64_intdigest(data)))


def node_hash(type_hash: str, payload: Any) -> NodeHash:
    """The hash of a node typed by ``type_hash``."""
    return hash_bytes(type_hash.encode("ascii") + dcbor(payload))


def hashed(type_hash: str, payload: Any) -> tuple[NodeHash, int]:
    """The hash of a node typed by ``type_hash`` whose payload is canonical already (a put's,
    after ``canonical``), and the length of its encoding."""
    data = _cbor(payload)
    return hash_bytes(type_hash.encode("ascii") + data), len(data)


def stored_hash(type_hash: str | None, payload: Any) -> NodeHash:
    """The hash of a payload read back from the store, which holds it in canonical form
    already: no second canonicalisation (a non-canonical file then fails its hash check).
    ``type_hash`` None means self-typed."""
    prefix = b"" if type_hash is None else type_hash.encode("ascii")
    return hash_bytes(prefix + _cbor(payload))


def self_typed_hash(payload: Any) -> NodeHash:
    """The hash of a self-typed node (the meta-schema)."""
    return hash_bytes(dcbor(payload))
