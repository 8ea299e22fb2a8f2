"""The domain behind `uwf cas …`: direct access to the content-addressed store (docs/format.md,
"Nodes").

Every function takes the backend and returns plain data for the CLI to print. Opening a
backend has no side effects; a command reads only the nodes it is about, and only the writing
commands (``put``, ``put-text``, ``reindex``) create anything. Every hash that comes from the
user is checked against the alphabet and the length before it can become part of a path;
``has`` is the exception, it answers ``false`` for anything that is not a stored node.
"""

from __future__ import annotations

import errno
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uwf.backend.base import Backend
from uwf.cas import ops
from uwf.cas import refs as cas_refs
from uwf.cas.schema import check_schema, meta_hash
from uwf.protocol import schemas
from uwf.util.base32 import check_hash, describe, is_hash
from uwf.util.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from uwf.util.outputs import (
        Hashed,
        NodeShown,
        Packed,
        Refs,
        Reindexed,
        SchemaListed,
        Verified,
        Walked,
    )

META_TITLE = "(meta-schema)"
UNNAMED = "(unnamed)"


def get(backend: Backend, h: str, timestamp: bool = False) -> NodeShown:
    """The node at ``h`` as ``{"type","payload"}`` (plus ``"timestamp"`` when asked)."""
    check_hash(h)
    node = backend.nodes.get(h)
    if node is None:
        raise NotFound(f"Node not found: {h}")
    return node.as_json(timestamp=timestamp)


def parse_data(data: str) -> Any:
    """``data`` as inline JSON, else as the path of a JSON file (docs/agents.md, "Writing
    nodes with `uwf cas`").

    NaN and Infinity are refused here: they are not JSON and could never be hashed.
    """

    def _no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not a valid JSON value")

    shown = describe(data, 200)
    try:
        return json.loads(data, parse_constant=_no_constants)
    except ValueError as exc:
        inline_error = str(exc)
    try:
        raw = Path(data).read_bytes()
    except (FileNotFoundError, NotADirectoryError, ValueError):  # ValueError: a NUL byte
        raise InvalidInput(
            f"Cannot parse JSON from {shown}: {inline_error} (and no such file)"
        ) from None
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:  # inline text too long to be a file name
            raise InvalidInput(
                f"Cannot parse JSON from {shown}: {inline_error} (and no such file)"
            ) from None
        raise InvalidInput(f"Cannot parse JSON from {shown}: {exc.strerror or exc}") from None
    try:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
        return json.loads(raw.decode("utf-8"), parse_constant=_no_constants)
    except ValueError as exc:
        raise InvalidInput(f"Cannot parse JSON from {shown}: {exc}") from None


def put(backend: Backend, type_hash: str, data: str) -> Hashed:
    """Validate ``data`` against the schema at ``type_hash`` and store it; ``{"hash"}``.

    Unlike v0.5.0 (which stored anything under any type), the type must be a stored
    schema and the payload must satisfy it, so a bad node is never written. A schema (data
    typed by the meta-schema) may be put into an empty store: the meta-schema is written
    first, but only once the schema itself is known to be valid.
    """
    check_hash(type_hash, "type hash")
    payload = parse_data(data)
    store = backend.nodes
    if type_hash == meta_hash():
        check_schema(payload)
        store.ensure_meta()
    return {"hash": store.put(type_hash, payload)}


def put_text(backend: Backend, text: str) -> Hashed:
    """Store a string under the Text schema (registering the uwf schemas first)."""
    store = backend.nodes
    text_type = schemas.ensure(store).text
    return {"hash": store.put(text_type, text)}


def has(backend: Backend, h: str) -> bool:
    """Whether a node is stored at ``h``; anything that is not a hash is simply absent."""
    if not is_hash(h):
        return False
    return backend.nodes.has(h)


def refs(backend: Backend, h: str) -> Refs:
    """The direct refs of the node at ``h``, as its schema marks them (``format: cas_ref``)."""
    check_hash(h)
    store = backend.nodes
    if not store.has(h):
        raise NotFound(f"Node not found: {h}")
    return {"refs": cas_refs.refs(store, h)}


def walk(backend: Backend, h: str) -> Walked:
    """Breadth-first traversal from ``h`` over refs, root first; a missing root gives ``[]``."""
    return {"hashes": cas_refs.walk(backend.nodes, check_hash(h))}


def reindex(backend: Backend) -> Reindexed:
    """Rebuild the type index from the nodes themselves (the only fix for a lost or stale index)."""
    counts = ops.reindex(backend.nodes)
    out: Reindexed = {
        "status": "reindexed",
        "nodes": counts["nodes"],
        "types": counts["types"],
    }
    if counts.get("repaired"):
        out["repaired"] = counts["repaired"]  # pack indexes rebuilt from their records
    return out


def pack(backend: Backend) -> Packed:
    """Move loose nodes into a pack (docs/format.md, "Packs"), under the gc lock:
    ``{"packed","loose","packs","bytes"}``. An empty store is left as it is (nothing created)."""
    store = backend.nodes
    if next(iter(store.iter_hashes()), None) is None:
        return {"packed": 0, "loose": 0, "packs": 0, "bytes": 0}
    with backend.locks.gc():
        return store.pack()


def verify(backend: Backend) -> Verified:
    """Re-hash every node and check its type and refs, then the roots — the state files are
    whole, and every active head, archived head and registry entry resolves to a node of its
    kind: ``{"scanned","ok","damaged"}`` (docs/reliability.md, "Repairing damaged state")."""
    from uwf.engine.store import roots

    result = ops.verify(backend.nodes)
    damaged, state = roots.state_problems(backend)
    damaged += roots.problems(backend.nodes, state["active"], state["history"], state["registry"])
    result["damaged"] = [*result["damaged"], *damaged]
    result["ok"] = not result["damaged"]
    return result


def _title(payload: Any) -> str:
    if isinstance(payload, dict):
        for key in ("title", "description"):
            value = payload.get(key)
            if isinstance(value, str) and value:
                return value
    return UNNAMED


def schema_list(backend: Backend) -> list[SchemaListed]:
    """The meta-schema, then every schema in its type index (oldest first) with a title.

    The meta-schema's hash is computed, not read, so listing never writes anything.
    """
    store = backend.nodes
    meta = meta_hash()
    out: list[SchemaListed] = [{"hash": meta, "title": META_TITLE}]
    for h in store.index(meta):
        if h == meta:
            continue
        node = store.get(h)
        if node is None:  # an index line whose node was collected since
            continue
        out.append({"hash": h, "title": _title(node.payload)})
    return out


def schema_get(backend: Backend, h: str) -> Any:
    """The JSON Schema stored at ``h`` (its payload); a node that is not a schema is refused."""
    check_hash(h)
    node = backend.nodes.get(h)
    if node is None:
        raise NotFound(f"Schema not found: {h}")
    if node.type != meta_hash():
        raise InvalidInput(f"node {h} is not a schema (its type is {node.type})")
    return node.payload
