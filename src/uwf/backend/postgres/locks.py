"""Step locks and the gc lock on PostgreSQL: session-level advisory locks.

A step lock is ``pg_advisory_lock(<63-bit hash of the thread id>)`` held by a connection of
its own for the whole step, so that it dies with its holder: a worker killed with SIGKILL,
or a network that goes away, closes the session and the server releases the lock. While it
holds the lock, the holder writes a row into ``uwf_holders`` (its pid, host, since, role,
agent, the log of a background run, and the server process id of its session); a row counts
only while ``pg_locks`` shows that very session holding that very lock, so a row a dead
holder left behind is never believed, and readers on any machine answer "is it running"
without taking a lock. A stop request (``thread stop``) is a flag on the current holder's row:
the next holder's upsert resets it, so it never reaches a later holding.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Collection, Iterator
from typing import Any

import xxhash

from uwf.backend.base import Holder, Locks, StepLock
from uwf.backend.postgres.db import Db
from uwf.backend.postgres.schema import GC_KEY
from uwf.util.errors import Busy
from uwf.util.ulid import ThreadId, now_ms

_FIELDS = ("thread", "pid", "host", "since", "role", "agent", "log", "worker")  # a Holder
_COLUMNS = ", ".join(_FIELDS)
_HELD = f"""
SELECT {", ".join("h." + f for f in _FIELDS)} FROM uwf_holders h
JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.pid = h.backend_pid
 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
 AND l.classid::bigint = h.lock_hi AND l.objid::bigint = h.lock_lo AND l.objsubid = 1
"""
HELD_THREADS = f"SELECT held.thread FROM ({_HELD}) AS held"
_UPSERT = """
INSERT INTO uwf_holders (thread, lock_hi, lock_lo, backend_pid, pid, host, since, role, agent,
 log, worker, stop_requested)
SELECT %s, %s, %s, pg_backend_pid(), %s, %s, %s, NULL, NULL, %s, %s, false FROM ({lock}) AS l
ON CONFLICT (thread) DO UPDATE SET lock_hi = EXCLUDED.lock_hi, lock_lo = EXCLUDED.lock_lo,
 backend_pid = EXCLUDED.backend_pid, pid = EXCLUDED.pid, host = EXCLUDED.host,
 since = EXCLUDED.since, role = NULL, agent = NULL, log = EXCLUDED.log,
 worker = EXCLUDED.worker, stop_requested = false
