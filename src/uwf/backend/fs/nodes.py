"""The filesystem store: loose node files, and packs of many nodes (docs/format.md, "Packs").

A node put alone is a loose file, ``<root>/cas/objects/<2 chars>/<HASH>``, compact JSON,
read-only, written once (temp file, fsync, link, fsync of the directory) and never rewritten,
so a crash leaves it either absent or whole. The nodes of one step (``put_many``) are one
small pack under ``<root>/cas/packs/`` (``batch.py``); ``uwf cas pack``, ``cas gc`` and the
automatic packing after steps merge loose nodes and packs into larger packs (``packing.py``,
``autopack.py``): a pack and its index are durable before any loose file or replaced pack
goes. Readers look in the packs, then at the loose file, and when both miss they list the
packs again (a pack written meanwhile may hold a node whose loose file just went). Whatever
holds it, a node whose content does not hash to its name is reported as corrupt, never used.
The type index is ``<root>/cas/index/<TYPEHASH>``, one hash per line, appended after the node
is durable.

Coordination with ``cas gc`` (see ``uwf.engine.store.gc``): every write holds a shared
``flock`` on ``<root>/locks/cas-sweep.lock`` and the sweep holds it exclusively, so a node is
never deleted between a writer's "it exists" and the writer linking to it. A put that finds
its node already stored refreshes its last put: the loose file's mtime, or, for a node only
in a pack, a loose copy of it (a batch: a copy in its own pack; packs never change). gc
judges a node's age by the later of its timestamp and its last put.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from uwf.backend.fs.damage import INDEX_LIMIT, read_state
from uwf.backend.fs.files import NodeFiles, decode, pack_names
from uwf.cas.store import Node, NodeInfo, Store
from uwf.util import fsio
from uwf.util.base32 import NodeHash, check_hash, is_hash
from uwf.util.errors import CorruptNode
from uwf.util.jsonfmt import dumps

if TYPE_CHECKING:
    from uwf.util.outputs import PackDamage, Packed


class FsStore(NodeFiles, Store):
    """The filesystem store (the module above): its nodes' files read through ``NodeFiles``."""

    def verified(self, h: str) -> Node | None:
        """Every copy re-hashed — each pack's record and the loose file — so that no copy a
        read might take is bad (CorruptNode names the first bad one)."""
        check_hash(h)
        node = None
        for pack, i in self._packed_copies(h):
            node = decode(h, pack.read(i))
        loose = self._loose_at_scan
        data = self._read_loose(h) if loose is None or h in loose else None
        if data is not None:
            node = decode(h, data)
        return node if node is not None else self._load(h, rehash=True)

    def loose_bytes(self, h: str) -> int | None:
        """The size of a node's loose file, None when it has none (benchmarks, tests)."""
        try:
            return os.stat(self._file(h)).st_size
        except FileNotFoundError:
            return None

    def info(self, h: str) -> NodeInfo | None:
        node = self._load(h)
        if node is None:
            return None
        last_put, size = node.timestamp, 0
        with contextlib.suppress(FileNotFoundError):
            st = os.stat(self._file(h))
            last_put, size = max(last_put, st.st_mtime_ns // 1_000_000), st.st_size
        for pack, i in self._packed_copies(h):
            last_put = max(last_put, pack.entry(i).last_put)
            size += pack.size_of(i)
        return NodeInfo(node.type, last_put, size)

    def iter_hashes(self) -> Iterator[NodeHash]:
        """Loose files first, then the packs listed afresh: a node packed meanwhile is in a
        pack that is listed after its loose file went. Sorted, each hash once."""
        loose = [NodeHash(entry.name) for entry in self._loose()]
        dropped = self._dropped
        streams: list[Iterator[NodeHash]] = [iter(loose)]
        for pack in self._list_packs():
            streams.append(n for n in pack.names() if n not in dropped)
        last = None
        for h in heapq.merge(*streams):
            if h != last:
                yield h
                last = h

    def scan_order(self, hashes: set[NodeHash]) -> list[NodeHash]:
        """Pack by pack in their blocks' order (each block inflated once), then the rest.
        The loose files are listed once here, so that ``verified`` tries to open only those
        (not one missing file per packed node)."""
        self._loose_at_scan = {entry.name for entry in self._loose()}
        out: list[NodeHash] = []
        seen: set[NodeHash] = set()
        for pack in self.packs():
            entries = [(pack.entry(i), NodeHash(pack.name_at(i))) for i in range(pack.count)]
            entries.sort(key=lambda e: (e[0].offset, e[0].inner))
            for _, name in entries:
                if name in hashes and name not in seen:
                    seen.add(name)
                    out.append(name)
        return out + sorted(hashes - seen)

    def check_storage(self) -> list[PackDamage]:
        """Packs that cannot be opened, or whose checksums or order are wrong. The packs are
        listed afresh for what reads them next (``cas verify`` reads what is on disk now, not
        blocks this process inflated before)."""
        from uwf.backend.fs.packs import Pack

        self._packs = None
        damaged: list[PackDamage] = []
        for name in pack_names(self.pack_dir):
            try:
                pack = Pack(self.pack_dir, name)
            except FileNotFoundError:
                continue
            except CorruptNode as exc:
                damaged.append({"pack": name, "problem": str(exc)})
                continue
            problem = pack.check()
            if problem is not None:
                damaged.append({"pack": name, "problem": str(pack.corrupt(problem))})
            pack.close()
        return damaged + self.storage_doubts()

    def storage_doubts(self) -> list[PackDamage]:
        from uwf.backend.fs import orphans

        return orphans.damage(self.pack_dir, self.orphan_nodes())

    def repair_storage(self) -> int:
        """Rebuild the index of every pack that lost it and holds nodes found nowhere else
        (``cas reindex``); how many indexes were written."""
        from uwf.backend.fs import orphans

        rebuilt = orphans.repair(self.pack_dir, self.orphan_nodes())
        if rebuilt:
            self._list_packs()
        return rebuilt

    def missing_hint(self, h: str) -> str:
        """Why a node may be missing: a pack that lost its index (named), else nothing."""
        from uwf.backend.fs import orphans

        return orphans.hint(self.pack_dir)

    def put_many(self, nodes: Sequence[tuple[str, Any]]) -> list[NodeHash]:
        """The nodes of one step as one pack: three fsyncs for the batch, whatever its size
        (``batch``; docs/format.md, "The filesystem backend"). A single node is a loose file."""
        if len(nodes) < 2:
            return super().put_many(nodes)
        from uwf.backend.fs import batch

        return batch.put_many(self, self, nodes)

    def put_checked(self, nodes: Mapping[NodeHash, Node]) -> None:
        """A batch's nodes, checked by it, as one pack (``put_many`` without the checks)."""
        if len(nodes) < 2:
            super().put_checked(nodes)
            return
        from uwf.backend.fs import batch

        batch.write_checked(self, self, nodes)

    def _create(self, h: NodeHash, node: Node) -> bool:
        data = dumps(node.as_json()).encode()
        return fsio.create_once(self.path(h), data, mode=0o444)

    def _refresh(self, h: str) -> bool:
        now = time.time_ns()  # the clock of node timestamps, not the kernel's coarser one
        found = self._touch(h, now)
        if not isinstance(found, bytes):
            return found  # False: stored again as a new loose file, which readers then use
        # A pack never changes: the put is recorded by a loose copy, whose mtime is its age.
        fsio.create_once(self.path(h), found, mode=0o444)
        return True

    def delete(self, h: str) -> int:
        """Remove the loose file; a packed copy is dropped, and goes at the next full pack
        (``pack(everything=True)``, which gc runs). Until then only this store skips it."""
        freed = 0
        with contextlib.suppress(FileNotFoundError):
            size = os.stat(self._file(h)).st_size
            os.unlink(self._file(h))
            freed = size
        copies = list(self._packed_copies(h))
        if copies:
            self._dropped.add(h)
            freed += sum(pack.size_of(i) for pack, i in copies)
        return freed

    def pack(self, *, everything: bool = False) -> Packed:
        from uwf.backend.fs.packing import pack_store

        return pack_store(self, everything=everything)

    def pack_due(self) -> bool:
        from uwf.backend.fs.packing import due

        return due(self)

    def pack_in_background(self, *, process: bool = False) -> str | None:
        from uwf.backend.fs import autopack

        return autopack.start(self, process=process)

    def _index_add(self, type_hash: str, h: NodeHash) -> None:
        fsio.append_line(self.index_dir / type_hash, h)

    def index(self, type_hash: str) -> list[NodeHash]:
        data = read_state(self.index_dir / type_hash, INDEX_LIMIT)  # `cas reindex` repairs
        if data is None:
            return []
        seen: dict[NodeHash, None] = {}
        for line in data.decode("ascii", "replace").splitlines():
            line = line.strip()
            if is_hash(line):  # a torn last line from a crash is skipped, never trusted
                seen[line] = None
        return list(seen)

    def write_index(self, index: Mapping[str, Sequence[NodeHash]]) -> None:
        if not index and not self.index_dir.is_dir():  # nothing stored: create nothing
            return
        self.index_dir.mkdir(parents=True, exist_ok=True)
        for type_hash, hashes in index.items():
            fsio.atomic_write(
                self.index_dir / type_hash, "".join(f"{h}\n" for h in hashes).encode()
            )
        for entry in os.listdir(self.index_dir):
            if is_hash(entry) and entry not in index:
                os.unlink(self.index_dir / entry)

    def set_index(self, type_hash: str, hashes: Sequence[NodeHash]) -> None:
        path = self.index_dir / type_hash
        if hashes:
            fsio.atomic_write(path, "".join(f"{h}\n" for h in hashes).encode())
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
