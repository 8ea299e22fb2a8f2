"""Packs whose index is missing (docs/reliability.md, "Repairing damaged state").

A ``.pack`` without its ``.idx`` is one of two things. A crash of ``cas pack`` between its two
renames leaves one whose every node is still in its loose file (loose files go only once the
index exists): a leftover, which the next ``cas pack`` removes. An index deleted afterwards
(by hand, by a disk) leaves one holding nodes found nowhere else: those nodes read as
missing, so threads whose chains run through them fail. That is damage: ``cas verify``
reports it, ``cas gc`` refuses to run, no ``cas pack`` removes the pack, and ``cas reindex``
rebuilds its index from the pack itself: each block (version 1: each node) is a complete
raw DEFLATE stream, so the streams can be read one after another without the index, and a
block's nodes are consecutive JSON objects.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from uwf.backend.fs import packs
from uwf.util.errors import CorruptNode, UwfError
from uwf.util.tuples import NamedTuple

if TYPE_CHECKING:
    from uwf.util.outputs import PackDamage

_CHUNK = 1 << 16


def names(pack_dir: Path) -> list[str]:
    """The packs in ``pack_dir`` that have records but no index."""
    try:
        entries = set(os.listdir(pack_dir))
    except FileNotFoundError:
        return []
    return sorted(
        e[:-5]
        for e in entries
        if e.startswith("pack-") and e.endswith(".pack") and f"{e[:-5]}.idx" not in entries
    )


class Record(NamedTuple):
    """A node found in a pack without its index: where it is, and its JSON. ``at`` is the
    index entry's place part: (block offset, block length, offset and length in the inflated
    block) in a version-2 pack, (offset, length) in a version-1 pack."""

    at: tuple[int, ...]
    data: bytes


def records(path: Path) -> tuple[int, Iterator[Record]]:
    """The pack file ``path``'s version and its nodes, in order. CorruptNode when the file
    is not a pack or a stream does not inflate."""
    data = memoryview(path.read_bytes())
    if len(data) < packs._HEAD.size:
        raise CorruptNode(f"corrupt pack {path.name}: too short")
    magic, dict_len = packs._HEAD.unpack_from(data)
    start = packs._HEAD.size + dict_len
    if magic not in (packs.PACK_MAGIC, packs.V1_MAGICS[0]) or start > len(data):
        raise CorruptNode(f"corrupt pack {path.name}: not a pack of this format")
    version = 2 if magic == packs.PACK_MAGIC else 1
    zdict = bytes(data[packs._HEAD.size : start])
    return version, _nodes(path.name, data, start, zdict, version)


def _nodes(
    name: str, data: memoryview, offset: int, zdict: bytes, version: int
) -> Iterator[Record]:
    for at, length, inflated in _streams(name, data, offset, zdict):
        if version == 1:  # one node per stream
            yield Record((at, length), inflated)
            continue
        for inner, size in _split(name, inflated):  # a block: consecutive nodes' JSON
            yield Record((at, length, inner, size), inflated[inner : inner + size])


def _streams(
    name: str, data: memoryview, offset: int, zdict: bytes
) -> Iterator[tuple[int, int, bytes]]:
    """Each raw DEFLATE stream from ``offset`` on: (offset, length, inflated bytes)."""
    while offset < len(data):
        inflate = zlib.decompressobj(-15, zdict) if zdict else zlib.decompressobj(-15)
        out, pos = bytearray(), offset
        try:
            while not inflate.eof and pos < len(data):
                chunk = data[pos : pos + _CHUNK]
                out += inflate.decompress(chunk)
                pos += len(chunk) - len(inflate.unused_data)
        except zlib.error:
            raise CorruptNode(f"corrupt pack {name}: a block does not inflate") from None
        if not inflate.eof:
            raise CorruptNode(f"corrupt pack {name}: its last block is cut short")
        yield offset, pos - offset, bytes(out)
        offset = pos


def _split(name: str, block: bytes) -> Iterator[tuple[int, int]]:
    """(offset, length) in bytes of each JSON object of a block, one after another."""
    decoder = json.JSONDecoder()
    text = block.decode("utf-8", "surrogatepass")
    at, byte_at = 0, 0
    while at < len(text):
        try:
            _, end = decoder.raw_decode(text, at)
        except ValueError:
            raise CorruptNode(f"corrupt pack {name}: a block holds no node") from None
        size = len(text[at:end].encode("utf-8", "surrogatepass"))
        yield byte_at, size
        at, byte_at = end, byte_at + size


def node_name(data: bytes) -> str:
    """The hash of a node from its JSON (``{"type","payload","timestamp"}``)."""
    from uwf.cas import codec, schema

    try:
        record = json.loads(data)
        type_hash, payload = record["type"], record["payload"]
    except (ValueError, KeyError, TypeError):
        raise CorruptNode("corrupt pack record: not a node") from None
    if type_hash == schema.meta_hash() and codec.self_typed_hash(payload) == type_hash:
        return str(type_hash)
    return codec.stored_hash(type_hash, payload)


def only_here(pack_dir: Path, name: str, elsewhere: Callable[[str], bool]) -> list[str]:
    """The nodes of the index-less pack ``name`` that ``elsewhere`` cannot find."""
    found = []
    for record in records(pack_dir / f"{name}.pack")[1]:
        h = node_name(record.data)
        if not elsewhere(h):
            found.append(h)
    return found


def rebuild(pack_dir: Path, name: str) -> int:
    """Write the index of the pack ``name`` from its records; the number of nodes. The pack
    keeps its name (the hash of its bytes, checked here) and its records' last put is the
    pack file's mtime."""
    import array

    import xxhash

    path = pack_dir / f"{name}.pack"
    whole = path.read_bytes()
    digest = xxhash.xxh64_intdigest(whole)
    if f"pack-{_name_of(digest)}" != name:
        raise CorruptNode(f"corrupt pack {name}: its records do not match its name")
    last_put = path.stat().st_mtime_ns // 1_000_000
    version, found = records(path)
    order: dict[str, tuple[tuple[int, ...], int]] = {}
    for record in found:
        h = node_name(record.data)
        order.setdefault(h, (record.at, packs.check_of(h.encode("ascii"), record.data)))
    keys = bytearray()
    entries = array.array("Q")
    for h, (at, check) in order.items():
        keys += h.encode("ascii")
        entries.extend((*at, last_put, check))
    tmp = pack_dir / f"{packs.TMP_PREFIX}{name}.idx"
    try:
        with open(tmp, "wb") as out:
            out.write(packs.index_bytes(keys, entries, digest, version))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, pack_dir / f"{name}.idx")
    except OSError as exc:
        raise UwfError(f"cannot write {pack_dir / name}.idx: {exc.strerror or exc}") from None
    finally:
        if tmp.exists():
            tmp.unlink()
    return len(order)


