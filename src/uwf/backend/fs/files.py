"""Where the filesystem store's nodes lie, found and read: loose node files and packs
(docs/format.md, "Packs"), and the locks every write and the sweep share.

``NodeFiles`` is what ``packing`` (``cas pack``, the automatic packing) and ``batch`` (a
step's one pack) work on; ``nodes.FsStore`` is the store built on it. Readers look in the
packs, then at the loose file, and when both miss they list the packs again (a pack written
meanwhile may hold a node whose loose file just went). Whatever holds it, a node whose content
does not hash to its name is reported as corrupt, never used.

Coordination with ``cas gc`` (see ``uwf.engine.store.gc``): every write holds a shared
``flock`` on ``<root>/locks/cas-sweep.lock`` and the sweep holds it exclusively, so a node is
never deleted between a writer's "it exists" and the writer linking to it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from uwf.cas.kept import size_of
from uwf.cas.node import Node, decode_node
from uwf.util import fsio, jsonfmt
from uwf.util.base32 import is_hash
from uwf.util.errors import CorruptNode, UwfError

if TYPE_CHECKING:
    from uwf.backend.fs.packs import Pack

__all__ = ["BATCH", "SWEEP_LOCK", "NodeFiles", "decode", "pack_names"]

SWEEP_LOCK = "cas-sweep.lock"
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC
_LOOSE_READ = 1 << 16  # bytes asked per read of a loose file (most nodes are one read)
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


def decode(h: str, data: bytes, *, rehash: bool = True) -> Node:
    """The node stored as ``data`` (JSON, UTF-8) under ``h``, checked to hash to it (unless
    ``rehash`` is False: a packed record whose check ties it to a node that did). Parsed by
    ``jsonfmt.loads``: no ``json`` import, no whitespace to skip in uwf's compact records."""
    try:
        record = jsonfmt.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise CorruptNode(f"corrupt node {h}: not valid JSON") from None
    return decode_node(h, record, rehash=rehash)


_COPIED_KEPT = 64  # checked packed records kept for ``_touch`` (the types steps copy)


