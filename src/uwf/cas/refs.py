"""References between nodes: a string whose schema location says ``format: cas_ref``.

``refs`` follows the rules of docs/format.md, "Nodes" (References): a cas_ref schema yields
the string; anyOf / oneOf / allOf yield the union of their branches; arrays yield their
items; objects yield their ``properties`` and, when it is a schema,
``additionalProperties``. ``null`` never yields a ref. Type (schema) links are not refs.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from uwf.cas.store import Store
from uwf.util.base32 import NodeHash, is_hash


def collect(schema: Any, value: Any, out: list[NodeHash] | None = None) -> list[NodeHash]:
    """The refs in ``value`` according to ``schema``, in schema order, duplicates kept once."""
    if out is None:
        out = []
    if not isinstance(schema, dict) or value is None:
        return out
    if schema.get("format") == "cas_ref" and isinstance(value, str):
        if is_hash(value) and value not in out:
            out.append(value)
        return out
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if isinstance(branches, list):
            for branch in branches:
                collect(branch, value, out)
    if isinstance(value, list):
        items = schema.get("items")
        if isinstance(items, dict):
            for item in value:
                collect(items, item, out)
    elif isinstance(value, dict):
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        for key, sub in props.items():
            if key in value:
                collect(sub, value[key], out)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for key, item in value.items():
                if key not in props:
                    collect(extra, item, out)
    return out


def can_hold_refs(schema: Any) -> bool:
    """False when no location of ``schema`` is a ``cas_ref``: its nodes never have refs."""
    if isinstance(schema, dict):
        if schema.get("format") == "cas_ref":
            return True
        return any(can_hold_refs(v) for v in schema.values())
    if isinstance(schema, list):
        return any(can_hold_refs(v) for v in schema)
    return False


def refs(store: Store, h: str) -> list[NodeHash]:
    """The direct refs of the node at ``h`` (NotFound if it is missing)."""
    node = store.require(h, "node")
    schema_node = store.get(node.type) if node.type != h else None
    if schema_node is None:
        return []
    return collect(schema_node.payload, node.payload)


def walk(store: Store, root: NodeHash) -> list[NodeHash]:
    """Breadth-first from ``root`` over refs, each node once, root first; missing are skipped."""
    seen: set[str] = set()
    order: list[NodeHash] = []
    queue = deque([root])
    schemas: dict[str, Any] = {}
    while queue:
        h = queue.popleft()
        if h in seen:
            continue
        seen.add(h)
        node = store.get(h)
        if node is None:
            continue
        order.append(h)
        if node.type == h:
            continue
        if node.type not in schemas:
            schema_node = store.get(node.type)
            schemas[node.type] = schema_node.payload if schema_node else None
        for ref in collect(schemas[node.type], node.payload):
            if ref not in seen:
                queue.append(ref)
    return order


def expand(store: Store, schema: Any, value: Any, seen: frozenset[str] = frozenset()) -> Any:
    """Replace every ref in ``value`` by the (expanded) payload it names (docs/format.md, "Nodes":
    ``thread step-details``)."""
    if not isinstance(schema, dict) or value is None:
        return value
    if isinstance(value, str):
        is_ref = schema.get("format") == "cas_ref" or any(
            isinstance(b, dict) and b.get("format") == "cas_ref" for b in schema.get("anyOf", [])
        )
        if not is_ref or not is_hash(value) or value in seen:
            return value
        node = store.get(value)
        if node is None:
            return value
        sub = store.get(node.type)
        if sub is None:
            return node.payload
        return expand(store, sub.payload, node.payload, seen | {value})
    if isinstance(value, list):
        items = schema.get("items")
        return [expand(store, items, v, seen) for v in value] if isinstance(items, dict) else value
    if isinstance(value, dict):
        found = schema.get("properties")
        props: dict[str, Any] = found if isinstance(found, dict) else {}
        return {k: expand(store, props[k], v, seen) if k in props else v for k, v in value.items()}
    return value
