"""What the ``store`` and ``cas`` commands print, and what a whole-store check or gc
reports.

One part of ``uwf.util.outputs`` (its docstring says what these types are for)."""

# No ``from __future__ import annotations``: Python 3.11 reads ``NotRequired`` only from
# annotations that are evaluated.
from typing import Any, NotRequired, TypedDict

from uwf.util.base32 import NodeHash


class NodeShown(TypedDict):
    """``cas get``: ``timestamp`` with ``--timestamp``."""

    type: NodeHash
    payload: Any
    timestamp: NotRequired[int]


class Hashed(TypedDict):
    """``cas put``, ``cas put-text``."""

    hash: NodeHash


class Exists(TypedDict):
    """``cas has``."""

    exists: bool


class Refs(TypedDict):
    """``cas refs``."""

    refs: list[NodeHash]


class Walked(TypedDict):
    """``cas walk``."""

    hashes: list[NodeHash]


class Reindexed(TypedDict):
    """``cas reindex`` (``repaired``: pack indexes rebuilt from their packs' records)."""

    status: str
    nodes: int
    types: int
    repaired: NotRequired[int]


class NodeDamage(TypedDict):
    """A damaged node of ``cas verify``."""

    hash: NodeHash
    problem: str


class PackDamage(TypedDict):
    """A pack of ``cas verify`` whose own checksums or order are wrong (listed first)."""

    pack: str
    problem: str


class RootDamage(TypedDict, total=False):
    """A root of ``cas verify`` that does not resolve (docs/reliability.md, "Repairing damaged
    state"): a part of the thread state uwf cannot read as its own (``state``: ``active``,
    ``history`` or ``registry``), or an active or archived thread's head or a registry entry
    (``thread`` / ``workflow``) naming a node that is missing or of another kind."""

    state: str
    thread: str
    workflow: str
    problem: str


class Verified(TypedDict):
    """``cas verify``."""

    scanned: int
    ok: bool
    damaged: list[PackDamage | NodeDamage | RootDamage]


class Packed(TypedDict):
    """``cas pack``: nodes moved, loose nodes left, packs now and their bytes."""

    packed: int
    loose: int
    packs: int
    bytes: int


class Collected(TypedDict):
    """``cas gc``: ``packed`` after a real run, ``dryRun`` instead with ``--dry-run``."""

    scanned: int
    reachable: int
    collected: int
    bytes: int
    locks: int
    tempFiles: int
    packed: NotRequired[int]
    dryRun: NotRequired[bool]


class SchemaListed(TypedDict):
    """One schema of ``cas schema list``."""

    hash: NodeHash
    title: str


class CopyCounts(TypedDict):
    """What ``store copy`` copied of one part, and what TO had already."""

    copied: int
    present: int


# "from" is a Python keyword: these two are spelt the functional way.
StoreInitialised = TypedDict("StoreInitialised", {"store": str, "schema": int, "from": int})
StoreInitialised.__doc__ = "``store init``: the store and its schema version, before and now."

StoreCopied = TypedDict(
    "StoreCopied",
    {
        "from": str,
        "to": str,
        "nodes": CopyCounts,
        "registry": CopyCounts,
        "history": CopyCounts,
        "threads": CopyCounts,
        "verified": bool,
    },
)
StoreCopied.__doc__ = "``store copy``."
