"""The worker registry on PostgreSQL (docs/format.md, "The PostgreSQL backend"): one row of
``uwf_workers`` per worker, written whole by one upsert per heartbeat."""

from __future__ import annotations

from uwf.backend.postgres.db import Db
from uwf.backend.workers import WorkerRecord, Workers

_COLUMNS = "id, host, pid, started, beat, interval_ms, steps, failed, stopped"  # a WorkerRecord
_BEAT = f"""
INSERT INTO uwf_workers ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (id) DO UPDATE SET beat = EXCLUDED.beat, steps = EXCLUDED.steps,
 failed = EXCLUDED.failed, stopped = EXCLUDED.stopped, interval_ms = EXCLUDED.interval_ms
"""


class PgWorkers(Workers):
    def __init__(self, db: Db) -> None:
        self.db = db

    def beat(self, record: WorkerRecord) -> None:
        self.db.execute(_BEAT, tuple(record))

    def records(self) -> list[WorkerRecord]:
        rows = self.db.all(f"SELECT {_COLUMNS} FROM uwf_workers ORDER BY started, id")
        return [
            WorkerRecord(
                r[0],
                r[1],
                int(r[2]),
                int(r[3]),
                int(r[4]),
                int(r[5]),
                int(r[6]),
                int(r[7]),
                None if r[8] is None else int(r[8]),
            )
            for r in rows
        ]

    def prune(self, before: int) -> int:
        with self.db.errors():
            return int(
                self.db.execute("DELETE FROM uwf_workers WHERE beat < %s", (before,)).rowcount
            )
