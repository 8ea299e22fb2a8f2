"""The PostgreSQL thread table and registry: ``uwf_threads``, ``uwf_history``, ``uwf_registry``.

A head moves by ``UPDATE … WHERE head = <expected>`` in one statement that also checks the
new head is a stored node; archiving deletes the active row and inserts the history row in
one transaction, so a thread is never both active and archived, nor neither. Waiting marks
and what a thread was created with (workflow, task) are columns of its row.
"""

from __future__ import annotations

from typing import Any

from uwf.backend.base import (
    ActiveThread,
    HistoryEntry,
    Registry,
    ThreadInfo,
    ThreadTable,
    Waiting,
)
from uwf.backend.postgres.db import Db
from uwf.backend.postgres.schema import REGISTRY_KEY
from uwf.util.base32 import NodeHash
from uwf.util.errors import Conflict, NotFound
from uwf.util.ulid import ThreadId, now_ms

_COLUMNS = "thread, head, workflow, task, wait_role, wait_since, wait_head, wait_reason"


def _record(row: tuple[Any, ...]) -> ActiveThread:
    thread, head, workflow, task, role, since, wait_head, reason = row
    waiting = None
    if role is not None and wait_head == head and since is not None:
        waiting = Waiting(role, int(since), NodeHash(head), reason)
    return ActiveThread(ThreadId(thread), NodeHash(head), ThreadInfo(workflow, task), waiting)


def _entry(row: tuple[Any, ...]) -> HistoryEntry:
    thread, workflow, head, at, status, task = row
    return HistoryEntry(ThreadId(thread), NodeHash(workflow), NodeHash(head), int(at), status, task)


class PgThreads(ThreadTable):
    def __init__(self, db: Db) -> None:
        self.db = db

    def head(self, thread: ThreadId) -> NodeHash | None:
        row = self.db.one("SELECT head FROM uwf_threads WHERE thread = %s", (thread,))
        return NodeHash(row[0]) if row is not None else None

    def get(self, thread: ThreadId) -> ActiveThread | None:
        row = self.db.one(f"SELECT {_COLUMNS} FROM uwf_threads WHERE thread = %s", (thread,))
        return _record(row) if row is not None else None

    def active(self) -> list[ActiveThread]:
        return [_record(r) for r in self.db.all(f"SELECT {_COLUMNS} FROM uwf_threads")]

    def runnable(self, also: str = "TRUE") -> list[ActiveThread]:
        """Threads not waiting, oldest first; ``also``: a further SQL condition (constant)."""
        rows = self.db.all(
            f"SELECT {_COLUMNS} FROM uwf_threads"
            f" WHERE (wait_role IS NULL OR wait_head IS DISTINCT FROM head) AND {also}"
            " ORDER BY thread"
        )
        return [_record(r) for r in rows]

    def create(self, thread: ThreadId, head: NodeHash, info: ThreadInfo) -> None:
        row = self.db.one(
            "INSERT INTO uwf_threads (thread, head, workflow, task, moved)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (thread) DO NOTHING RETURNING 1",
            (thread, head, info.workflow, info.task, now_ms()),
        )
        if row is None:
            raise Conflict(f"thread {thread} already exists")

    def _why(self, thread: ThreadId, expected: NodeHash, what: str) -> Exception:
        """Why a conditional update of ``thread`` changed no row."""
        head = self.head(thread)
        if head is None:
            return self.not_active(thread)
        return self.conflict(thread, head, what, expected)

    def move(self, thread: ThreadId, expected: NodeHash, new: NodeHash) -> None:
        row = self.db.one(
            "UPDATE uwf_threads SET head = %s, moved = %s,"
            " wait_role = NULL, wait_since = NULL, wait_head = NULL, wait_reason = NULL"
            " WHERE thread = %s AND head = %s"
            " AND EXISTS (SELECT 1 FROM uwf_nodes WHERE hash = %s) RETURNING 1",
            (new, now_ms(), thread, expected, new),
        )
        if row is not None:
            return
        if self.head(thread) == expected:
            raise NotFound(f"CAS node not found: {new}")
        raise self._why(thread, expected, "move")

    def wait(self, thread: ThreadId, waiting: Waiting) -> None:
        row = self.db.one(
            "UPDATE uwf_threads SET wait_role = %s, wait_since = %s, wait_head = %s,"
            " wait_reason = %s WHERE thread = %s AND head = %s RETURNING 1",
            (waiting.role, waiting.since, waiting.head, waiting.reason, thread, waiting.head),
        )
        if row is None:
            raise self._why(thread, waiting.head, "wait")

    def archive(
        self,
        thread: ThreadId,
        workflow: NodeHash,
        status: str,
        at_ms: int,
        expected: NodeHash | None = None,
    ) -> NodeHash:
        self.check_status(status)
        with self.db.transaction():
            row = self.db.one(
                "DELETE FROM uwf_threads WHERE thread = %s AND (%s::text IS NULL OR head = %s)"
                " RETURNING head, task",
                (thread, expected, expected),
            )
            if row is None:
                raise self._why(thread, expected or NodeHash(""), "archive")
            self.db.execute(
                "INSERT INTO uwf_history (thread, workflow, head, completed_at, status, task)"
                " VALUES (%s, %s, %s, %s, %s, %s)",
                (thread, workflow, row[0], at_ms, status, row[1]),
            )
        return NodeHash(row[0])

    def history(self) -> list[HistoryEntry]:
        rows = self.db.all(
            "SELECT thread, workflow, head, completed_at, status, task FROM uwf_history"
            " ORDER BY seq"
        )
        return [_entry(r) for r in rows]

    def history_entry(self, thread: ThreadId) -> HistoryEntry | None:
        row = self.db.one(
            "SELECT thread, workflow, head, completed_at, status, task FROM uwf_history"
            " WHERE thread = %s ORDER BY seq DESC LIMIT 1",
            (thread,),
        )
        return _entry(row) if row is not None else None


class PgRegistry(Registry):
    """``uwf_registry``: name -> hash, with a version counted up at every change."""

    def __init__(self, db: Db) -> None:
        self.db = db

    def read(self) -> dict[str, NodeHash]:
        rows = self.db.all("SELECT name, hash FROM uwf_registry ORDER BY name")
        return {name: NodeHash(h) for name, h in rows}

    def get(self, name: str) -> NodeHash | None:
        row = self.db.one("SELECT hash FROM uwf_registry WHERE name = %s", (name,))
        return NodeHash(row[0]) if row is not None else None

    def set(self, name: str, h: NodeHash) -> NodeHash | None:
        with self.db.transaction():
            self.db.execute("SELECT pg_advisory_xact_lock(%s)", (REGISTRY_KEY,))
            previous = self.get(name)
            if previous is None:
                self.db.execute(
                    "INSERT INTO uwf_registry (name, hash, version, updated)"
                    " VALUES (%s, %s, 1, %s)",
                    (name, h, now_ms()),
                )
            elif previous != h:
                self.db.execute(
                    "UPDATE uwf_registry SET hash = %s, version = version + 1, updated = %s"
                    " WHERE name = %s",
                    (h, now_ms(), name),
                )
        return previous
