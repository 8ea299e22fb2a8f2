"""The filesystem backend's state files, for tests that set them up or inspect them directly.

Most tests go through the CLI. These helpers serve the ones that must build a state no command
builds (a crash leftover, a hand edit, a thread on a missing node) or hold a step lock the way
a running step does.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from uwf.backend.base import ActiveThread, StepLock, ThreadInfo
from uwf.backend.fs import FsBackend
from uwf.backend.fs.nodes import FsStore
from uwf.backend.fs.state import encode_thread
from uwf.cas import codec
from uwf.cas.store import Store
from uwf.util import fsio
from uwf.util.base32 import NodeHash, check_hash
from uwf.util.jsonfmt import canonical
from uwf.util.ulid import ThreadId


class _Registry:
    def __init__(self, backend: FsBackend) -> None:
        self.backend = backend

    def read(self) -> dict[str, str]:
        return dict(self.backend.registry.read())

    @contextlib.contextmanager
    def edit(self) -> Iterator[dict[str, Any]]:
        """The raw mapping under the lock, written back as is (values need not be hashes)."""
        file = self.backend.registry.file
        with file.locked():
            mapping: dict[str, Any] = dict(file.read())
            yield mapping
            file.write(mapping, lambda v: v)


class RootFiles:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.backend = FsBackend(root)
        self.registry = _Registry(self.backend)

    def active(self) -> dict[str, str]:
        return {r.thread: r.head for r in self.backend.threads.active()}

    def head(self, thread: str) -> str | None:
        return self.backend.threads.head(ThreadId(thread))

    @contextlib.contextmanager
    def edit_threads(self) -> Iterator[dict[str, str]]:
        """Thread -> head under the threads.yaml lock; changes are written back (heads may be
        anything, as a hand edit could make them)."""
        file = self.backend.threads.file
        with file.locked():
            records = file.read()
            heads = {t: record.head for t, record in records.items()}
            before = dict(heads)
            yield heads
            if heads != before:
                out: dict[str, Any] = {}
                for thread, head in heads.items():
                    old = records.get(thread)
                    info = old.info if old is not None and old.head == head else ThreadInfo()
                    out[thread] = ActiveThread(ThreadId(thread), NodeHash(head), info)
                file.write(out, encode_thread)

    def append_history(
        self, thread: str, workflow: str, head: str, status: str, at_ms: int
    ) -> None:
        """Append a raw history line (as an archive that crashed before its rewrite would)."""
        line = {
            "thread": thread,
            "workflow": workflow,
            "head": head,
            "completedAt": at_ms,
            "status": status,
        }
        fsio.append_line(self.root / "history.jsonl", json.dumps(line, separators=(",", ":")))

    def hold_step(self, thread: str) -> contextlib.AbstractContextManager[StepLock]:
        """Hold the thread's step lock, as a running step does."""
        return self.backend.locks.step(ThreadId(thread), wait=True)


def open_store(root: Path) -> FsStore:
    """The node store of a storage root."""
    return FsBackend(root).nodes


def put_unchecked(store: Store, type_hash: str, payload: Any) -> str:
    """Store a node without validating it: a node no uwf command writes (one whose type has
    no schema node, a StepNode with a null detail), for readers that must tolerate it."""
    check_hash(type_hash, "type hash")
    payload = canonical(payload)
    h = codec.node_hash(type_hash, payload)
    store._store(h, type_hash, payload, typed=False)
    return h


def damage_packed_record(cas: Path, h: str) -> str:
    """Flip the bytes of the packed record of ``h`` (in the first pack that holds it) behind
    the store's back; returns that pack's name."""
    from uwf.backend.fs import packs
    from uwf.backend.fs.files import pack_names

    for name in pack_names(cas / "packs"):
        pack = packs.Pack(cas / "packs", name)
        try:
            i = pack.find(h.encode())
            if i < 0:
                continue
            offset, length, *_ = pack.entry(i)
        finally:
            pack.close()
        path = cas / "packs" / f"{name}.pack"
        data = bytearray(path.read_bytes())
        for k in range(offset, offset + length):
            data[k] ^= 0x55
        path.write_bytes(bytes(data))
        return name
    raise AssertionError(f"{h} is in no pack")


def lose_node(cas: Path, h: str) -> Callable[[], None]:
    """Take the node ``h`` out of the store behind its back, as a disk fault would: its loose
    file, or the whole pack that holds it (a step's nodes are one pack: its siblings go too);
    returns what puts it all back, as a restore from a backup would."""
    from uwf.backend.fs import packs
    from uwf.backend.fs.files import pack_names

    files = [cas / "objects" / h[:2] / h]
    if not files[0].exists():
        for name in pack_names(cas / "packs"):
            pack = packs.Pack(cas / "packs", name)
            try:
                held = pack.find(h.encode()) >= 0
            finally:
                pack.close()
            if held:
                files = [cas / "packs" / f"{name}{suffix}" for suffix in (".pack", ".idx")]
                break
        else:
            raise AssertionError(f"{h} is not stored")
    saved = {path: path.read_bytes() for path in files}
    for path in files:
        path.unlink()

    def restore() -> None:
        for path, data in reversed(saved.items()):  # the index last: the pack is whole
            path.write_bytes(data)

    return restore


def without_failures(data: bytes | None) -> dict[str, Any] | None:
    """threads.yaml as thread -> head or record, without the threads' last failures: a failed
    step records one (docs/format.md, "Thread state"), and that is the only change it may
    make. None for a missing file."""
    if data is None:
        return None
    records: dict[str, Any] = {}
    for line in data.decode("utf-8").splitlines():
        if not line.startswith('"'):
            continue
        ((thread, value),) = json.loads("{" + line + "}").items()
        if isinstance(value, dict):
            value.pop("failure", None)
            value = value["head"] if list(value) == ["head"] else value
        records[thread] = value
    return records


def step_state(root: Path) -> tuple[dict[str, Any] | None, bytes]:
    """What a failed step must leave as it was: the heads and waits of threads.yaml (its
    failures aside, ``without_failures``) and history.jsonl."""
    threads, history = root / "threads.yaml", root / "history.jsonl"
    return (
        without_failures(threads.read_bytes() if threads.exists() else None),
        history.read_bytes() if history.exists() else b"",
    )