class NodeFiles:
    """The loose files and packs of one store directory: finding, reading and checking a
    node, the packs as this process last listed them, and the sweep lock."""

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
        self._wrote_at: int | None = None  # when ``add_pack`` last listed them (monotonic)
        self._copied: dict[str, bytes] = {}  # packed records ``_touch`` checked, by hash

    def path(self, h: str) -> Path:
        return self.objects / h[:2] / h

    def _file(self, h: str) -> str:
        return f"{self._objects}/{h[:2]}/{h}"

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
        """A pack this process just wrote (``put_many``): read from now on. The packs are
        listed again (one listing per pack written; those already open stay open), so that
        packs merged away since (automatic packing) leave the list every read walks."""
        self._list_packs()
        if all(p.name != name for p in self._packs or []):  # already merged: listed anyway
            from uwf.backend.fs.packs import Pack

            self._packs = [*(self._packs or []), Pack(self.pack_dir, name)]
        self._wrote_at = time.monotonic_ns()

    def packs_just_listed(self, within_ns: int) -> list[Pack] | None:
        """The packs as listed when this process last wrote one (``add_pack``), if that was
        at most ``within_ns`` ago; else None (``packing.due`` then lists them itself)."""
        if self._wrote_at is None or time.monotonic_ns() - self._wrote_at > within_ns:
            return None
        return self._packs

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

    def _read_loose(self, h: str) -> bytes | None:
        """A loose file's bytes, read to its end through the file descriptor: four system
        calls (open, read, the read that finds the end, close) where a buffered ``open``
        makes eight, for each of the 30,000 nodes of a loose full history."""
        try:
            fd = os.open(self._file(h), _READ_FLAGS)
        except FileNotFoundError:
            return None
        try:
            data = os.read(fd, _LOOSE_READ)
            if data:
                rest = [data]
                while chunk := os.read(fd, _LOOSE_READ):
                    rest.append(chunk)
                data = b"".join(rest) if len(rest) > 1 else data
            return data
        finally:
            os.close(fd)

    def _exists(self, h: str) -> bool:
        return (
            self._find(h) is not None
            or os.path.exists(self._file(h))
            or self._find_fresh(h) is not None
        )

    def _known(self, h: str, type_hash: str) -> bool:
        """Without listing the packs again: a node packed by another process since this one
        listed them is validated once more, which a put of a new node (every node a step
        writes) would otherwise pay for with a listing of the packs."""
        return self._find(h) is not None or os.path.exists(self._file(h))

    def _load(self, h: str, *, rehash: bool = False) -> Node | None:
        """A loose file is re-hashed; a packed record is checked against its ``check`` (and
        re-hashed too with ``rehash``: ``cas verify``)."""
        return self._load_sized(h, rehash=rehash)[0]

    def _load_sized(self, h: str, *, rehash: bool = False) -> tuple[Node | None, int]:
        # ``_find`` and ``decode`` inlined for a node in a pack already open: a history
        # reads 30,000 nodes here (docs/performance.md, "Full history")
        packs = self._packs
        if packs and h not in self._dropped:
            key = h.encode("ascii")
            for pack in packs:
                i = pack.find(key)
                if i >= 0:
                    try:
                        record = pack.read(i)
                        return decode(h, record, rehash=rehash), len(record)
                    except CorruptNode as exc:
                        return self._instead(h, pack, rehash, exc)
        found = self._find(h) if packs is None else None
        if found is None:
            data = self._read_loose(h)
            if data is not None:
                return decode(h, data), len(data)
            found = self._find_fresh(h)
            if found is None:
                return None, 0
        try:
            data = found[0].read(found[1])
            return decode(h, data, rehash=rehash), len(data)
        except CorruptNode as exc:
            return self._instead(h, found[0], rehash, exc)

    def _instead(
        self, h: str, damaged: Pack, rehash: bool, problem: CorruptNode
    ) -> tuple[Node, int]:
        """A good copy of a node whose record in ``damaged`` is corrupt, else ``problem``."""
        good = self._good_copy(h, damaged, rehash)
        if good is None:
            raise problem
        return good, size_of(good.payload)

    def _good_copy(self, h: str, damaged: Pack, rehash: bool) -> Node | None:
        """Another copy of a node whose record in ``damaged`` is corrupt: in another pack,
        or a loose file (a later put) — used instead, as any good copy."""
        for pack, i in self._packed_copies(h):
            if pack is not damaged:
                with contextlib.suppress(CorruptNode):
                    return decode(h, pack.read(i), rehash=rehash)
        data = self._read_loose(h)
        if data is None:
            return None
        with contextlib.suppress(CorruptNode):
            return decode(h, data)
        return None

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

    def _touch(self, h: str, ns: int, *, fresh: bool = True) -> bool | bytes:
        """Record a put of ``h`` at ``ns`` on its loose file (True); a node only in a pack:
        its record's bytes, checked, for the caller to record it; False when it is not
        stored (or its only copy is corrupt). A store of another user: whether it exists.

        ``fresh=False``: the packs as last listed are enough (a node the caller stores again
        when it is not found: a pack written since by another process only costs a copy)."""
        try:
            os.utime(self._file(h), ns=(ns, ns))  # allowed on a 0444 file for its owner
            return True
        except FileNotFoundError:
            pass
        except OSError:  # another user's store: the node is there, its age stays as it was
            return self._exists(h)
        found = self._find(h) or (self._find_fresh(h) if fresh else None)
        if found is None:
            return False
        data = self._copied.get(h)  # a schema a step's pack copies at every step
        if data is not None:
            return data  # checked when first read; any good copy of a node is the node
        try:
            data = found[0].read(found[1])
            decode(h, data)
        except CorruptNode:
            return False
        if len(self._copied) >= _COPIED_KEPT:
            self._copied.clear()
        self._copied[h] = data
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

    def _elsewhere(self, h: str) -> bool:
        """Whether ``h`` is readable without the index-less packs: loose or indexed."""
        return os.path.exists(self._file(h)) or self._find(h) is not None

    def orphan_nodes(self) -> dict[str, list[str] | None]:
        """Each pack without an index that holds nodes found nowhere else: those nodes (None
        when its records cannot even be read). A crash leftover holds none: left out."""
        from uwf.backend.fs import orphans

        return orphans.found(self.pack_dir, self._elsewhere)
