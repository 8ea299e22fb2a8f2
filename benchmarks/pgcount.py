"""What one step costs a PostgreSQL server, counted on the benchmark's durable server.

Around a step (a cold process, or a worker's marginal step: ``marginal``), for one database:

* **statements**: the calls ``pg_stat_statements`` counted for the database (top level,
  utility statements included: ``BEGIN``, ``COMMIT``, ``SET`` count);
* **connections**: the sessions ``pg_stat_database`` counted for it;
* **write commits**: the commit records the WAL gained (``pg_walinspect`` over the LSNs
  before and after) — each one a synchronous commit's WAL flush, unless the transaction
  turned ``synchronous_commit`` off;
* **WAL flushes**: ``pg_stat_wal.wal_sync`` (the server's fsyncs of its WAL, whoever made
  them: a backend at commit, the WAL writer for asynchronous commits);
* **WAL bytes**: the distance between the LSNs.

The server runs nothing else while it counts (the benchmark's own, one step at a time), so
the cluster-wide figures (WAL) are the step's. Statistics other than ``pg_stat_statements``
reach the shared counters when a backend exits or has been idle a while; a count therefore
waits until the step's connections are closed and the counters stop moving (``settle``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FIELDS = ("statements", "connections", "write_commits", "wal_flushes", "wal_bytes")


@dataclass
class Counts:
    statements: float = 0.0
    connections: float = 0.0
    write_commits: float = 0.0
    wal_flushes: float = 0.0
    wal_bytes: float = 0.0

    def __sub__(self, other: Counts) -> Counts:
        return Counts(*(getattr(self, f) - getattr(other, f) for f in FIELDS))

    def per(self, steps: int) -> Counts:
        return Counts(*(getattr(self, f) / steps for f in FIELDS))

    def as_json(self) -> dict[str, float]:
        return {f: getattr(self, f) for f in FIELDS}


def median(counts: list[Counts]) -> Counts:
    """Each field's median over ``counts`` (a stray checkpoint or autovacuum run in one of
    them does not move it)."""
    return Counts(*(statistics.median(getattr(c, f) for c in counts) for f in FIELDS))


class Counter:
    """Counts for the databases of one server, through a connection to its admin database
    (its own statements are counted under that database, never the measured one)."""

    def __init__(self, admin_url: str) -> None:
        from pgserver import connect  # tests/pgserver.py (pg_bench puts tests/ on the path)

        self.conn: Any = connect(admin_url, autocommit=True)
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")

    def close(self) -> None:
        self.conn.close()

    def _one(self, sql: str, *params: Any) -> Any:
        row = self.conn.execute(sql, params).fetchone()
        return row[0] if row else None

    def statements(self, db: str) -> int:
        return int(
            self._one(
                "SELECT coalesce(sum(s.calls), 0) FROM pg_stat_statements s"
                " JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s",
                db,
            )
        )

    def _slow(self, db: str) -> tuple[int, int]:
        """(sessions of ``db``, WAL syncs of the server): the counters that lag."""
        sessions = self._one("SELECT sessions FROM pg_stat_database WHERE datname = %s", db)
        return int(sessions or 0), int(self._one("SELECT wal_sync FROM pg_stat_wal"))

    def settle(self, db: str, deadline: float = 10.0) -> None:
        """Wait until ``db`` has no connection left and the lagging counters stop moving."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            left = self._one("SELECT count(*) FROM pg_stat_activity WHERE datname = %s", db)
            if not left:
                break
            time.sleep(0.01)
        last = self._slow(db)
        while time.monotonic() < end:
            time.sleep(0.05)
            now = self._slow(db)
            if now == last:
                return
            last = now

    def snapshot(self, db: str) -> tuple[Counts, str]:
        sessions, syncs = self._slow(db)
        lsn = str(self._one("SELECT pg_current_wal_flush_lsn()"))
        return Counts(float(self.statements(db)), float(sessions), 0.0, float(syncs), 0.0), lsn

    def commits(self, start: str, end: str) -> int:
        """Commit records of the WAL between two LSNs."""
        if start == end:
            return 0
        return int(
            self._one(
                "SELECT count(*) FROM pg_get_wal_records_info(%s::pg_lsn, %s::pg_lsn)"
                " WHERE resource_manager = 'Transaction' AND record_type LIKE 'COMMIT%%'",
                start,
                end,
            )
        )

    def around(self, db: str, action: Callable[[], object]) -> Counts:
        """What ``action`` (which must close its connections to ``db``) cost the server."""
        self.settle(db)
        before, lsn0 = self.snapshot(db)
        action()
        self.settle(db)
        after, lsn1 = self.snapshot(db)
        out = after - before
        out.write_commits = float(self.commits(lsn0, lsn1))
        out.wal_bytes = float(
            self._one("SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)", lsn1, lsn0)
        )
        return out


def database(url: str) -> str:
    """The database name of a ``postgresql://…/NAME`` URL."""
    return url.rsplit("/", 1)[1].split("?", 1)[0]


def marginal(
    counter: Counter, db: str, run: Callable[[int], object], few: int, many: int
) -> Counts:
    """Per step of a long-lived process (a worker): what ``run(many)`` costs beyond
    ``run(few)``, over ``many - few`` steps, so that the process's own start and end (its
    connections, a schema check, a registry record) cancel out."""
    small = counter.around(db, lambda: run(few))
    large = counter.around(db, lambda: run(many))
    return (large - small).per(many - few)


__all__ = ["Counter", "Counts", "database", "marginal", "median"]