RETURNING 1
"""
# the step lock and its holder row in one statement: the row is written only when the lock
# was taken (waiting for it, or not), so no row means busy
_CLAIM = _UPSERT.format(lock="SELECT 1 WHERE pg_try_advisory_lock(%s)")
_CLAIM_WAIT = _UPSERT.format(lock="SELECT pg_advisory_lock(%s)")
_RELEASE = (
    "WITH mine AS (DELETE FROM uwf_holders WHERE thread = %s AND backend_pid = pg_backend_pid())"
    " SELECT pg_advisory_unlock(%s)"
)


def _holder(row: tuple[Any, ...]) -> Holder:
    thread, pid, host, since, role, agent, log, worker = row
    return Holder(
        ThreadId(thread),
        pid=pid,
        host=host,
        since=since,
        role=role,
        agent=agent,
        log=log,
        worker=worker,
    )


def lock_key(thread: str) -> int:
    """The advisory lock key of a thread: 63 bits of XXH64 of its id (never negative)."""
    return xxhash.xxh64_intdigest(f"uwf-step:{thread}".encode()) & ((1 << 63) - 1)


class _PgStepLock(StepLock):
    def __init__(self, db: Db, conn: Any, thread: ThreadId) -> None:
        self.db, self.conn, self.thread = db, conn, thread

    def note(self, *, role: str, agent: str) -> None:
        with contextlib.suppress(Exception), self.db.errors():  # informational only
            self.conn.execute(
                "UPDATE uwf_holders SET role = %s, agent = %s"
                " WHERE thread = %s AND backend_pid = pg_backend_pid()",
                (role, agent, self.thread),
            )

    def stop_requested(self) -> bool:
        with self.db.errors():
            row = self.conn.execute(
                "SELECT stop_requested FROM uwf_holders"
                " WHERE thread = %s AND backend_pid = pg_backend_pid()",
                (self.thread,),
            ).fetchone()
        return bool(row and row[0])


class PgLocks(Locks):
    def __init__(self, db: Db) -> None:
        self.db = db
        self._idle: list[Any] = []  # lock connections holding no lock, for reuse
        self._mutex = threading.Lock()

    # -- lock connections -----------------------------------------------------------------
    def _take(self) -> Any:
        self.db.conn()  # the first statement of a process creates or migrates the schema
        with self._mutex:
            while self._idle:
                conn = self._idle.pop()
                if not conn.closed and not conn.broken:
                    return conn
        return self.db.connect()

    def _give_back(self, conn: Any) -> None:
        if conn.closed or conn.broken:
            return
        with self._mutex:
            self._idle.append(conn)

    def connection(self) -> Any:
        """A lock connection of the pool, for a session-level lock of another kind (fleet
        limits: ``uwf.backend.postgres.limits``); ``give_back`` it, or close it."""
        return self._take()

    def give_back(self, conn: Any) -> None:
        """Return a connection that holds no lock to the pool."""
        self._give_back(conn)

    def close(self) -> None:
        with self._mutex:
            idle, self._idle = self._idle, []
        for conn in idle:
            with contextlib.suppress(Exception):
                conn.close()

    @contextlib.contextmanager
    def _advisory(self, key: int, wait: bool, busy: str) -> Iterator[Any]:
        """Hold advisory lock ``key`` on a connection of its own for the block.

        Any failure while taking or releasing it closes the connection, which releases
        whatever the session held.
        """
        conn = self._take()
        try:
            with self.db.errors():
                if wait:
                    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
                else:
                    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                    if not row[0]:
                        self._give_back(conn)
                        conn = None
                        raise Busy(busy)
        except BaseException:
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
            raise
        try:
            yield conn
        except BaseException:
            self._release(conn, key)
            raise
        self._release(conn, key)

    def _release(self, conn: Any, key: int) -> None:
        try:
            with self.db.errors():
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        except Exception:
            with contextlib.suppress(Exception):
                conn.close()  # the server releases the lock with the session
            return
        self._give_back(conn)

    # -- the interface --------------------------------------------------------------------
    @contextlib.contextmanager
    def step(
        self, thread: ThreadId, *, wait: bool, log: str | None = None, worker: str | None = None
    ) -> Iterator[StepLock]:
        """Take the lock and write the holder row in one statement; delete the row and
        release the lock in one statement (a step costs the lock two round trips)."""
        key = lock_key(thread)
        conn = self._take()
        holder = (
            thread,
            key >> 32,
            key & 0xFFFFFFFF,
            os.getpid(),
            socket.gethostname(),
            now_ms(),
            log,
            worker,
        )
        try:
            with self.db.errors():
                row = conn.execute(_CLAIM_WAIT if wait else _CLAIM, (*holder, key)).fetchone()
        except BaseException:
            with contextlib.suppress(Exception):
                conn.close()  # the server releases whatever the session took
            raise
        if row is None:
            self._give_back(conn)
            raise Busy(f"thread {thread} is busy")
        try:
            yield _PgStepLock(self.db, conn, thread)
        finally:
            try:
                with self.db.errors():
                    conn.execute(_RELEASE, (thread, key))
            except Exception:
                with contextlib.suppress(Exception):
                    conn.close()  # the server releases the lock with the session
            else:
                self._give_back(conn)

    def running(self) -> set[ThreadId]:
        return {ThreadId(row[0]) for row in self.db.all(_HELD)}

    def holders(self) -> list[Holder]:
        return [_holder(row) for row in self.db.all(_HELD + " ORDER BY h.thread")]

    def is_running(self, thread: ThreadId) -> bool:
        return self.holder(thread) is not None

    def _one(self, sql: str, thread: ThreadId) -> Holder | None:
        """The holder row ``sql`` (with the thread as its one parameter) returns, if any."""
        row = self.db.one(sql, (thread,))
        return _holder(row) if row is not None else None

    def holder(self, thread: ThreadId) -> Holder | None:
        return self._one(_HELD + " WHERE h.thread = %s", thread)

    def request_stop(self, thread: ThreadId) -> Holder | None:
        return self._one(
            "UPDATE uwf_holders SET stop_requested = true"
            f" WHERE thread = %s AND thread IN ({HELD_THREADS}) RETURNING {_COLUMNS}",
            thread,
        )

    def clear_stale(self, thread: ThreadId) -> Holder | None:
        return self._one(
            "DELETE FROM uwf_holders"
            f" WHERE thread = %s AND thread NOT IN ({HELD_THREADS}) RETURNING {_COLUMNS}",
            thread,
        )

    def sweep(self, archived: Collection[ThreadId], *, dry_run: bool = False) -> int:
        """Delete the holder rows of archived threads that no session holds (a released lock
        deletes its own row: only a holder that died leaves one)."""
        wanted = sorted(archived)
        unheld = f"thread = ANY(%s) AND thread NOT IN ({HELD_THREADS})"
        if dry_run:
            row = self.db.one(f"SELECT count(*) FROM uwf_holders WHERE {unheld}", (wanted,))
            return int(row[0]) if row is not None else 0
        with self.db.errors():
            return int(
                self.db.execute(f"DELETE FROM uwf_holders WHERE {unheld}", (wanted,)).rowcount
            )

    @contextlib.contextmanager
    def gc(self, *, background: bool = False) -> Iterator[None]:  # no automatic packing here
        with self._advisory(GC_KEY, False, "cas gc or cas pack is already running"):
            yield
