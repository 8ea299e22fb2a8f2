"""A write-behind store: puts checked at once, written together later (docs/performance.md).

``Batch`` wraps a store. Each ``put`` does everything ``Store.put`` does before a write —
redaction, hashing, validation against the schema (a schema put earlier in the batch counts)
— and raises as it would, but keeps the node in memory; reads see those nodes. ``flush``
hands them to the wrapped store's ``put_many`` in one call, so that a backend makes a step's
nodes durable together (the filesystem store: one pack; PostgreSQL: one transaction).

The agent kit writes a step's nodes through one (``AgentContext.store``) and flushes it before
it prints the StepNode's hash: until then nothing refers to them, so holding them back loses
nothing a crash could have kept. The filesystem store's ``put_many`` uses one too, to check
a batch before writing any of it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from uwf.cas.store import Node, NodeInfo, Store
from uwf.util.base32 import NodeHash
from uwf.util.errors import Collision, NotFound

__all__ = ["Batch"]


class Batch(Store):
    """Nodes put but not yet written, over ``inner``: reads look here first, then there."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.pending: dict[NodeHash, Node] = {}  # in put order

    # -- the held nodes -----------------------------------------------------------------
    def flush(self) -> None:
        """Write every held node with one ``put_checked`` of the wrapped store (a
        ``put_many`` that need not check them again), in put order; afterwards nothing is
        held (also when the write fails: the caller fails the step)."""
        if not self.pending:
            return
        nodes, self.pending = self.pending, {}
        self.inner.put_checked(nodes)  # checked by ``put`` here: not validated again
        self.inner.remember_schemas(self._schemas_put())  # written: put once per process

    def put_schema(self, schema_payload: dict[str, Any] | bool) -> NodeHash:
        """A schema this process put into the wrapped store already is not held again (put
        once per process: docs/architecture.md, "What a process keeps")."""
        known = self.inner.schema_put_here(schema_payload)
        return known if known is not None else super().put_schema(schema_payload)

    def _store(self, h: NodeHash, type_hash: NodeHash, payload: Any, *, typed: bool = True) -> None:
        held = self.pending.get(h)
        if held is not None:
            if held.type != type_hash or held.payload != payload:
                raise Collision(
                    f"hash collision: node {h} is stored with other content; nothing was "
                    "written (XXH64 is not collision-resistant: change the payload, e.g. add "
                    "a field)"
                )
            return
        if typed and type_hash != h and not self._exists(type_hash):
            raise NotFound(f"unknown type: {type_hash} (no schema node with that hash)")
        # A node already stored is held too: the flush puts it again, which records its
        # last put for gc (docs/architecture.md, "Garbage collection").
        self.pending[h] = Node(type_hash, payload, time.time_ns() // 1_000_000)

    # -- reads: the held nodes, then the wrapped store -----------------------------------
    def _load(self, h: str) -> Node | None:
        held = self.pending.get(h)  # type: ignore[call-overload]
        return held if held is not None else self.inner.get(h)

    def _exists(self, h: str) -> bool:
        return h in self.pending or self.inner.has(h)

    def _known(self, h: str, type_hash: str) -> bool:
        return h in self.pending or self.inner._known(h, type_hash)

    def missing(self, hashes: Sequence[str]) -> set[str]:
        return self.inner.missing([h for h in hashes if h not in self.pending])

    def index(self, type_hash: str) -> list[NodeHash]:
        stored = self.inner.index(type_hash)
        known = set(stored)
        held = [h for h, node in self.pending.items() if node.type == type_hash]
        return stored + [h for h in held if h not in known]

    def iter_hashes(self) -> Iterator[NodeHash]:
        seen = set()
        for h in self.inner.iter_hashes():
            seen.add(h)
            yield h
        yield from (h for h in self.pending if h not in seen)

    def info(self, h: str) -> NodeInfo | None:
        held = self.pending.get(h)  # type: ignore[call-overload]
        if held is not None:
            return NodeInfo(held.type, held.timestamp, 0)
        return self.inner.info(h)

    def missing_hint(self, h: str) -> str:
        return self.inner.missing_hint(h)

    # -- writes of the wrapped store's own (gc, reindex, store copy): passed on ----------
    def _create(self, h: NodeHash, node: Node) -> bool:
        return self.inner._create(h, node)

    def _refresh(self, h: str) -> bool:
        return h in self.pending or self.inner._refresh(h)

    def _index_add(self, type_hash: str, h: NodeHash) -> None:
        self.inner._index_add(type_hash, h)

    def delete(self, h: str) -> int:
        self.pending.pop(h, None)  # type: ignore[call-overload]
        return self.inner.delete(h)

    def write_index(self, index: Mapping[str, Sequence[NodeHash]]) -> None:
        self.inner.write_index(index)

    def set_index(self, type_hash: str, hashes: Sequence[NodeHash]) -> None:
        self.inner.set_index(type_hash, hashes)
