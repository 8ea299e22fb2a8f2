"""Pack files: many nodes of the filesystem store in one file, found through a sorted index.

docs/format.md, "Packs", is the format; in short, all integers big-endian::

    pack-<NAME>.pack  "UWFPACK2", u32 dictionary length, the dictionary, then the blocks:
                      one raw DEFLATE stream each, compressed with the pack's preset
                      dictionary, of consecutive nodes' JSON (exactly as a loose file holds
                      it) up to BLOCK bytes, so that what nodes written together share
                      (an answer, its structured output, the next step's prompt quoting it)
                      is stored once
    pack-<NAME>.idx   "UWFIDX02", u32 count, u32 fan-out[512], the names (count x 13 ASCII
                      characters, ascending), count x (u64 block offset, u32 block length,
                      u32 offset in the inflated block, u32 length there, u64 last put in
                      unix ms, u64 check: xxh64 of the name and the node's JSON),
                      u64 xxh64 of the .pack, u64 xxh64 of the .idx before it

Packs of the first version ("UWFPACK1"/"UWFIDX01": one stream per node, entries of u64
offset, u32 length, u64 last put, u64 check) are read as well; new packs are version 2.

``NAME`` is the 13-character hash of the .pack's bytes. A reader maps both files and finds a
name by binary search within its fan-out bucket (the first two characters); a process that
looks up many names in one pack builds a table of them once. A node was checked against its
name when it was packed; a read checks the inflated JSON against the record's ``check``,
which binds it to its name (``Pack.read``); ``cas verify`` re-hashes every node. A pack is
written as temp files, fsynced, renamed (the .idx first, the .pack last: a pack exists once
both do, and there is never a moment of records without their index, which is what a lost
index looks like), the directory fsynced; it is never changed afterwards, only removed whole
(the .pack first). A step's nodes are one small pack (``batch``); ``packing`` merges packs.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import xxhash

from uwf.util.base32 import ALPHABET, NodeHash
from uwf.util.errors import CorruptNode
from uwf.util.tuples import NamedTuple

PACK_MAGIC = b"UWFPACK2"
IDX_MAGIC = b"UWFIDX02"
V1_MAGICS = (b"UWFPACK1", b"UWFIDX01")  # version 1: one DEFLATE stream per node
NAME_LEN = 13
FANOUT = 512  # buckets by the first two characters: 16 x 32 (a hash starts with 0-F)
_HEAD = struct.Struct(">8sI")  # magic, count (or dictionary length)
_FAN = struct.Struct(f">{FANOUT}I")
# block offset in the .pack, its length, the node's offset and length in the inflated block,
# last put (unix ms), check
_ENTRY = struct.Struct(">QIIIQQ")
_ENTRY_V1 = struct.Struct(">QIQQ")  # offset in the .pack, length, last put, check
_SUMS = struct.Struct(">QQ")
ENTRY_BYTES = NAME_LEN + _ENTRY.size  # what one node costs in the index
_NAMES_AT = _HEAD.size + _FAN.size
DICTIONARY_MAX = 16 << 10  # bytes of sample records in a pack's preset dictionary
BLOCK = 32 << 10  # bytes of nodes' JSON in one block: DEFLATE's window
BLOCKS_KEPT = 8  # inflated blocks a pack keeps (256 KB at most), the oldest going first
LEVEL = 9
TMP_PREFIX = ".tmp-"  # as every temp file of uwf's (uwf.util.fsio)
_DIGIT = {ord(c): i for i, c in enumerate(ALPHABET)}

if TYPE_CHECKING:
    import array


def bucket(name: bytes | bytearray) -> int:
    """The fan-out bucket of a name: its first two characters as a number below 512."""
    return _DIGIT[name[0]] * 32 + _DIGIT[name[1]]


class Entry(NamedTuple):
    """Where a node's JSON is: the block at ``offset`` (``length`` bytes in the .pack), and
    ``size`` bytes from ``inner`` in it once inflated (version 1: ``size`` -1, the block is
    the node's own stream)."""

    offset: int
    length: int
    last_put: int
    check: int
    inner: int = 0
    size: int = -1


_xxh64 = xxhash.xxh64_intdigest


def check_of(name: bytes, data: bytes) -> int:
    """A record's ``check``: XXH64 of the node's name (13 ASCII bytes) and its JSON."""
    return _xxh64(name + data)


def _map(path: Path) -> tuple[mmap.mmap, os.stat_result]:
    fd = os.open(path, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        if st.st_size == 0:
            raise ValueError("empty file")
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ), st
    finally:
        os.close(fd)


def identity(st: os.stat_result) -> tuple[int, int, int]:
    """What tells one file at a path from another written there since (a pack written
    again under the same name: the same records, a newer index)."""
    return st.st_ino, st.st_mtime_ns, st.st_size


class Pack:
    """One pack, mapped: lookups by name, records by position. Opening reads two headers."""

    def __init__(self, directory: Path, name: str) -> None:
        self.name = name
        self.idx_path = directory / f"{name}.idx"
        self.pack_path = directory / f"{name}.pack"
        try:
            self.idx, idx_stat = _map(self.idx_path)
            self.pack, pack_stat = _map(self.pack_path)
        except ValueError:
            raise self.corrupt("an empty file") from None
        self.identity = identity(idx_stat)  # `still_here`: the index this reads
        self.written_ns = idx_stat.st_mtime_ns
        self.bytes = pack_stat.st_size + idx_stat.st_size
        magic, count = _HEAD.unpack_from(self.idx)
        self.v1 = magic == V1_MAGICS[1]
        self.entry_struct = _ENTRY_V1 if self.v1 else _ENTRY
        size = _NAMES_AT + count * (NAME_LEN + self.entry_struct.size) + _SUMS.size
        if magic not in (IDX_MAGIC, V1_MAGICS[1]) or len(self.idx) != size:
            raise self.corrupt("not a pack index of this format")
        self.count = count
        self.fan = _FAN.unpack_from(self.idx, _HEAD.size)
        self.entries_at = _NAMES_AT + count * NAME_LEN
        magic, dict_len = _HEAD.unpack_from(self.pack)
        self.records_at = _HEAD.size + dict_len
        expected = V1_MAGICS[0] if self.v1 else PACK_MAGIC
        if magic != expected or self.records_at > len(self.pack) or self.fan[-1] != count:
            raise self.corrupt("not a pack of this format")
        self.zdict = bytes(self.pack[_HEAD.size : self.records_at])
        # The blocks inflated last (offset -> data, the oldest first): a history walks
        # steps, outputs and details that lie in a few blocks at once, so each is inflated
        # once per walk, not once per switch between them.
        self._blocks: dict[int, bytes] = {}
        self._table: dict[bytes, int] | None = None  # name -> position, once worth building
        self._lookups = 0
        self._table_at = 64 + count // 16  # lookups after which a table costs less

    def corrupt(self, problem: str) -> CorruptNode:
        return CorruptNode(f"corrupt pack {self.name}: {problem}")

    def find(self, name: bytes) -> int:
        """The position of ``name`` (13 ASCII bytes), -1 when the pack does not hold it.

        By bisection in the name's bucket; once a process has looked up more than about
        one name in sixteen of the pack (a long chain, verify, gc), it builds a table of
        every name instead (a few ms for 20,000 names) and looks names up there.
        """
        if self._table is not None:
            return self._table.get(name, -1)
        self._lookups += 1
        if self._lookups > self._table_at:
            names = self.idx[_NAMES_AT : self.entries_at]
            self._table = {
                names[at : at + NAME_LEN]: i for i, at in enumerate(range(0, len(names), NAME_LEN))
            }
            return self._table.get(name, -1)
        b = _DIGIT[name[0]] * 32 + _DIGIT[name[1]]
        lo: int = self.fan[b - 1] if b else 0
        hi: int = self.fan[b]
        idx = self.idx
        while lo < hi:
            mid = (lo + hi) >> 1
            at = _NAMES_AT + mid * NAME_LEN
            key = idx[at : at + NAME_LEN]
            if key < name:
                lo = mid + 1
            elif key > name:
                hi = mid
            else:
                return mid
        return -1

    def name_at(self, i: int) -> str:
        at = _NAMES_AT + i * NAME_LEN
        return self.idx[at : at + NAME_LEN].decode("ascii")

    def names(self) -> Iterator[NodeHash]:
        """Every name, ascending."""
        for i in range(self.count):
            yield NodeHash(self.name_at(i))

    def entry(self, i: int) -> Entry:
        at = self.entries_at + i * self.entry_struct.size
        if self.v1:
            return Entry(*_ENTRY_V1.unpack_from(self.idx, at))
        offset, length, inner, size, last_put, check = _ENTRY.unpack_from(self.idx, at)
        return Entry(offset, length, last_put, check, inner, size)

    def size_of(self, i: int) -> int:
        """The bytes the node at ``i`` takes here: its share of its block (in proportion to
        its JSON) and its index entry."""
        e = self.entry(i)
        if e.size < 0:
            return e.length + NAME_LEN + self.entry_struct.size
        block = self._inflate(i, e)
        return e.length * e.size // max(1, len(block)) + ENTRY_BYTES

    def _inflate(self, i: int, e: Entry) -> bytes:
        """The inflated block of the node at ``i`` (the last ``BLOCKS_KEPT`` are kept: a
        chain's nodes sit together, a few blocks at a time)."""
        blocks = self._blocks
        data = blocks.get(e.offset)
        if data is not None:
            return data
        if e.offset < self.records_at or e.offset + e.length > len(self.pack):
            raise CorruptNode(
                f"corrupt node {self.name_at(i)}: its record lies outside {self.name}"
            )
        inflate = zlib.decompressobj(-15, self.zdict) if self.zdict else zlib.decompressobj(-15)
        try:
            data = inflate.decompress(self.pack[e.offset : e.offset + e.length])
        except zlib.error:
            data = b""
        if not inflate.eof or inflate.unused_data:
            raise CorruptNode(
                f"corrupt node {self.name_at(i)}: its record in {self.name} does not inflate"
            )
        if len(blocks) >= BLOCKS_KEPT:
            del blocks[next(iter(blocks))]
        blocks[e.offset] = data
        return data

    def read(self, i: int) -> bytes:
        """The node JSON at position ``i``, as it was packed: CorruptNode when its record
        cannot be inflated or does not match its ``check`` (name and JSON).

        A version-2 entry is unpacked straight into locals and its block looked up before
        any ``Entry`` is made: a history reads 30,000 nodes this way (docs/performance.md,
        "Full history")."""
        idx = self.idx
        at = _NAMES_AT + i * NAME_LEN
        if not self.v1:
            offset, length, inner, size, last_put, check = _ENTRY.unpack_from(
                idx, self.entries_at + i * _ENTRY.size
            )
            block = self._blocks.get(offset)
            if block is None:
                block = self._inflate(i, Entry(offset, length, last_put, check, inner, size))
            data = block[inner : inner + size]
            if _xxh64(idx[at : at + NAME_LEN] + data) != check:
                raise self._mismatch(i)
            return data
        e = self.entry(i)
        block = self._inflate(i, e)
        data = block if e.size < 0 else block[e.inner : e.inner + e.size]
        if check_of(idx[at : at + NAME_LEN], data) != e.check:
            raise self._mismatch(i)
        return data

    def _mismatch(self, i: int) -> CorruptNode:
        return CorruptNode(
            f"corrupt node {self.name_at(i)}: its record in {self.name} does not match its check"
        )

    def check(self) -> str | None:
        """What is wrong with the files as a whole (their checksums, the order of names)."""
        pack_sum, idx_sum = _SUMS.unpack_from(self.idx, len(self.idx) - _SUMS.size)
        if xxhash.xxh64_intdigest(self.idx[: len(self.idx) - 8]) != idx_sum:
            return "its index does not match its checksum"
        if xxhash.xxh64_intdigest(self.pack) != pack_sum:
            return "its records do not match their checksum"
        names = self.idx[_NAMES_AT : self.entries_at]
        previous = b""
        for at in range(0, len(names), NAME_LEN):
            name = names[at : at + NAME_LEN]
            if name <= previous:
                return "its index is not sorted"
            previous = name
        return None

    def still_here(self) -> bool:
        """Whether the index at this pack's path is still the one this reads (the caller
        holds the sweep lock: ``cas pack`` removes a pack it merged only then, and keeps one
        that a put wrote again meanwhile, whose index records that later put)."""
        try:
            return identity(os.stat(self.idx_path)) == self.identity
        except FileNotFoundError:
            return False

    def close(self) -> None:
        self.idx.close()
        self.pack.close()


def remove(directory: Path, name: str) -> None:
    """Remove a pack: its records first (it is gone for readers), then its index — never a
    moment with records and no index, which would read as a lost index."""
    for suffix in (".pack", ".idx"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / f"{name}{suffix}")


def remove_leftovers(directory: Path, keep: Iterable[str] = ()) -> None:
    """What a pack write killed midway left: its temp files, an index whose records never
    came, records whose index never came (written by an older uwf, which renamed the records
    first) — but the packs named in ``keep``, whose index was lost after they held the only
    copy of a node (damage: backend/fs/orphans.py). The caller holds the gc lock and the
    sweep lock exclusively, so no pack is being written meanwhile."""
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        return
    indexes = {e[:-4] for e in entries if e.endswith(".idx")}
    records = {e[:-5] for e in entries if e.endswith(".pack")}
    kept = set(keep)
    for entry in entries:
        orphan = entry.endswith(".pack") and entry[:-5] not in indexes | kept
        lone = entry.endswith(".idx") and entry[:-4] not in records
        if entry.startswith(TMP_PREFIX) or orphan or lone:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(directory / entry)


class Source(NamedTuple):
    """A node to pack: its name, how to read its JSON (None: leave it out), its last put."""

    name: str
    load: Callable[[], bytes | None]
    last_put: int


def dictionary(sample: Iterable[bytes]) -> bytes:
    """A preset dictionary from sample records: their last DICTIONARY_MAX bytes."""
    data = b"".join(sample)
    return data[-DICTIONARY_MAX:]


def index_bytes(
    names: bytearray, entries: array.array[int], pack_sum: int, version: int = 2
) -> bytes:
    """The .idx of records whose names and entries (block offset, block length, offset and
    length in the block, last put, check; version 1: offset, length, last put, check) are in
    write order."""
    magic, entry = (IDX_MAGIC, _ENTRY) if version == 2 else (V1_MAGICS[1], _ENTRY_V1)
    width = len(entry.format) - 1  # values per entry (the format's ">" aside)
    count = len(names) // NAME_LEN
    order = sorted(range(count), key=lambda i: names[i * NAME_LEN : (i + 1) * NAME_LEN])
    counts = [0] * FANOUT
    sorted_names = bytearray()
    sorted_entries = bytearray()
    for i in order:
        name = names[i * NAME_LEN : (i + 1) * NAME_LEN]
        counts[bucket(name)] += 1
        sorted_names += name
        sorted_entries += entry.pack(*entries[width * i : width * (i + 1)])
    fan, total = [], 0
    for c in counts:
        total += c
        fan.append(total)
    body = _HEAD.pack(magic, count) + _FAN.pack(*fan) + sorted_names + sorted_entries
    body += struct.pack(">Q", pack_sum)
    return bytes(body + struct.pack(">Q", xxhash.xxh64_intdigest(body)))
