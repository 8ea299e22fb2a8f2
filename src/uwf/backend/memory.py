"""The memory backend: the whole interface in one process's memory (unit tests, dry runs).

It passes the same conformance class as every backend; its locks are ``threading`` locks, so
in-process concurrency behaves like separate processes on the filesystem.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path

from uwf.backend.base import (
    ActiveThread,
    Backend,
    HistoryEntry,
    Holder,
    Limits,
    Locks,
    Registry,
    StepLock,
    ThreadInfo,
)
from uwf.backend.records import RecordThreads
from uwf.backend.workers import WorkerRecord, Workers
from uwf.cas.store import Node, NodeInfo, Store, decode_node
from uwf.util.base32 import NodeHash
from uwf.util.errors import Busy, Conflict, HeldBack
from uwf.util.jsonfmt import dumps
from uwf.util.storable import storable
from uwf.util.ulid import ThreadId, now_ms


class MemoryStore(Store):
    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self._index: dict[str, dict[NodeHash, None]] = {}
        self._last_put: dict[str, int] = {}  # later puts of existing nodes (gc's grace)

    def _exists(self, h: str) -> bool:
        return h in self.nodes

    def _load(self, h: str) -> Node | None:
        node = self.nodes.get(h)
        if node is None:
            return None
        return decode_node(h, node.as_json())

    def _create(self, h: NodeHash, node: Node) -> bool:
        if h in self.nodes:
            return False
        self.nodes[h] = node
        return True

    def _refresh(self, h: str) -> bool:
        if h not in self.nodes:
            return False
        self._last_put[h] = time.time_ns() // 1_000_000
        return True

    def _index_add(self, type_hash: str, h: NodeHash) -> None:
        self._index.setdefault(type_hash, {})[h] = None

    def index(self, type_hash: str) -> list[NodeHash]:
        return list(self._index.get(type_hash, {}))

    def iter_hashes(self) -> Iterator[NodeHash]:
        yield from sorted(NodeHash(h) for h in self.nodes)

    def delete(self, h: str) -> int:
        node = self.nodes.pop(h, None)
        self._last_put.pop(h, None)
        return 0 if node is None else len(dumps(node.as_json()))

    def write_index(self, index: Mapping[str, Sequence[NodeHash]]) -> None:
        self._index = {t: dict.fromkeys(hs) for t, hs in index.items()}

    def set_index(self, type_hash: str, hashes: Sequence[NodeHash]) -> None:
        if hashes:
            self._index[type_hash] = dict.fromkeys(hashes)
        else:
            self._index.pop(type_hash, None)

    def info(self, h: str) -> NodeInfo | None:
        node = self._load(h)
        if node is None:
            return None
        last_put = max(node.timestamp, self._last_put.get(h, 0))
        return NodeInfo(node.type, last_put, len(dumps(node.as_json())))


class MemoryThreads(RecordThreads):
    def __init__(self, nodes: Store) -> None:
        super().__init__(nodes)
        self._active: dict[str, ActiveThread] = {}
        self._history: list[HistoryEntry] = []
        self._mutex = threading.Lock()
        self._start_keys: dict[str, ThreadId] = {}
        self._keys_mutex = threading.Lock()

    def head(self, thread: ThreadId) -> NodeHash | None:
        record = self._active.get(thread)
        return record.head if record is not None else None

    def get(self, thread: ThreadId) -> ActiveThread | None:
        return self._active.get(thread)

    def active(self) -> list[ActiveThread]:
        return list(self._active.values())

    def create(self, thread: ThreadId, head: NodeHash, info: ThreadInfo) -> None:
        with self._edit() as records:
            if thread in records:
                raise Conflict(f"thread {thread} already exists")
            records[thread] = ActiveThread(thread, head, info._replace(task=storable(info.task)))

    @contextlib.contextmanager
    def _edit(self) -> Iterator[dict[str, ActiveThread]]:
        with self._mutex:
            yield self._active

    def _append(self, entry: HistoryEntry) -> None:
        self._history.append(entry)

    @contextlib.contextmanager
    def _keys(self) -> Iterator[dict[str, ThreadId]]:
        with self._keys_mutex:
            yield self._start_keys

    def _save_keys(self, keys: dict[str, ThreadId]) -> None:
        pass  # the dict is the store

    def history(self) -> list[HistoryEntry]:
        return list(self._history)

    def history_entry(self, thread: ThreadId) -> HistoryEntry | None:
        found = None
        for entry in self._history:
            if entry.thread == thread:
                found = entry
        return found


class MemoryRegistry(Registry):
    def __init__(self) -> None:
        self._names: dict[str, NodeHash] = {}
        self._mutex = threading.Lock()

    def read(self) -> dict[str, NodeHash]:
        return dict(self._names)

    def set(self, name: str, h: NodeHash) -> NodeHash | None:
        with self._mutex:
            previous = self._names.get(name)
            self._names[name] = h
        return previous


class _MemoryStepLock(StepLock):
    def __init__(self, holder: Holder, held: dict[ThreadId, _MemoryStepLock]) -> None:
        self.holder = holder
        self.stop = False
        held[holder.thread] = self

    def note(self, *, role: str, agent: str) -> None:
        h = self.holder
        self.holder = h._replace(role=role, agent=agent)

    def stop_requested(self) -> bool:
        return self.stop


class MemoryLocks(Locks):
    def __init__(self) -> None:
        self._locks: dict[ThreadId, threading.Lock] = {}
        self._held: dict[ThreadId, _MemoryStepLock] = {}
        self._mutex = threading.Lock()
        self._gc = threading.Lock()

    @contextlib.contextmanager
    def step(
        self,
        thread: ThreadId,
        *,
        wait: bool,
        log: str | None = None,
        worker: str | None = None,
        note: tuple[str, str] | None = None,
    ) -> Iterator[StepLock]:
        with self._mutex:
            lock = self._locks.setdefault(thread, threading.Lock())
        if not lock.acquire(blocking=wait):
            raise Busy(f"thread {thread} is busy")
        try:
            role, agent = note if note is not None else (None, None)
            holder = Holder(thread, os.getpid(), None, now_ms(), role, agent, log, worker)
            yield _MemoryStepLock(holder, self._held)
        finally:
            self._held.pop(thread, None)
            lock.release()

    def running(self) -> set[ThreadId]:
        return set(self._held)

    def holder(self, thread: ThreadId) -> Holder | None:
        held = self._held.get(thread)
        return held.holder if held is not None else None

    def request_stop(self, thread: ThreadId) -> Holder | None:
        held = self._held.get(thread)
        if held is None:
            return None
        held.stop = True
        return held.holder

    def clear_stale(self, thread: ThreadId) -> Holder | None:
        return None  # a holder in this process cannot die and leave its record

    def sweep(self, archived: Collection[ThreadId], *, dry_run: bool = False) -> int:
        swept = 0
        with self._mutex:
            for thread in set(archived) & set(self._locks):
                lock = self._locks[thread]
                if not lock.acquire(blocking=False):
                    continue  # held: a step still stopping
                try:
                    if not dry_run:
                        del self._locks[thread]
                    swept += 1
                finally:
                    lock.release()
        return swept

    @contextlib.contextmanager
    def gc(self, *, background: bool = False) -> Iterator[None]:
        if not self._gc.acquire(blocking=False):
            raise Busy("cas gc or cas pack is already running")
        try:
            yield
        finally:
            self._gc.release()


class MemoryLimits(Limits):
    """Limits within one process: counters under a mutex."""

    def __init__(self) -> None:
        self._running: dict[str, int] = {}
        self._starts: dict[str, list[int]] = {}
        self._pauses: dict[str, int] = {}
        self._mutex = threading.Lock()

    def pause(self, name: str, until: int) -> int:
        with self._mutex:
            self._pauses[name] = max(until, self._pauses.get(name, 0))
            return self._pauses[name]

    def paused(self, name: str) -> int | None:
        until = self._pauses.get(name)
        return until if until is not None and until > now_ms() else None

    @contextlib.contextmanager
    def hold(self, name: str, concurrency: int | None, per_minute: int | None) -> Iterator[None]:
        with self._mutex:
            if concurrency is not None and self._running.get(name, 0) >= concurrency:
                raise HeldBack("concurrency")
            now = now_ms()
            recent = [t for t in self._starts.get(name, []) if t > now - 60_000]
            if per_minute is not None and len(recent) >= per_minute:
                raise HeldBack("perMinute")
            self._starts[name] = [*recent, now]
            self._running[name] = self._running.get(name, 0) + 1
        try:
            yield
        finally:
            with self._mutex:
                self._running[name] -= 1


class MemoryWorkers(Workers):
    """The worker registry in a dict."""

    def __init__(self) -> None:
        self._records: dict[str, WorkerRecord] = {}
        self._mutex = threading.Lock()

    def beat(self, record: WorkerRecord) -> None:
        with self._mutex:
            self._records[record.id] = record

    def records(self) -> list[WorkerRecord]:
        with self._mutex:
            return sorted(self._records.values(), key=lambda r: (r.started, r.id))

    def prune(self, before: int) -> int:
        with self._mutex:
            old = [key for key, r in self._records.items() if r.beat < before]
            for key in old:
                del self._records[key]
        return len(old)


class MemoryBackend(Backend):
    """Nothing on disk but what lives in ``root`` on every backend: config, .env, logs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.nodes: MemoryStore = MemoryStore()
        self.threads = MemoryThreads(self.nodes)
        self.registry = MemoryRegistry()
        self.locks = MemoryLocks()
        self.limits = MemoryLimits()
        self.workers = MemoryWorkers()

    @property
    def name(self) -> str:
        return "memory"
