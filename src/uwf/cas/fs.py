"""The filesystem store: ``<root>/cas/objects/<2 chars>/<HASH>`` JSON files, read-only.

Opening it reads nothing. A node is written once (temp file, fsync, link, fsync of the
directory) and never rewritten, so a crash leaves it either absent or whole; a file whose
content does not hash to its name is reported as corrupt, never used. The type index is
``<root>/cas/index/<TYPEHASH>``, one hash per line, appended after the node is durable.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

from uwf.cas.store import Node, Store, decode_node
from uwf.util import fsio
from uwf.util.base32 import is_hash
from uwf.util.errors import CorruptNode
from uwf.util.jsonfmt import dumps


class FsStore(Store):
    def __init__(self, cas_dir: Path) -> None:
        self.dir = cas_dir
        self.objects = cas_dir / "objects"
        self.index_dir = cas_dir / "index"

    def path(self, h: str) -> Path:
        return self.objects / h[:2] / h

    def _exists(self, h: str) -> bool:
        return os.path.exists(self.path(h))

    def _load(self, h: str) -> Node | None:
        data = fsio.read_bytes(self.path(h))
        if data is None:
            return None
        try:
            record = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise CorruptNode(f"corrupt node {h}: not valid JSON") from None
        return decode_node(h, record)

    def _create(self, h: str, node: Node) -> bool:
        data = dumps(node.as_dict()).encode()
        return fsio.create_once(self.path(h), data, mode=0o444)

    def _index_add(self, type_hash: str, h: str) -> None:
        fsio.append_line(self.index_dir / type_hash, h)

    def index(self, type_hash: str) -> list[str]:
        data = fsio.read_bytes(self.index_dir / type_hash)
        if data is None:
            return []
        seen: dict[str, None] = {}
        for line in data.decode("ascii", "replace").splitlines():
            line = line.strip()
            if is_hash(line):  # a torn last line from a crash is skipped, never trusted
                seen[line] = None
        return list(seen)

    def iter_hashes(self) -> Iterator[str]:
        try:
            fans = sorted(os.scandir(self.objects), key=lambda e: e.name)
        except FileNotFoundError:
            return
        for fan in fans:
            if not fan.is_dir() or len(fan.name) != 2:
                continue
            for entry in sorted(os.listdir(fan.path)):
                if is_hash(entry) and entry[:2] == fan.name:
                    yield entry

    def delete(self, h: str) -> int:
        path = self.path(h)
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return 0
        return size

    def write_index(self, index: dict[str, list[str]]) -> None:
        self.index_dir.mkdir(parents=True, exist_ok=True)
        for type_hash, hashes in index.items():
            fsio.atomic_write(
                self.index_dir / type_hash, "".join(f"{h}\n" for h in hashes).encode()
            )
        for entry in os.listdir(self.index_dir):
            if is_hash(entry) and entry not in index:
                os.unlink(self.index_dir / entry)

    def file_size(self, h: str) -> int:
        try:
            return self.path(h).stat().st_size
        except FileNotFoundError:
            return 0
