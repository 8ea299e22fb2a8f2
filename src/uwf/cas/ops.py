"""Whole-store operations: reindex and verify. The only code that reads every node."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uwf.cas.refs import can_hold_refs, collect
from uwf.cas.store import Store
from uwf.util.base32 import NodeHash
from uwf.util.errors import CorruptNode

if TYPE_CHECKING:
    from uwf.util.outputs import NodeDamage, PackDamage, Verified


def reindex(store: Store) -> dict[str, int]:
    """Rebuild what the backend can from its own data (a pack's lost index), then the type
    index from the nodes themselves (skipping damaged ones)."""
    repaired = store.repair_storage()
    found: dict[str, list[tuple[int, NodeHash]]] = {}
    nodes = 0
    for h in store.iter_hashes():
        try:
            node = store.stored(h)
        except CorruptNode:
            continue
        if node is None:
            continue
        nodes += 1
        found.setdefault(node.type, []).append((node.timestamp, h))
    store.write_index({t: [h for _, h in sorted(entries)] for t, entries in found.items()})
    out = {"nodes": nodes, "types": len(found)}
    if repaired:
        out["repaired"] = repaired
    return out


def verify(store: Store) -> Verified:
    """Re-hash every node and check that its type and its refs exist.

    Returns ``{"scanned": n, "ok": bool, "damaged": [{"hash", "problem"}]}``; damage of the
    storage itself (a pack whose checksum fails) comes first, as ``{"pack", "problem"}``.
    """
    packs: list[PackDamage] = store.check_storage()  # a pack's checksums
    damaged: list[NodeDamage] = []
    schemas: dict[str, Any] = {}
    holds_refs: dict[str, bool] = {}  # per type: can its nodes refer to others at all?
    # One directory scan; refs are then set lookups. A miss is confirmed on disk, since a step
    # running beside verify may have written the node after the scan.
    try:
        present = set(store.iter_hashes())
    except CorruptNode:
        if not packs:
            raise
        return {"scanned": 0, "ok": False, "damaged": [*packs]}  # a pack cannot even be read
    scanned = 0
    for h in store.scan_order(present):  # packed nodes block by block
        scanned += 1
        try:
            node = store.verified(h)  # re-hashed, packed or not
        except CorruptNode as exc:
            damaged.append({"hash": h, "problem": str(exc)})
            continue
        if node is None:  # deleted while we scanned
            continue
        if node.type == h:
            continue
        if node.type not in present and not store.has(node.type):
            damaged.append({"hash": h, "problem": f"its type {node.type} is missing"})
            continue
        if node.type not in schemas:
            try:
                schema_node = store.get(node.type)
            except CorruptNode:
                schema_node = None
            schemas[node.type] = schema_node.payload if schema_node else None
            holds_refs[node.type] = can_hold_refs(schemas[node.type])
        schema = schemas[node.type]
        if schema is None:
            damaged.append({"hash": h, "problem": f"its type {node.type} is missing"})
            continue
        if not holds_refs[node.type]:
            continue
        for ref in collect(schema, node.payload):
            if ref not in present and not store.has(ref):
                damaged.append({"hash": h, "problem": f"it refers to missing node {ref}"})
    damaged.sort(key=lambda d: d["hash"])  # stable
    return {"scanned": scanned, "ok": not (packs or damaged), "damaged": [*packs, *damaged]}
