"""Pack files: many nodes of the filesystem store in one file, found through a sorted index.

docs/format.md, "Packs", is the format; in short, all integers big-endian::

    pack-<NAME>.pack  "UWFPACK1", u32 dictionary length, the dictionary, then the records:
                      one raw DEFLATE stream per node (its JSON exactly as a loose file holds
                      it), compressed with the pack's preset dictionary
    pack-<NAME>.idx   "UWFIDX01", u32 count, u32 fan-out[512], the names (count x 13 ASCII
                      characters, ascending), count x (u64 offset, u32 length, u64 last put
                      in unix ms, u64 check: xxh64 of the name and the node's JSON),
                      u64 xxh64 of the .pack, u64 xxh64 of the .idx before it

``NAME`` is the 13-character hash of the .pack's bytes. A reader maps both files and finds a
name by binary search within its fan-out bucket (the first two characters); a process that
looks up many names in one pack builds a table of them once. A node was checked against its
name when it was packed; a read checks the inflated JSON against the record's ``check``,
which binds it to its name (``Pack.read``); ``cas verify`` re-hashes every node. A pack is
written as temp files, fsynced, renamed (the .pack first, the .idx last: a pack exists once
its index does), the directory fsynced; it is never changed afterwards, only removed whole.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

import xxhash

from uwf.util import fsio
from uwf.util.base32 import ALPHABET, NodeHash, encode64
from uwf.util.errors import CorruptNode, UwfError

if TYPE_CHECKING:
    import array

PACK_MAGIC = b"UWFPACK1"
IDX_MAGIC = b"UWFIDX01"
NAME_LEN = 13
FANOUT = 512  # buckets by the first two characters: 16 x 32 (a hash starts with 0-F)
_HEAD = struct.Struct(">8sI")  # magic, count (or dictionary length)
_FAN = struct.Struct(f">{FANOUT}I")
_ENTRY = struct.Struct(">QIQQ")  # offset in the .pack, length, last put (unix ms), check
_SUMS = struct.Struct(">QQ")
ENTRY_BYTES = NAME_LEN + _ENTRY.size  # what one node costs in the index
_NAMES_AT = _HEAD.size + _FAN.size
DICTIONARY_MAX = 16 << 10  # bytes of sample records in a pack's preset dictionary
LEVEL = 9
TMP_PREFIX = ".tmp-"  # as every temp file of uwf's (uwf.util.fsio)
_DIGIT = {ord(c): i for i, c in enumerate(ALPHABET)}


def bucket(name: bytes | bytearray) -> int:
    """The fan-out bucket of a name: its first two characters as a number below 512."""
    return _DIGIT[name[0]] * 32 + _DIGIT[name[1]]


class Entry(NamedTuple):
    offset: int
    length: int
    last_put: int
    check: int


def check_of(name: bytes, data: bytes) -> int:
    """A record's ``check``: XXH64 of the node's name (13 ASCII bytes) and its JSON."""
    return xxhash.xxh64_intdigest(name + data)


def _map(path: Path) -> mmap.mmap:
    fd = os.open(path, os.O_RDONLY)
    try:
        if os.fstat(fd).st_size == 0:
            raise ValueError("empty file")
        return mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
    finally:
        os.close(fd)


class Pack:
    """One pack, mapped: lookups by name, records by position. Opening reads two headers."""

    def __init__(self, directory: Path, name: str) -> None:
        self.name = name
        self.idx_path = directory / f"{name}.idx"
        self.pack_path = directory / f"{name}.pack"
        try:
            self.idx = _map(self.idx_path)
            self.pack = _map(self.pack_path)
        except ValueError:
            raise self.corrupt("an empty file") from None
        magic, count = _HEAD.unpack_from(self.idx)
        if magic != IDX_MAGIC or len(self.idx) != _NAMES_AT + count * ENTRY_BYTES + _SUMS.size:
            raise self.corrupt("not a pack index of this format")
        self.count = count
        self.fan = _FAN.unpack_from(self.idx, _HEAD.size)
        self.entries_at = _NAMES_AT + count * NAME_LEN
        magic, dict_len = _HEAD.unpack_from(self.pack)
        self.records_at = _HEAD.size + dict_len
        if magic != PACK_MAGIC or self.records_at > len(self.pack) or self.fan[-1] != count:
            raise self.corrupt("not a pack of this format")
        self.zdict = bytes(self.pack[_HEAD.size : self.records_at])
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
        return Entry(*_ENTRY.unpack_from(self.idx, self.entries_at + i * _ENTRY.size))

    def size_of(self, i: int) -> int:
        """The bytes the node at ``i`` takes here: its record and its index entry."""
        return self.entry(i).length + ENTRY_BYTES

    def read(self, i: int) -> bytes:
        """The node JSON at position ``i``, as it was packed: CorruptNode when its record
        cannot be inflated or does not match its ``check`` (name and JSON)."""
        offset, length, _, check = _ENTRY.unpack_from(self.idx, self.entries_at + i * _ENTRY.size)
        if offset < self.records_at or offset + length > len(self.pack):
            raise CorruptNode(
                f"corrupt node {self.name_at(i)}: its record lies outside {self.name}"
            )
        inflate = zlib.decompressobj(-15, self.zdict) if self.zdict else zlib.decompressobj(-15)
        try:
            data = inflate.decompress(self.pack[offset : offset + length])
        except zlib.error:
            data = b""
        if not inflate.eof or inflate.unused_data:
            raise CorruptNode(
                f"corrupt node {self.name_at(i)}: its record in {self.name} does not inflate"
            )
        at = _NAMES_AT + i * NAME_LEN
        if check_of(self.idx[at : at + NAME_LEN], data) != check:
            raise CorruptNode(
                f"corrupt node {self.name_at(i)}: its record in {self.name} does not match "
                "its check"
            )
        return data

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

    def close(self) -> None:
        self.idx.close()
        self.pack.close()


def remove(directory: Path, name: str) -> None:
    """Remove a pack: its index first (it is gone for readers), then its records."""
    for suffix in (".idx", ".pack"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / f"{name}{suffix}")


def remove_leftovers(directory: Path, keep: Iterable[str] = ()) -> None:
    """Temp files of a pack write that never finished, and records whose index never came
    (the caller holds the gc lock: no pack is being written) — but the packs named in
    ``keep``, whose index was lost after they held the only copy of a node (damage:
    backend/fs/orphans.py)."""
    try:
        entries = os.listdir(directory)
    except FileNotFoundError:
        return
    indexes = {e[:-4] for e in entries if e.endswith(".idx")}
    kept = set(keep)
    for entry in entries:
        orphan = entry.endswith(".pack") and entry[:-5] not in indexes | kept
        if entry.startswith(TMP_PREFIX) or orphan:
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


def _index(names: bytearray, entries: array.array[int], pack_sum: int) -> bytes:
    """The .idx of records whose names and entries (offset, length, last put, check) are in
    write order."""
    count = len(names) // NAME_LEN
    order = sorted(range(count), key=lambda i: names[i * NAME_LEN : (i + 1) * NAME_LEN])
    counts = [0] * FANOUT
    sorted_names = bytearray()
    sorted_entries = bytearray()
    for i in order:
        name = names[i * NAME_LEN : (i + 1) * NAME_LEN]
        counts[bucket(name)] += 1
        sorted_names += name
        sorted_entries += _ENTRY.pack(*entries[4 * i : 4 * i + 4])
    fan, total = [], 0
    for c in counts:
        total += c
        fan.append(total)
    body = _HEAD.pack(IDX_MAGIC, count) + _FAN.pack(*fan) + sorted_names + sorted_entries
    body += struct.pack(">Q", pack_sum)
    return bytes(body + struct.pack(">Q", xxhash.xxh64_intdigest(body)))


def write(directory: Path, sources: Iterable[Source], zdict: bytes) -> str | None:
    """Write one pack of ``sources`` (records in that order, each name once) and its index;
    return the pack's name, None when no source had anything to pack. Durable on return.

    Each source's bytes must be the JSON of the node its name is the hash of (checked by the
    caller: ``packing`` re-hashes loose nodes, and records read from a pack were checked)."""
    import array

    if zdict:
        base = zlib.compressobj(LEVEL, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, zdict)
    else:
        base = zlib.compressobj(LEVEL, zlib.DEFLATED, -15, 9)
    directory.mkdir(parents=True, exist_ok=True)
    tmp = f"{TMP_PREFIX}pack-{os.getpid()}-{os.urandom(4).hex()}"
    tmp_pack, tmp_idx = directory / f"{tmp}.pack", directory / f"{tmp}.idx"
    names = bytearray()
    entries = array.array("Q")  # offset, length, last put, check of each record, in order
    digest = xxhash.xxh64()
    try:
        with open(tmp_pack, "wb", buffering=1 << 20) as out:
            head = _HEAD.pack(PACK_MAGIC, len(zdict)) + zdict
            out.write(head)
            digest.update(head)
            offset = len(head)
            for source in sources:
                data = source.load()
                if data is None:
                    continue
                deflate = base.copy()
                record = deflate.compress(data) + deflate.flush()
                out.write(record)
                digest.update(record)
                key = source.name.encode("ascii")
                names += key
                entries.extend((offset, len(record), source.last_put, check_of(key, data)))
                offset += len(record)
            out.flush()
            os.fsync(out.fileno())
        if not names:
            return None
        name = f"pack-{encode64(digest.intdigest())}"
        with open(tmp_idx, "wb") as out:
            out.write(_index(names, entries, digest.intdigest()))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp_pack, directory / f"{name}.pack")
        os.replace(tmp_idx, directory / f"{name}.idx")
    except OSError as exc:
        raise UwfError(f"cannot write a pack in {directory}: {exc.strerror or exc}") from None
    finally:
        for path in (tmp_pack, tmp_idx):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    fsio.fsync_dir(directory)
    return name