def _name_of(digest: int) -> str:
    from uwf.util.base32 import encode64

    return encode64(digest)


def found(pack_dir: Path, elsewhere: Callable[[str], bool]) -> dict[str, list[str] | None]:
    """Each pack without an index that holds nodes ``elsewhere`` cannot find: those nodes
    (None when its records cannot even be read). A crash leftover holds none: left out."""
    out: dict[str, list[str] | None] = {}
    for name in names(pack_dir):
        try:
            unique: list[str] | None = only_here(pack_dir, name, elsewhere)
        except (CorruptNode, OSError):
            unique = None
        if unique is None or unique:
            out[name] = unique
    return out


def damage(pack_dir: Path, orphans: dict[str, list[str] | None]) -> list[PackDamage]:
    """``cas verify``'s line for each pack of ``orphans`` (``found``)."""
    damaged: list[PackDamage] = []
    for name, unique in orphans.items():
        what = (
            f"{len(unique)} nodes only it holds cannot be read; `uwf cas reindex` rebuilds "
            "the index"
            if unique is not None
            else "its records cannot be read either"
        )
        problem = f"{pack_dir / name}.pack has no index ({name}.idx): {what}"
        damaged.append({"pack": name, "problem": problem})
    return damaged


def repair(pack_dir: Path, orphans: dict[str, list[str] | None]) -> int:
    """Rebuild the index of each pack of ``orphans`` whose records can be read; how many."""
    rebuilt = 0
    for name, unique in orphans.items():
        if unique is not None:
            rebuild(pack_dir, name)
            rebuilt += 1
    return rebuilt


def hint(pack_dir: Path) -> str:
    """Why a node may be missing: a pack that lost its index (named), else nothing."""
    lost = names(pack_dir)
    if not lost:
        return ""
    return (
        f" ({pack_dir / lost[0]}.pack has no index: `uwf cas verify` says what is "
        "damaged, `uwf cas reindex` rebuilds the index)"
    )
