"""Writing a pack (docs/format.md, "Packs"): blocks of consecutive nodes, then the index.

Apart from ``packs`` (the format and reading) so that a process that only reads packs imports
none of it."""

from __future__ import annotations

import array
import contextlib
import os
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import BinaryIO

import xxhash

from uwf.backend.fs.packs import (
    _HEAD,
    BLOCK,
    LEVEL,
    PACK_MAGIC,
    TMP_PREFIX,
    Source,
    check_of,
    index_bytes,
)
from uwf.util import fsio
from uwf.util.base32 import encode64
from uwf.util.errors import UwfError


class _Blocks:
    """Writes nodes into blocks of up to ``BLOCK`` bytes, each one DEFLATE stream."""

    def __init__(self, out: BinaryIO, offset: int, zdict: bytes) -> None:
        if zdict:
            self.base = zlib.compressobj(
                LEVEL, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, zdict
            )
        else:
            self.base = zlib.compressobj(LEVEL, zlib.DEFLATED, -15, 9)
        self.out = out
        self.offset = offset
        self.digest = xxhash.xxh64()
        self.names = bytearray()
        self.entries = array.array("Q")  # six values per node, in write order
        self.data = bytearray()
        self.pending: list[tuple[bytes, int, int, int, int]] = []  # name, inner, size, put, check

    def add(self, name: bytes, data: bytes, last_put: int) -> None:
        if self.data and len(self.data) + len(data) > BLOCK:
            self.flush()
        self.pending.append((name, len(self.data), len(data), last_put, check_of(name, data)))
        self.data += data

    def flush(self) -> None:
        if not self.pending:
            return
        deflate = self.base.copy()
        block = deflate.compress(bytes(self.data)) + deflate.flush()
        self.out.write(block)
        self.digest.update(block)
        for name, inner, size, last_put, check in self.pending:
            self.names += name
            self.entries.extend((self.offset, len(block), inner, size, last_put, check))
        self.offset += len(block)
        self.data.clear()
        self.pending.clear()


def _create(path: Path) -> BinaryIO:
    """``path`` opened for writing; its directory made only when missing (the first pack)."""
    try:
        return open(path, "wb", buffering=1 << 20)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "wb", buffering=1 << 20)


def write_pack(directory: Path, sources: Iterable[Source], zdict: bytes) -> str | None:
    """Write one pack of ``sources`` (nodes in that order, each name once) and its index;
    return the pack's name, None when no source had anything to pack. Durable on return.

    Each source's bytes must be the JSON of the node its name is the hash of (checked by the
    caller: ``packing`` re-hashes loose nodes, and records read from a pack were checked)."""
    tmp = f"{TMP_PREFIX}pack-{os.getpid()}-{os.urandom(4).hex()}"
    tmp_pack, tmp_idx = directory / f"{tmp}.pack", directory / f"{tmp}.idx"
    left = [tmp_pack, tmp_idx]  # the temp files not renamed yet: removed on the way out
    try:
        with _create(tmp_pack) as out:
            head = _HEAD.pack(PACK_MAGIC, len(zdict)) + zdict
            out.write(head)
            blocks = _Blocks(out, len(head), zdict)
            blocks.digest.update(head)
            for source in sources:
                data = source.load()
                if data is not None:
                    blocks.add(source.name.encode("ascii"), data, source.last_put)
            blocks.flush()
            out.flush()
            os.fsync(out.fileno())
        if not blocks.names:
            return None
        name = f"pack-{encode64(blocks.digest.intdigest())}"
        with open(tmp_idx, "wb") as out:
            out.write(index_bytes(blocks.names, blocks.entries, blocks.digest.intdigest()))
            out.flush()
            os.fsync(out.fileno())
        # The index first: an index without its records is nothing to a reader (skipped,
        # then removed by the next `cas pack`), while records without their index are a
        # lost index, which `cas verify` reports (docs/format.md, "Packs").
        os.replace(tmp_idx, directory / f"{name}.idx")
        left.remove(tmp_idx)
        os.replace(tmp_pack, directory / f"{name}.pack")
        left.remove(tmp_pack)
    except OSError as exc:
        raise UwfError(f"cannot write {directory}: {exc.strerror or exc}") from None
    finally:
        for path in left:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
    fsio.fsync_dir(directory)
    return name
