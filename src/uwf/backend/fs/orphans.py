"""Packs whose index is missing (docs/reliability.md, "Repairing damaged state").

A ``.pack`` without its ``.idx`` is one of two things. A crash of ``cas pack`` between its two
renames leaves one whose every node is still in its loose file (loose files go only once the
index exists): a leftover, which the next ``cas pack`` removes. An index deleted afterwards
(by hand, by a disk) leaves one holding nodes found nowhere else: those nodes read as
missing, so threads whose chains run through them fail. That is damage: ``cas verify``
reports it, ``cas gc`` refuses to run, no ``cas pack`` removes the pack, and ``cas reindex``
rebuilds its index from the records themselves (each record is a complete raw DEFLATE
stream, so they can be read one after another without the index).
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

from uwf.backend.fs import packs
from uwf.util.errors import CorruptNode, UwfError

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


def records(path: Path) -> Iterator[tuple[int, int, bytes]]:
    """Each record of the pack file ``path``, in order: (offset, length, the node's JSON).
    CorruptNode when the file is not a pack or a record does not inflate."""
    data = memoryview(path.read_bytes())
    if len(data) < packs._HEAD.size:
        raise CorruptNode(f"corrupt pack {path.name}: too short")
    magic, dict_len = packs._HEAD.unpack_from(data)
    start = packs._HEAD.size + dict_len
    if magic != packs.PACK_MAGIC or start > len(data):
        raise CorruptNode(f"corrupt pack {path.name}: not a pack of this format")
    zdict = bytes(data[packs._HEAD.size : start])
    offset = start
    while offset < len(data):
        inflate = zlib.decompressobj(-15, zdict) if zdict else zlib.decompressobj(-15)
        out, pos = bytearray(), offset
        try:
            while not inflate.eof and pos < len(data):
                chunk = data[pos : pos + _CHUNK]
                out += inflate.decompress(chunk)
                pos += len(chunk) - len(inflate.unused_data)
        except zlib.error:
            raise CorruptNode(f"corrupt pack {path.name}: a record does not inflate") from None
        if not inflate.eof:
            raise CorruptNode(f"corrupt pack {path.name}: its last record is cut short")
        yield offset, pos - offset, bytes(out)
        offset = pos


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
    for _, _, data in records(pack_dir / f"{name}.pack"):
        h = node_name(data)
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
    order: dict[str, tuple[int, int, int]] = {}
    for offset, length, data in records(path):
        h = node_name(data)
        order.setdefault(h, (offset, length, packs.check_of(h.encode("ascii"), data)))
    keys = bytearray()
    entries = array.array("Q")
    for h, (offset, length, check) in order.items():
        keys += h.encode("ascii")
        entries.extend((offset, length, last_put, check))
    tmp = pack_dir / f"{packs.TMP_PREFIX}{name}.idx"
    try:
        with open(tmp, "wb") as out:
            out.write(packs._index(keys, entries, digest))
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
