"""The thread-table primitives of a backend whose active threads are one mapping of records
that it reads and writes whole under a lock (the filesystem's ``threads.yaml``, the memory
backend's dict).

``ThreadTable`` (``uwf.backend.table``) holds the semantics of ``move``, ``wait``, ``fail``,
``retry`` and ``archive``; this class answers its five primitives from two of the backend's own:
``_edit`` (the records under the lock, written back when changed) and ``_append`` (one
history entry, durable before the record goes); and start keys from ``_keys``/``_save_keys``.
"""

from __future__ import annotations

import abc
import contextlib

from uwf.backend import tree
from uwf.backend.base import (
    ActiveThread,
    Failure,
    HistoryEntry,
    RetryPolicy,
    ThreadInfo,
    ThreadTable,
    Waiting,
)
from uwf.backend.tree import FanOutLimits
from uwf.cas.store import Store
from uwf.util.base32 import NodeHash
from uwf.util.errors import Conflict
from uwf.util.storable import storable
from uwf.util.ulid import ThreadId


class RecordThreads(ThreadTable):
    """A thread table kept as ``{thread: ActiveThread}`` plus an append-only history."""

    def __init__(self, nodes: Store) -> None:
        self.nodes = nodes  # ``move`` never names a node the store does not hold

    @abc.abstractmethod
    def _edit(self) -> contextlib.AbstractContextManager[dict[str, ActiveThread]]:
        """The active records under an exclusive lock, written back if changed."""

    @abc.abstractmethod
    def _append(self, entry: HistoryEntry) -> None:
        """Add ``entry`` to the history (the caller holds the ``_edit`` lock)."""

    @abc.abstractmethod
    def _keys(self) -> contextlib.AbstractContextManager[dict[str, ThreadId]]:
        """The start keys (``<scope>/<key>`` -> thread) under an exclusive lock of their own
        (taken before the records' lock, never after); written back when changed, at once
        by ``_save_keys``."""

    @abc.abstractmethod
    def _save_keys(self, keys: dict[str, ThreadId]) -> None:
        """Write the start keys durably (the caller holds the ``_keys`` lock)."""

    def keyed(self, scope: str, key: str) -> ThreadId | None:
        with self._keys() as keys:
            return keys.get(f"{scope}/{key}")

    def create_keyed(
        self, scope: str, key: str, thread: ThreadId, head: NodeHash, info: ThreadInfo
    ) -> tuple[ThreadId, bool]:
        # The key is written before the thread: a start that dies in between left a key that
        # names no thread, and the next start with that key creates it under that id.
        with self._keys() as keys:
            found = keys.get(f"{scope}/{key}")
            if found is not None:
                if self.get(found) is not None or self.history_entry(found) is not None:
                    return found, False
                thread = found
            else:
                keys[f"{scope}/{key}"] = thread
                self._save_keys(keys)
            self.create(thread, head, info)
            return thread, True

    def _move(
        self, thread: ThreadId, expected: NodeHash, new: NodeHash
    ) -> tuple[bool, NodeHash | None]:
        with self._edit() as records:
            record = records.get(thread)
            if record is None or record.head != expected or not self.nodes.has(new):
                return False, record.head if record is not None else None
            records[thread] = ActiveThread(thread, new, record.info)
            return True, expected

    def _wait(self, thread: ThreadId, waiting: Waiting) -> tuple[bool, NodeHash | None]:
        with self._edit() as records:
            record = records.get(thread)
            if record is None or record.head != waiting.head:
                return False, record.head if record is not None else None
            records[thread] = record._replace(
                waiting=waiting._replace(reason=storable(waiting.reason))
            )  # a failure stays
            return True, record.head

    def _fan_out(
        self,
        thread: ThreadId,
        waiting: Waiting,
        children: list[ActiveThread],
        limits: FanOutLimits,
    ) -> tuple[bool, NodeHash | None]:
        with self._edit() as records:
            record = records.get(thread)
            if record is None or record.head != waiting.head:
                return False, record.head if record is not None else None
            if any(child.thread in records for child in children):
                raise Conflict(f"thread {children[0].thread} already exists")
            place = tree.locate(thread, records.get)
            refused = tree.refusal(thread, place, len(children), limits)
            if refused is not None:
                raise refused
            if children:  # counted on the root, in the same write
                root = records[place.root]
                info = root.info._replace(descendants=place.started + len(children))
                records[place.root] = root._replace(info=info)
                record = records[thread]
            records[thread] = record._replace(
                waiting=waiting._replace(reason=storable(waiting.reason))
            )
            for child in children:  # a child's task is rendered from an agent's output
                records[child.thread] = child._replace(
                    info=child.info._replace(task=storable(child.info.task))
                )
            return True, record.head

    def _fail(
        self, thread: ThreadId, failure: Failure, policy: RetryPolicy
    ) -> tuple[Failure | None, NodeHash | None]:
        with self._edit() as records:
            record = records.get(thread)
            if record is None or record.head != failure.head:
                return None, record.head if record is not None else None
            stored = failure._replace(error=storable(failure.error)).after(record.failure, policy)
            records[thread] = record._replace(failure=stored)
            return stored, record.head

    def _prioritize(self, thread: ThreadId, priority: int) -> int | None:
        with self._edit() as records:
            record = records.get(thread)
            if record is None:
                return None
            records[thread] = record._replace(info=record.info._replace(priority=priority))
            return record.info.priority

    def _retry(self, thread: ThreadId) -> tuple[Failure | None, NodeHash | None]:
        with self._edit() as records:
            record = records.get(thread)
            if record is None:
                return None, None
            if record.failure is not None:
                records[thread] = record._replace(failure=None)
            return record.failure, record.head

    def _archive(
        self,
        thread: ThreadId,
        expected: NodeHash | None,
        workflow: NodeHash,
        status: str,
        at_ms: int,
    ) -> tuple[bool, NodeHash | None]:
        with self._edit() as records:
            record = records.get(thread)
            if record is None or (expected is not None and record.head != expected):
                return False, record.head if record is not None else None
            info = record.info
            task = storable(info.task)
            entry = HistoryEntry(
                thread, workflow, record.head, at_ms, status, task, cwd=info.cwd, parent=info.parent
            )
            self._append(entry)
            del records[thread]
            return True, record.head
