"""``uwf cas pack`` on the filesystem store: loose nodes and small packs into one pack, safely.

1. Under the sweep lock, what a killed pack write left goes (``packs.remove_leftovers``).
2. The loose files are listed (with their mtimes) and the packs to merge chosen: with
   ``everything`` (gc) every pack; otherwise the smallest packs, geometrically (``choose``),
   so that the packs left form a progression at least doubling in size: a store of ``n``
   nodes has at most about log2(n) packs, and a node is rewritten about log2(n) times in its
   life. The packs of steps (one each, ``batch``) are merged a few at a time, a large pack
   seldom.
3. The new pack is written: each loose node is read and checked against its name first (a
   corrupt one stays loose, for ``cas verify`` to report), in the order of the files' mtimes
   so that a chain's steps sit near each other; then the merged packs' records, oldest pack
   first, each in its own order, a node once, with the latest last put of all its copies.
   Its .idx and .pack are fsynced and renamed, the directory fsynced: from here every node it
   holds is readable from it.
4. Only then, under the store's sweep lock (in batches, so writers are never held long), the
   loose files go — each only if its mtime is the one packed: a put that refreshed it since
   keeps it (its later last put must not be lost) — and then the packs it replaced, each only
   if its index is still the one read (a put that wrote the same pack again keeps it), and
   none when one of their records could not be read (it is for ``cas verify``).

``due`` is the cheap test a step makes before it starts ``uwf cas pack --auto`` in the
background (docs/architecture.md, "Automatic packing"): the packs the rule would merge number
``AUTO_PACKS``, or the loose nodes about ``AUTO_LOOSE``.

A crash at any moment leaves each node in its loose file, in the new pack or in both; temp
files, an .idx whose .pack never came, and a .pack whose .idx never came (an older uwf's
crash) are removed by the next run (unless the .pack holds nodes found nowhere else: its index
was lost afterwards, and it is kept for `cas reindex`). The caller holds the gc lock (``cas
pack`` and ``cas gc`` never run at once).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from uwf.backend.fs import packs, packwrite
from uwf.backend.fs.files import BATCH, NodeFiles, decode
from uwf.backend.fs.packs import ENTRY_BYTES, Pack, Source
from uwf.util.errors import CorruptNode

if TYPE_CHECKING:
    from uwf.util.outputs import Packed

SAMPLE = 64  # records sampled for a pack's dictionary
FACTOR = 2  # a pack is kept beside smaller ones only when it holds at least this many times more
AUTO_PACKS = 8  # automatic packing starts when the rule would merge this many packs,
AUTO_LOOSE = 512  # or when there are about this many loose nodes
JUST_LISTED_NS = 500_000_000  # a listing of the packs this recent counts as current (``due``)
_FANS = ("0G", "4R", "8Z", "CA")  # fan-out directories whose loose files ``due`` counts
_IDX_FIXED = 12 + 4 * 512 + 16  # an index's bytes besides its entries (packs.py)


def choose(counts: list[tuple[str, int]], loose: int) -> list[str]:
    """The packs to merge with ``loose`` loose nodes, given each pack's name and node count.

    From the largest down, the packs that each hold at least ``FACTOR`` times the next
    smaller one are left alone; below the first that does not, every pack is chosen, and so
    is each next larger pack that holds less than ``FACTOR`` times all that is chosen (the
    loose nodes included). Nothing when that is one pack alone (it would be written again as
    it is)."""
    ordered = sorted(counts, key=lambda c: (c[1], c[0]))
    split = 0
    for i in range(len(ordered) - 1, 0, -1):
        if ordered[i][1] < FACTOR * ordered[i - 1][1]:
            split = i + 1
            break
    total = loose + sum(count for _, count in ordered[:split])
    while split < len(ordered) and ordered[split][1] < FACTOR * total:
        total += ordered[split][1]
        split += 1
    chosen = [name for name, _ in ordered[:split]]
    return chosen if loose or len(chosen) > 1 else []


def due(store: NodeFiles) -> bool:
    """Whether automatic packing has work: a few ``stat`` calls, no pack opened (a pack's node
    count is read from its index's size; the loose nodes are counted in four of the 512
    fan-out directories). Right after this process wrote a pack (a step of its own), the
    packs as it listed them then are counted instead: no listing, no ``stat``."""
    loose = 0
    for fan in _FANS:
        try:
            loose += len(os.listdir(store.objects / fan))
        except (FileNotFoundError, NotADirectoryError):
            continue
    loose *= 512 // len(_FANS)
    if loose >= AUTO_LOOSE:
        return True
    listed = store.packs_just_listed(JUST_LISTED_NS)
    if listed is not None:
        if len(listed) < AUTO_PACKS:
            return False
        return len(choose([(p.name, p.count) for p in listed], loose)) >= AUTO_PACKS
    try:
        entries = list(os.scandir(store.pack_dir))
    except (FileNotFoundError, NotADirectoryError):
        return False
    names = [e for e in entries if e.name.startswith("pack-") and e.name.endswith(".idx")]
    if len(names) < AUTO_PACKS:
        return False
    counts = []
    for entry in names:
        try:
            size = entry.stat().st_size
        except FileNotFoundError:
            continue
        counts.append((entry.name[:-4], max(1, (size - _IDX_FIXED) // ENTRY_BYTES)))
    return len(choose(counts, loose)) >= AUTO_PACKS


class _Loose:
    """The loose files at the start, and the loads that put them into the new pack."""

    def __init__(self, store: NodeFiles) -> None:
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
        data = self.store._read_loose(name)
        if data is None:
            return None
        try:
            decode(name, data)
        except CorruptNode:
            return None
        return data

    def sources(self, latest: dict[str, int]) -> Iterator[Source]:
        """Each loose node, its last put the later of its mtime and its packed copies'."""
        for mtime, name in self.files:

            def load(mtime: int = mtime, name: str = name) -> bytes | None:
                data = self.read(name)
                if data is not None:
                    self.packed.append((mtime, name))
                    self.packed_names.add(name)
                return data

            yield Source(name, load, max(mtime // 1_000_000, latest.get(name, 0)))


def _latest(old: list[Pack]) -> dict[str, int]:
    """The latest last put of each node in ``old`` over all its copies there."""
    latest: dict[str, int] = {}
    for pack in old:
        for i in range(pack.count):
            name, last_put = pack.name_at(i), pack.entry(i).last_put
            if last_put > latest.get(name, -1):
                latest[name] = last_put
    return latest


def _merged(
    store: NodeFiles, old: list[Pack], loose: _Loose, broken: set[str], latest: dict[str, int]
) -> Iterator[Source]:
    """The records of ``old`` (oldest pack first, each in record order), each name once,
    with its latest last put: a node just packed from its loose file is left to that copy; a
    dropped (collected) one is left out. Runs after the loose sources."""
    done: set[str] = set()
    for pack in sorted(old, key=lambda p: p.written_ns):
        entries = [pack.entry(i) for i in range(pack.count)]
        order = sorted(range(pack.count), key=lambda i: (entries[i].offset, entries[i].inner))
        for i in order:
            name = pack.name_at(i)
            if name in done or name in loose.packed_names or name in store._dropped:
                continue
            done.add(name)

            def load(pack: Pack = pack, i: int = i) -> bytes | None:
                try:
                    return pack.read(i)
                except CorruptNode:
                    broken.add(pack.name)  # `cas verify` reports it
                    return None

            yield Source(name, load, latest[name])


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


def pack_store(store: NodeFiles, *, everything: bool = False) -> Packed:
    """Pack the loose nodes and merge the packs ``choose`` picks (with ``everything``:
    every pack): ``{"packed", "loose", "packs", "bytes"}`` — nodes moved out of loose files,
    loose files left, packs now, and their bytes."""
    with store.sweeping():  # no pack is being written (a batch holds the lock shared)
        packs.remove_leftovers(store.pack_dir, keep=store.orphan_nodes())
    current = store._list_packs()
    loose = _Loose(store)
    if everything:
        old = current
        merge = len(current) > 1 or bool(store._dropped)
    else:
        chosen = set(choose([(p.name, p.count) for p in current], len(loose.files)))
        old = [p for p in current if p.name in chosen]
        merge = bool(old)
    removed = 0
    if loose.files or merge:
        broken: set[str] = set()
        zdict = _sample(loose, old)
        latest = _latest(old)

        def sources() -> Iterator[Source]:
            yield from loose.sources(latest)
            yield from _merged(store, old, loose, broken, latest)

        name = packwrite.write_pack(store.pack_dir, sources(), zdict)
        removed = _remove_packed(store, loose.packed)
        # A record that cannot be read keeps every merged pack (an older one may hold the
        # only good copy of that node): nothing is lost, the new pack merely duplicates.
        replaced = [] if broken else [p for p in old if p.name != name]
        if replaced:
            with store.sweeping():
                for pack in replaced:
                    if pack.still_here():
                        packs.remove(store.pack_dir, pack.name)
            store._dropped.clear()
    final = store._list_packs()
    return {
        "packed": len(loose.packed),
        "loose": len(loose.files) - removed,
        "packs": len(final),
        "bytes": sum(p.bytes for p in final),
    }


def _remove_packed(store: NodeFiles, packed: list[tuple[int, str]]) -> int:
    """Remove the loose files now in the new pack whose mtime is still the packed one."""
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
