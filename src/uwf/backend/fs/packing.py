"""``uwf cas pack`` on the filesystem store: loose nodes into a new pack, safely.

1. The loose files are listed (with their mtimes); with ``everything`` (gc), or once the store
   has ``MAX_PACKS`` packs, every pack's records join them, so that one pack replaces all.
2. The new pack is written: each loose node is read and checked against its name first (a
   corrupt one stays loose, for ``cas verify`` to report), in the order of the files' mtimes
   so that a chain's steps sit near each other; then the merged packs' records, each pack in
   its own order, a node once (its newest copy). Its .pack and .idx are fsynced and renamed,
   the directory fsynced: from here every node it holds is readable from it.
3. Only then, under the store's sweep lock (in batches, so writers are never held long), the
   loose files go — each only if its mtime is the one packed: a put that refreshed it since
   keeps it (its later last put must not be lost) — and then the packs it replaced (all of
   them stay when one of their records could not be read: it is for ``cas verify``).

A crash at any moment leaves each node in its loose file, in the new pack or in both; temp
files and a .pack whose .idx never came are removed by the next run (unless the .pack holds
nodes found nowhere else: its index was lost afterwards, and it is kept for `cas reindex`).
The caller holds the gc lock (``cas pack`` and ``cas gc`` never run at once).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from uwf.backend.fs import packs
from uwf.backend.fs.packs import Pack, Source
from uwf.util.errors import CorruptNode

if TYPE_CHECKING:
    from uwf.backend.fs.nodes import FsStore
    from uwf.util.outputs import Packed

SAMPLE = 64  # records sampled for a pack's dictionary


class _Loose:
    """The loose files at the start, and the loads that put them into the new pack."""

    def __init__(self, store: FsStore) -> None:
        self.store = store
        found = []
        for entry in store._loose():
            try:
                found.append((entry.stat().st_mtime_ns, entry.name))
            except FileNotFoundError:
                continue
        found.sort()
        self.files = found
        self.packed: list[tuple[int, str]] = []
        self.packed_names: set[str] = set()

    def read(self, name: str) -> bytes | None:
        """A loose node's bytes when they hash to its name; None otherwise (it stays)."""
        from uwf.backend.fs.nodes import _decode

        data = self.store._read_loose(name)
        if data is None:
            return None
        try:
            _decode(name, data)
        except CorruptNode:
            return None
        return data

    def sources(self) -> Iterator[Source]:
        for mtime, name in self.files:

            def load(mtime: int = mtime, name: str = name) -> bytes | None:
                data = self.read(name)
                if data is not None:
                    self.packed.append((mtime, name))
                    self.packed_names.add(name)
                return data

            yield Source(name, load, mtime // 1_000_000)


def _merged(store: FsStore, old: list[Pack], loose: _Loose, broken: set[str]) -> Iterator[Source]:
    """The records of ``old`` (oldest pack first, each in record order), each name once: a
    record whose node was just packed from its loose file or is in a newer pack is left to
    that newer copy; a dropped (collected) one is left out. Runs after the loose sources."""
    for n, pack in enumerate(reversed(old)):
        newer = old[: len(old) - 1 - n]
        entries = [pack.entry(i) for i in range(pack.count)]
        order = sorted(range(pack.count), key=lambda i: (entries[i].offset, entries[i].inner))
        for i in order:
            name = pack.name_at(i)
            if name in loose.packed_names or name in store._dropped:
                continue
            key = name.encode("ascii")
            if any(p.find(key) >= 0 for p in newer):
                continue

            def load(pack: Pack = pack, i: int = i) -> bytes | None:
                try:
                    return pack.read(i)
                except CorruptNode:
                    broken.add(pack.name)  # `cas verify` reports it
                    return None

            yield Source(name, load, pack.entry(i).last_put)


def _sample(loose: _Loose, old: list[Pack]) -> bytes:
    """A dictionary from records spread over what is packed (at most one in eight)."""
    if len(loose.files) + sum(p.count for p in old) < 16:
        return b""
    records: list[bytes] = []
    for pack in old:
        for i in range(0, pack.count, max(8, pack.count // SAMPLE)):
            try:
                records.append(pack.read(i))
            except CorruptNode:
                continue
    for _, name in loose.files[:: max(8, len(loose.files) // SAMPLE)]:
        data = loose.read(name)
        if data is not None:
            records.append(data)
    return packs.dictionary(records)


def pack_store(store: FsStore, *, everything: bool = False) -> Packed:
    """Pack the loose nodes (and, with ``everything`` or too many packs, merge every pack):
    ``{"packed", "loose", "packs", "bytes"}`` — nodes moved out of loose files, loose files
    left, packs now, and their bytes."""
    from uwf.backend.fs.nodes import MAX_PACKS

    packs.remove_leftovers(store.pack_dir, keep=store.orphan_nodes())
    current = store._list_packs()
    loose = _Loose(store)
    merge = everything or len(current) >= MAX_PACKS
    old = current if merge else []
    removed = 0
    if loose.files or (merge and (len(current) > 1 or store._dropped)):
        broken: set[str] = set()
        zdict = _sample(loose, old)

        def sources() -> Iterator[Source]:
            yield from loose.sources()
            yield from _merged(store, old, loose, broken)

        name = packs.write(store.pack_dir, sources(), zdict)
        removed = _remove_packed(store, loose.packed)
        # A record that cannot be read keeps every merged pack (an older one may hold the
        # only good copy of that node): nothing is lost, the new pack merely duplicates.
        replaced = [] if broken else [p.name for p in old if p.name != name]
        if replaced:
            with store.sweeping():
                for pack_name in replaced:
                    packs.remove(store.pack_dir, pack_name)
        if replaced:
            store._dropped.clear()
    final = store._list_packs()
    return {
        "packed": len(loose.packed),
        "loose": len(loose.files) - removed,
        "packs": len(final),
        "bytes": sum(len(p.pack) + len(p.idx) for p in final),
    }


def _remove_packed(store: FsStore, packed: list[tuple[int, str]]) -> int:
    """Remove the loose files now in the new pack whose mtime is still the packed one."""
    from uwf.backend.fs.nodes import BATCH

    removed = 0
    for start in range(0, len(packed), BATCH):
        with store.sweeping():
            for mtime, name in packed[start : start + BATCH]:
                path = store._file(name)
                try:
                    if os.stat(path).st_mtime_ns != mtime:
                        continue  # put again since it was read: its later last put stays
                    os.unlink(path)
                    removed += 1
                except FileNotFoundError:
                    continue
    return removed
