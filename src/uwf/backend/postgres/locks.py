"""Step locks and the gc lock on PostgreSQL: session-level advisory locks.

A step lock is ``pg_advisory_lock(<63-bit hash of the thread id>)`` held by the session of
the stepping thread's one connection (``Db.conn``: a cold step opens one connection, not
two) for the whole step, so that it dies with its holder: a worker killed with SIGKILL, or
a network that goes away, closes the session and the server releases the lock. A session
never takes a lock it already holds (advisory locks are re-entrant within a session: a
second step of the same thread in the same process is refused as busy, as another
process's would be).

Taking it is one round trip (``uwf_claim``, schema version 13): the lock, the holder row in
``uwf_holders`` (its pid, host, since, the role and agent when the step planned before it
took the lock, the log of a background run, the worker, and the server process id of its
session), a ``LISTEN`` on the thread's channel (a head move or an
archive notifies it: ``moved``), and the thread's row read under the lock, handed to the
step (``StepLock.current``). ``note`` adds the role and agent once the step knows them.
``uwf_holders`` is unlogged: a row counts only while ``pg_locks`` shows that very session
holding that very lock, so a row a dead holder left behind is never believed, and a server
crash, which ends every session, loses nothing a reader would believe. Readers on any
machine answer "is it running" without taking a lock. Releasing unlocks; it deletes the row
only of a background run (``thread stop`` tells a run that died from one that ended by its
row); a foreground holder's row stays, unbelieved, until the next holder's claim overwrites
it or gc sweeps it with its archived thread. A stop request (``thread stop``) is a flag on
the current holder's row: the next claim resets it, so it never reaches a later holding.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Collection, Iterator
from typing import Any

import xxhash

from uwf.backend.base import ActiveThread, Holder, Locks, StepLock, ThreadTable
from uwf.backend.postgres.db import Db, require, run, usable
from uwf.backend.postgres.schema import BUSY, GC_KEY
from uwf.backend.postgres.state import COLUMNS, record_of
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
_CLAIM = f"SELECT {COLUMNS} FROM uwf_claim(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"


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
    def __init__(self, db: Db, conn: Any, thread: ThreadId, row: tuple[Any, ...] | None) -> None:
        self.db, self.conn, self.thread = db, conn, thread
        self._row: tuple[Any, ...] | None = row
        self._fresh = True  # the row was read under the lock and not handed out yet
        self.noted: tuple[str, str] | None = None

    def current(self, threads: ThreadTable, thread: ThreadId) -> ActiveThread | None:
        """The row ``uwf_claim`` read under the lock, the first time; then a new read."""
        if self._fresh and thread == self.thread:
            self._fresh = False
            return record_of(self._row) if self._row is not None else None
        return threads.get(thread)

    def note(self, *, role: str, agent: str) -> None:
        if self.noted == (role, agent):
            return
        self.noted = (role, agent)
        with contextlib.suppress(Exception), self.db.errors():  # informational only
            run(
                self.conn,
                "UPDATE uwf_holders SET role = %s, agent = %s"
                " WHERE thread = %s AND backend_pid = pg_backend_pid()",
                (role, agent, self.thread),
            )

    def stop_requested(self) -> bool:
        with self.db.errors():
            row = run(
                self.conn,
                "SELECT stop_requested FROM uwf_holders"
                " WHERE thread = %s AND backend_pid = pg_backend_pid()",
                (self.thread,),
            ).fetchone()
        return bool(row and row[0])

    def moved(self) -> bool | None:
        """Whether the thread's channel was notified since the lock was taken (its head
        moved, or it was archived); None when the session that listens is gone (ask the
        head instead). Reads what the server has sent: no round trip."""
        conn = self.conn
        if not usable(conn) or not conn.listening:
            return None
        try:
            conn.poll()
        except Exception:
            return None
        channel = f"uwf_{self.thread}"
        found = any(n.channel == channel for n in conn.notifies)
        conn.notifies[:] = [n for n in conn.notifies if n.channel != channel]
        return found


class PgLocks(Locks):
    def __init__(self, db: Db) -> None:
        self.db = db
        self._idle: list[Any] = []  # lock connections holding no lock, for reuse
        self._mutex = threading.Lock()

    # -- lock connections of their own (fleet limits, gc) ---------------------------------
    def _take(self) -> Any:
        self.db.conn()  # the first statement of a process creates or migrates the schema
        with self._mutex:
            while self._idle:
                conn = self._idle.pop()
                if usable(conn):
                    return conn
        return self.db.connect()

    def _give_back(self, conn: Any) -> None:
        if not usable(conn):
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
                    run(conn, "SELECT pg_advisory_lock(%s)", (key,))
                else:
                    row = run(conn, "SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                    if not row or not row[0]:
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
        finally:
            self._unlock(conn, "SELECT pg_advisory_unlock(%s)", (key,))
            self._give_back(conn)

    def _unlock(self, conn: Any, sql: str, params: tuple[Any, ...]) -> None:
        """Release on ``conn``; a failure closes it (the server releases the lock with the
        session)."""
        try:
            with self.db.errors():
                run(conn, sql, params)
        except Exception:
            with contextlib.suppress(Exception):
                conn.close()

    # -- the interface --------------------------------------------------------------------
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
        """Take the lock, read the thread's row, write the holder row (with ``note``'s role
        and agent: then it is written once) and listen, in one round trip (``uwf_claim``);
        release in one (``uwf_release``)."""
        key = lock_key(thread)
        conn = self.db.conn()
        if key in conn.held:  # re-entrant in a session: refused like another holder
            raise Busy(f"thread {thread} is busy")
        args = (thread, key, key >> 32, key & 0xFFFFFFFF, wait, os.getpid(), _host(), now_ms())
        driver = require()
        try:
            with self.db.errors():
                try:
                    role, agent = note if note is not None else (None, None)
                    rows = run(conn, _CLAIM, (*args, role, agent, log, worker)).fetchall()
                except driver.Error as exc:
                    if getattr(exc, "pgcode", None) == BUSY:
                        raise Busy(f"thread {thread} is busy") from None
                    raise
        except Busy:
            raise
        except BaseException:
            self._unlock(conn, "SELECT pg_advisory_unlock(%s)", (key,))  # if it was taken
            raise
        conn.held.add(key)
        conn.listening = True
        channel = f"uwf_{thread}"  # a notification of an earlier holding is not for us
        conn.notifies[:] = [n for n in conn.notifies if n.channel != channel]
        lock = _PgStepLock(self.db, conn, thread, rows[0] if rows else None)
        lock.noted = note
        try:
            yield lock
        finally:
            conn.held.discard(key)
            conn.listening = bool(conn.held)
            if usable(conn):
                self._unlock(conn, "SELECT uwf_release(%s, %s, %s)", (thread, key, log is not None))

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
        """Delete the holder rows of archived threads that no session holds (a foreground
        holder's row stays when it releases its lock; a background run's goes)."""
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


_HOST: list[str] = []


def _host() -> str:
    if not _HOST:
        _HOST.append(socket.gethostname())
    return _HOST[0]
