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
import fcntl
import heapq
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uwf.backend.fs.damage import INDEX_LIMIT, read_state
from uwf.cas.store import Node, NodeInfo, Store, decode_node
from uwf.util import fsio, jsonfmt
from uwf.util.base32 import NodeHash, check_hash, is_hash
from uwf.util.errors import CorruptNode, UwfError
from uwf.util.jsonfmt import dumps

if TYPE_CHECKING:
    from uwf.backend.fs.packs import Pack
    from uwf.util.outputs import PackDamage, Packed

SWEEP_LOCK = "cas-sweep.lock"
BATCH = 256  # loose files removed per hold of the sweep lock, so writers are never held long


def pack_names(directory: Path) -> list[str]:
    """The packs in ``directory`` (those whose index exists), in a fixed order. The pack
    format (``packs.py``: mmap, zlib, struct) is imported only where there are packs."""
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(
        (e[:-4] for e in entries if e.startswith("pack-") and e.endswith(".idx")), reverse=True
    )


def _parse_json(text: str) -> object:
    """``json.loads`` for uwf's compact records (``jsonfmt.loads``: no ``json`` import, and
    no whitespace to skip around the value in the usual case)."""
    return jsonfmt.loads(text)


def _decode(h: str, data: bytes, *, rehash: bool = True) -> Node:
    """The node stored as ``data`` (JSON, UTF-8) under ``h``, checked to hash to it (unless
    ``rehash`` is False: a packed record whose check ties it to a node that did)."""
    try:
        record = _parse_json(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise CorruptNode(f"corrupt node {h}: not valid JSON") from None
    return decode_node(h, record, rehash=rehash)


class FsStore(Store):
    def __init__(self, cas_dir: Path, lock_dir: Path | None = None) -> None:
        self.dir = cas_dir
        self.objects = cas_dir / "objects"
        self._objects = str(self.objects)  # reads build paths as strings: cheaper than Path
        self.index_dir = cas_dir / "index"
        self.pack_dir = cas_dir / "packs"
        # Outside cas/ so the store directory holds nothing but nodes and the index.
        self.lock_dir = lock_dir if lock_dir is not None else cas_dir.parent / "locks"
        self._packs: list[Pack] | None = None  # opened on the first read
        self._dropped: set[str] = set()  # packed copies deleted here (gc), until `pack`
        self._loose_at_scan: set[str] | None = None  # scan_order's listing (cas verify)

    def path(self, h: str) -> Path:
        return self.objects / h[:2] / h

    def _file(self, h: str) -> str:
        return f"{self._objects}/{h[:2]}/{h}"

    # -- packs --------------------------------------------------------------------------
    def packs(self) -> list[Pack]:
        """The packs as this process last listed them (listing them on the first call)."""
        return self._packs if self._packs is not None else self._list_packs()

    def _list_packs(self) -> list[Pack]:
        names = pack_names(self.pack_dir)
        if not names:
            self._packs = []
            return self._packs
        from uwf.backend.fs.packs import Pack

        known = {p.name: p for p in self._packs or []}
        found = []
        for name in names:
            pack = known.get(name)
            if pack is None:
                try:
                    pack = Pack(self.pack_dir, name)
                except FileNotFoundError:
                    continue  # removed since the listing: a newer pack holds what it held
                except OSError as exc:
                    raise UwfError(f"cannot read pack {name}: {exc.strerror or exc}") from None
            found.append(pack)
        found.sort(key=lambda p: p.count, reverse=True)  # most lookups end in the largest
        self._packs = found
        return found

    def add_pack(self, name: str) -> None:
        """A pack this process just wrote (``put_many``): read from now on, without listing
        the packs again."""
        from uwf.backend.fs.packs import Pack

        current = [p for p in self.packs() if p.name != name]
        self._packs = [*current, Pack(self.pack_dir, name)]

    def _packs_changed(self) -> bool:
        """List the packs again after a miss; True when the set changed."""
        before = [p.name for p in self._packs or []]
        return [p.name for p in self._list_packs()] != before

    def _find(self, h: str) -> tuple[Pack, int] | None:
        """The pack holding ``h`` and its position there (packs as last listed)."""
        found = self.packs()
        if not found or h in self._dropped:
            return None
        key = h.encode("ascii")
        for pack in found:
            i = pack.find(key)
            if i >= 0:
                return pack, i
        return None

    def _find_fresh(self, h: str) -> tuple[Pack, int] | None:
        return self._find(h) if self._packs_changed() else None

    # -- reading ------------------------------------------------------------------------
    def _read_loose(self, h: str) -> bytes | None:
        try:
            with open(self._file(h), "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            return None

    def _exists(self, h: str) -> bool:
        return (
            self._find(h) is not None
            or os.path.exists(self._file(h))
            or self._find_fresh(h) is not None
        )

    def _load(self, h: str, *, rehash: bool = False) -> Node | None:
        """A loose file is re-hashed; a packed record is checked against its ``check`` (and
        re-hashed too with ``rehash``: ``cas verify``)."""
        found = self._find(h)
        if found is None:
            data = self._read_loose(h)
            if data is not None:
                return _decode(h, data)
            found = self._find_fresh(h)
            if found is None:
                return None
        try:
            return _decode(h, found[0].read(found[1]), rehash=rehash)
        except CorruptNode:
            good = self._good_copy(h, found[0], rehash)
            if good is None:
                raise
            return good

    def _good_copy(self, h: str, damaged: Pack, rehash: bool) -> Node | None:
        """Another copy of a node whose record in ``damaged`` is corrupt: in another pack,
        or a loose file (a later put) — used instead, as any good copy."""
        for pack, i in self._packed_copies(h):
            if pack is not damaged:
                with contextlib.suppress(CorruptNode):
                    return _decode(h, pack.read(i), rehash=rehash)
        data = self._read_loose(h)
        if data is None:
            return None
        with contextlib.suppress(CorruptNode):
            return _decode(h, data)
        return None

    def verified(self, h: str) -> Node | None:
        """Every copy re-hashed — each pack's record and the loose file — so that no copy a
        read might take is bad (CorruptNode names the first bad one)."""
        check_hash(h)
        node = None
        for pack, i in self._packed_copies(h):
            node = _decode(h, pack.read(i))
        loose = self._loose_at_scan
        data = self._read_loose(h) if loose is None or h in loose else None
        if data is not None:
            node = _decode(h, data)
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

    def _packed_copies(self, h: str) -> Iterator[tuple[Pack, int]]:
        if h in self._dropped:
            return
        key = h.encode("ascii")
        for pack in self.packs():
            i = pack.find(key)
            if i >= 0:
                yield pack, i

    def _loose(self) -> Iterator[os.DirEntry[str]]:
        """Every loose node file, by fan-out directory and name."""
        try:
            fans = sorted(os.scandir(self.objects), key=lambda e: e.name)
        except FileNotFoundError:
            return
        for fan in fans:
            if not fan.is_dir() or len(fan.name) != 2:
                continue
            for entry in sorted(os.scandir(fan.path), key=lambda e: e.name):
                if is_hash(entry.name) and entry.name[:2] == fan.name:
                    yield entry

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

    # -- packs without an index (backend/fs/orphans.py) ----------------------------------
    def _elsewhere(self, h: str) -> bool:
        """Whether ``h`` is readable without the index-less packs: loose or indexed."""
        return os.path.exists(self._file(h)) or self._find(h) is not None

    def orphan_nodes(self) -> dict[str, list[str] | None]:
        """Each pack without an index that holds nodes found nowhere else: those nodes (None
        when its records cannot even be read). A crash leftover holds none: left out."""
        from uwf.backend.fs import orphans

        return orphans.found(self.pack_dir, self._elsewhere)

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

    # -- writing ------------------------------------------------------------------------
    def put_many(self, nodes: Sequence[tuple[str, Any]]) -> list[NodeHash]:
        """The nodes of one step as one pack: three fsyncs for the batch, whatever its size
        (``batch``; docs/format.md, "The filesystem backend"). A single node is a loose file."""
        if len(nodes) < 2:
            return super().put_many(nodes)
        from uwf.backend.fs import batch

        return batch.put_many(self, nodes)

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

    def _touch(self, h: str, ns: int) -> bool | bytes:
        """Record a put of ``h`` at ``ns`` on its loose file (True); a node only in a pack:
        its record's bytes, checked, for the caller to record it; False when it is not
        stored (or its only copy is corrupt). A store of another user: whether it exists."""
        try:
            os.utime(self._file(h), ns=(ns, ns))  # allowed on a 0444 file for its owner
            return True
        except FileNotFoundError:
            pass
        except OSError:  # another user's store: the node is there, its age stays as it was
            return self._exists(h)
        found = self._find(h) or self._find_fresh(h)
        if found is None:
            return False
        try:
            data = found[0].read(found[1])
            _decode(h, data)
        except CorruptNode:
            return False
        return data

    @contextlib.contextmanager
    def _flock(self, operation: int) -> Iterator[None]:
        fd = fsio.open_lock(self.lock_dir / SWEEP_LOCK)
        try:
            fcntl.flock(fd, operation)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _writing(self) -> contextlib.AbstractContextManager[None]:
        return self._flock(fcntl.LOCK_SH)

    def sweeping(self) -> contextlib.AbstractContextManager[None]:
        return self._flock(fcntl.LOCK_EX)

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

    # -- the type index -----------------------------------------------------------------
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
