"""The filesystem store: ``<root>/cas/objects/<2 chars>/<HASH>`` JSON files, read-only.

Opening it reads nothing. A node is written once (temp file, fsync, link, fsync of the
directory) and never rewritten, so a crash leaves it either absent or whole; a file whose
content does not hash to its name is reported as corrupt, never used. The type index is
``<root>/cas/index/<TYPEHASH>``, one hash per line, appended after the node is durable.

Coordination with ``cas gc`` (see ``uwf.engine.gc``): every write holds a shared ``flock`` on
``<root>/locks/cas-sweep.lock`` and the sweep holds it exclusively, so a node is never
deleted between a writer's "it exists" and the writer linking to it. A put that finds its
node already stored refreshes the file's mtime: gc judges a node's age by the later of its
timestamp and its mtime.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

from uwf.cas.store import Node, NodeInfo, Store, decode_node
from uwf.util import fsio
from uwf.util.base32 import is_hash
from uwf.util.errors import CorruptNode, UwfError
from uwf.util.jsonfmt import dumps

SWEEP_LOCK = "cas-sweep.lock"


class FsStore(Store):
    def __init__(self, cas_dir: Path, lock_dir: Path | None = None) -> None:
        self.dir = cas_dir
        self.objects = cas_dir / "objects"
        self._objects = str(self.objects)  # reads build paths as strings: cheaper than Path
        self.index_dir = cas_dir / "index"
        # Outside cas/ so the store directory holds nothing but nodes and the index.
        self.lock_dir = lock_dir if lock_dir is not None else cas_dir.parent / "locks"

    def path(self, h: str) -> Path:
        return self.objects / h[:2] / h

    def _file(self, h: str) -> str:
        return f"{self._objects}/{h[:2]}/{h}"

    def _exists(self, h: str) -> bool:
        return os.path.exists(self._file(h))

    def _load(self, h: str) -> Node | None:
        try:
            with open(self._file(h), "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            data = None
        if data is None:
            return None
        try:
            record = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise CorruptNode(f"corrupt node {h}: not valid JSON") from None
        return decode_node(h, record)

    def _create(self, h: str, node: Node) -> bool:
        data = dumps(node.as_dict()).encode()
        return fsio.create_once(self.path(h), data, mode=0o444)

    def _refresh(self, h: str) -> bool:
        now = time.time_ns()  # the clock of node timestamps, not the kernel's coarser one
        try:
            os.utime(self.path(h), ns=(now, now))  # allowed on a 0444 file for its owner
            return True
        except FileNotFoundError:
            return False
        except OSError:  # another user's store: the node is there, its age stays as it was
            return self._exists(h)

    @contextlib.contextmanager
    def _flock(self, operation: int) -> Iterator[None]:
        path = self.lock_dir / SWEEP_LOCK
        try:
            self.lock_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise UwfError(f"cannot lock {path}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, operation)
            yield
        finally:
            os.close(fd)  # releases the lock

    def _writing(self) -> contextlib.AbstractContextManager[None]:
        return self._flock(fcntl.LOCK_SH)

    def sweeping(self) -> contextlib.AbstractContextManager[None]:
        return self._flock(fcntl.LOCK_EX)

    def info(self, h: str) -> NodeInfo | None:
        try:
            with open(self.path(h), "rb") as fh:
                st = os.fstat(fh.fileno())
                data = fh.read()
        except FileNotFoundError:
            return None
        try:
            record = json.loads(data)
        except (ValueError, UnicodeDecodeError):
            raise CorruptNode(f"corrupt node {h}: not valid JSON") from None
        node = decode_node(h, record)
        return NodeInfo(node.type, max(node.timestamp, st.st_mtime_ns // 1_000_000), st.st_size)

    def _index_add(self, type_hash: str, h: str) -> None:
        fsio.append_line(self.index_dir / type_hash, h)

    def index(self, type_hash: str) -> list[str]:
        data = fsio.read_bytes(self.index_dir / type_hash)
        if data is None:
            return []
        seen: dict[str, None] = {}
        for line in data.decode("ascii", "replace").splitlines():
            line = line.strip()
            if is_hash(line):  # a torn last line from a crash is skipped, never trusted
                seen[line] = None
        return list(seen)

    def iter_hashes(self) -> Iterator[str]:
        try:
            fans = sorted(os.scandir(self.objects), key=lambda e: e.name)
        except FileNotFoundError:
            return
        for fan in fans:
            if not fan.is_dir() or len(fan.name) != 2:
                continue
            for entry in sorted(os.listdir(fan.path)):
                if is_hash(entry) and entry[:2] == fan.name:
                    yield entry

    def delete(self, h: str) -> int:
        path = self.path(h)
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return 0
        return size

    def write_index(self, index: dict[str, list[str]]) -> None:
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

    def set_index(self, type_hash: str, hashes: list[str]) -> None:
        path = self.index_dir / type_hash
        if hashes:
            fsio.atomic_write(path, "".join(f"{h}\n" for h in hashes).encode())
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
