"""An in-memory store with the same contract as the filesystem store (tests, dry runs)."""

from __future__ import annotations

import time
from collections.abc import Iterator

from uwf.cas.store import Node, NodeInfo, Store, decode_node
from uwf.util.jsonfmt import dumps


class MemoryStore(Store):
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self._index: dict[str, dict[str, None]] = {}
        self._last_put: dict[str, int] = {}  # later puts of existing nodes (gc's grace)

    def _exists(self, h: str) -> bool:
        return h in self.nodes

    def _load(self, h: str) -> Node | None:
        node = self.nodes.get(h)
        if node is None:
            return None
        return decode_node(h, node.as_dict())

    def _create(self, h: str, node: Node) -> bool:
        if h in self.nodes:
            return False
        self.nodes[h] = node
        return True

    def _refresh(self, h: str) -> bool:
        if h not in self.nodes:
            return False
        self._last_put[h] = time.time_ns() // 1_000_000
        return True

    def _index_add(self, type_hash: str, h: str) -> None:
        self._index.setdefault(type_hash, {})[h] = None

    def index(self, type_hash: str) -> list[str]:
        return list(self._index.get(type_hash, {}))

    def iter_hashes(self) -> Iterator[str]:
        yield from sorted(self.nodes)

    def delete(self, h: str) -> int:
        node = self.nodes.pop(h, None)
        self._last_put.pop(h, None)
        return 0 if node is None else len(dumps(node.as_dict()))

    def write_index(self, index: dict[str, list[str]]) -> None:
        self._index = {t: dict.fromkeys(hs) for t, hs in index.items()}

    def set_index(self, type_hash: str, hashes: list[str]) -> None:
        if hashes:
            self._index[type_hash] = dict.fromkeys(hashes)
        else:
            self._index.pop(type_hash, None)

    def info(self, h: str) -> NodeInfo | None:
        node = self._load(h)
        if node is None:
            return None
        last_put = max(node.timestamp, self._last_put.get(h, 0))
        return NodeInfo(node.type, last_put, len(dumps(node.as_dict())))
