"""Fleet limits on PostgreSQL (docs/format.md, "Limits"): advisory-lock slots and a table of
recent starts, shared by every machine using the store.

``concurrency: N`` is N session-level advisory locks (63 bits of XXH64 of
``uwf-limit:<name>:<i>``); a holder takes the first it can without waiting, on a lock
connection of its own for the step, and the server frees it when the session ends (exit,
SIGKILL, a lost network). ``perMinute: M`` counts the rows of ``uwf_limit_starts`` for the
name in the last 60 s, in a transaction serialised by a transaction-level advisory lock on
the name, and inserts one when there is room. A pause (a provider that answered 429) is a row
of ``uwf_limit_pauses``: its end, only ever pushed later.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import xxhash

from uwf.backend.base import Limits
from uwf.backend.postgres.db import Db, run
from uwf.backend.postgres.locks import PgLocks
from uwf.util.errors import HeldBack
from uwf.util.ulid import now_ms

WINDOW_MS = 60_000


def limit_key(name: str, slot: int) -> int:
    return xxhash.xxh64_intdigest(f"uwf-limit:{name}:{slot}".encode()) & ((1 << 63) - 1)


class PgLimits(Limits):
    def __init__(self, db: Db, locks: PgLocks) -> None:
        self.db, self.locks = db, locks

    @contextlib.contextmanager
    def hold(self, name: str, concurrency: int | None, per_minute: int | None) -> Iterator[None]:
        held = self._slot(name, concurrency) if concurrency is not None else None
        try:
            if per_minute is not None:
                self._start(name, per_minute)
            yield
        finally:
            if held is not None:
                self._release(*held)

    def pause(self, name: str, until: int) -> int:
        row = self.db.one(
            "INSERT INTO uwf_limit_pauses (name, until) VALUES (%s, %s) ON CONFLICT (name)"
            " DO UPDATE SET until = GREATEST(uwf_limit_pauses.until, EXCLUDED.until)"
            " RETURNING until",
            (name, until),
        )
        return int(row[0]) if row is not None else until

    def paused(self, name: str) -> int | None:
        row = self.db.one(
            "SELECT until FROM uwf_limit_pauses WHERE name = %s AND until > %s", (name, now_ms())
        )
        return int(row[0]) if row is not None else None

    def _slot(self, name: str, concurrency: int) -> tuple[Any, int]:
        conn = self.locks.connection()
        try:
            with self.db.errors():
                for i in range(concurrency):
                    key = limit_key(name, i)
                    row = run(conn, "SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                    if row is not None and row[0]:
                        return conn, key
        except BaseException:
            conn.close()  # closing the session releases whatever it took
            raise
        self.locks.give_back(conn)
        raise HeldBack("concurrency")

    def _release(self, conn: Any, key: int) -> None:
        try:
            with self.db.errors():
                run(conn, "SELECT pg_advisory_unlock(%s)", (key,))
        except BaseException:
            conn.close()
            raise
        self.locks.give_back(conn)

    def _start(self, name: str, per_minute: int) -> None:
        now = now_ms()
        with self.db.transaction():
            self.db.execute("SELECT pg_advisory_xact_lock(%s)", (limit_key(name, -1),))
            self.db.execute(
                "DELETE FROM uwf_limit_starts WHERE name = %s AND at <= %s",
                (name, now - WINDOW_MS),
            )
            row = self.db.one("SELECT count(*) FROM uwf_limit_starts WHERE name = %s", (name,))
            if row is not None and int(row[0]) >= per_minute:
                raise HeldBack("perMinute")
            self.db.execute("INSERT INTO uwf_limit_starts (name, at) VALUES (%s, %s)", (name, now))
