"""What a process keeps of a store (docs/architecture.md, "What a process keeps"): the nodes
it read or wrote (``Kept``, bounded, least recently used first) and the schemas it put
(``SchemasPut``), so that a long-lived process (a worker, a library) decodes each node once
and puts each schema once."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Generic, TypeVar

from uwf.util.base32 import NodeHash
from uwf.util.jsonfmt import dumps

__all__ = ["Kept", "SchemasPut", "schema_key", "size_of"]

T = TypeVar("T")


def schema_key(schema_payload: Any) -> tuple[str, tuple[str, ...]] | None:
    """What ``SchemasPut`` knows a schema by: the schema as given, and the secrets its
    redaction masks; None when it is not JSON (``put`` refuses it)."""
    from uwf.util import secrets

    try:
        return (dumps(schema_payload), secrets.values())
    except (TypeError, ValueError):
        return None


def size_of(payload: Any) -> int:
    """About how many bytes a node's payload takes (its JSON), for ``Kept``'s bound."""
    try:
        return len(dumps(payload))
    except (TypeError, ValueError):
        return 1 << 30  # not JSON (a damaged record): never kept


class Kept(Generic[T]):
    """The nodes a process keeps, read or written (docs/architecture.md, "What a process
    keeps"): at most ``count`` of them and about ``size`` bytes of their JSON, the least
    recently used going first. A node never changes once stored, so a kept one is never
    stale; whether it is still stored (gc may have deleted it) is the store's to say."""

    def __init__(self, count: int, size: int) -> None:
        self.count = count
        self.size = size
        self.bytes = 0
        # An OrderedDict, not a dict: dropping the oldest of a dict whose front was emptied
        # scans the emptied slots (a history of 30,000 nodes did so 27,000 times).
        self._nodes: OrderedDict[str, tuple[T, int]] = OrderedDict()
        self._lock = threading.Lock()  # a Python agent's lane shares the store

    def __len__(self) -> int:
        return len(self._nodes)

    def get(self, h: str) -> T | None:
        with self._lock:
            found = self._nodes.get(h)
            if found is None:
                return None
            self._nodes.move_to_end(h)  # the most recently used, last
            return found[0]

    def keep(self, h: str, node: T, size: int) -> None:
        if size > self.size // 8:  # one node never takes the place of many
            return
        with self._lock:
            old = self._nodes.pop(h, None)
            if old is not None:
                self.bytes -= old[1]
            self._nodes[h] = (node, size)
            self.bytes += size
            while len(self._nodes) > self.count or self.bytes > self.size:
                self.bytes -= self._nodes.popitem(last=False)[1][1]

    def drop(self, h: str) -> None:
        with self._lock:
            old = self._nodes.pop(h, None)
            if old is not None:
                self.bytes -= old[1]

    def clear(self) -> None:
        with self._lock:
            self._nodes.clear()
            self.bytes = 0


class SchemasPut:
    """The schemas a process put into a store (``Store.put_schema``): the schema as given
    (its JSON, with the secrets known then) → its hash, and its hash → its payload as stored,
    to put it again should gc collect it; whether the meta-schema is stored."""

    LIMIT = 1024  # schemas a process keeps the hash of (a few per agent in practice)

    def __init__(self) -> None:
        self.hashes: dict[tuple[str, tuple[str, ...]], NodeHash] = {}
        self.payloads: dict[str, Any] = {}
        self.meta = False

    def remember(self, key: tuple[str, tuple[str, ...]], h: NodeHash, payload: Any) -> None:
        if len(self.hashes) >= self.LIMIT:
            self.hashes.clear()
            self.payloads.clear()
        self.hashes[key] = h
        self.payloads[h] = payload
