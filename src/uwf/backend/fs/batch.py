"""``put_many`` on the filesystem store: a batch of nodes written as one small pack.

docs/format.md, "The filesystem backend", in short: every node of the batch is checked as
``put`` checks it (``cas.batch.Batch``: a schema put earlier in the batch counts), then, under
the shared sweep lock (so that ``cas gc`` deletes nothing between the checks and the write):

- a node already stored as a loose file has its put recorded (the file's mtime) and is not
  written again (its content compared: a collision is refused);
- a node stored only in a pack, and the type of every node that is not one of uwf's own
  schemas (those are never collected), is copied into the new pack: the copy's last put is
  now, which is what gc judges its age by, as a put of it records it;
- every new node goes into the new pack, which is written as any pack is (temp files, both
  fsynced, renamed, the directory fsynced: three fsyncs for the whole batch); then the lines
  of the type index are appended, one ``write`` per type, without an fsync of their own.

That last point is deliberate. The index lists nodes that exist (a line is appended only
once its node is durable) but need not list every node: a crash between a node's write and
its line always could lose the line, which is why ``cas reindex`` rebuilds the index and gc
finds its roots among the nodes too. An fsync per type only narrowed that window from the
kernel's writeback delay (a power cut; a SIGKILL loses nothing that ``write`` returned) to
an instant, at the price of one fsync per type per step.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from uwf.backend.fs import packwrite
from uwf.backend.fs.packs import Source
from uwf.cas.batch import Batch
from uwf.cas.kept import size_of
from uwf.util import fsio
from uwf.util.base32 import NodeHash
from uwf.util.errors import NotFound
from uwf.util.jsonfmt import dumps

if TYPE_CHECKING:
    from uwf.backend.fs.files import NodeFiles
    from uwf.cas.store import Node, Store


def put_many(store: Store, files: NodeFiles, nodes: Sequence[tuple[str, Any]]) -> list[NodeHash]:
    """Check every node, then write the batch (``write``); their hashes, in order. ``files``
    are the store's files (``nodes.FsStore`` is both)."""
    batch = Batch(store)
    hashes = [batch.put(type_hash, payload) for type_hash, payload in nodes]
    write_checked(store, files, batch.pending)
    return hashes


def write_checked(store: Store, files: NodeFiles, pending: Mapping[NodeHash, Node]) -> None:
    """Write the nodes ``pending`` that a ``Batch`` over ``store`` checked (``write``), and
    keep them in this process, as ``put`` does (nodes never change)."""
    write(store, files, pending)
    kept = store.kept()
    for h, node in pending.items():
        kept.keep(h, node, size_of(node.payload))


def write(store: Store, files: NodeFiles, pending: Mapping[NodeHash, Node]) -> None:
    """Store the checked nodes ``pending`` (in order) as one pack; see the module."""
    from uwf.protocol import schemas

    pinned = set(schemas.hashes().every)  # gc roots: a put of them has nothing to record
    with files._writing():
        now = time.time_ns() // 1_000_000
        sources: list[Source] = []
        lines: dict[str, list[str]] = {}
        types: dict[str, None] = {}
        for h, node in pending.items():
            if node.type != h and node.type not in pending and node.type not in pinned:
                types[node.type] = None
            if _recorded(files, h, sources, now, fresh=False):
                store._same(h, node.type, node.payload)
                continue
            sources.append(_source(h, dumps(node.as_json()).encode(), now))
            lines.setdefault(node.type, []).append(h)
        for type_hash in types:
            if not _recorded(files, type_hash, sources, now):
                raise NotFound(f"unknown type: {type_hash} (no schema node with that hash)")
        if sources:
            name = packwrite.write_pack(files.pack_dir, sources, b"")
            if name is not None:
                files.add_pack(name)
        for type_hash, hashes in lines.items():
            fsio.append_lines(files.index_dir / type_hash, hashes, sync=False)


def _source(h: str, data: bytes, last_put: int) -> Source:
    return Source(h, lambda: data, last_put)


def _recorded(
    files: NodeFiles, h: str, sources: list[Source], now: int, *, fresh: bool = True
) -> bool:
    """Record a put of ``h`` if it is stored: the mtime of its loose file, else a copy of
    its packed record in ``sources``; False when it is not stored (nor readable: stored
    again as a new node, or refused as a type). A node of the batch is looked for in the
    packs as last listed (``fresh=False``): one packed since is only copied again, while
    listing the packs for each new node cost a directory listing per node."""
    found = files._touch(h, now * 1_000_000, fresh=fresh)
    if isinstance(found, bytes):
        sources.append(_source(h, found, now))
        return True
    return found
