"""The PostgreSQL backend: one database shared by every machine of a fleet (docs/scale-out.md).

The only package that imports the driver, psycopg2 (an optional extra: ``pip install
'uwf[postgres]'``); import-linter checks it. docs/format.md, "The PostgreSQL backend",
describes its tables::

    uwf_nodes, uwf_type_index   nodes and the type index (``nodes.PgStore``)
    uwf_threads, uwf_history    active heads and the archive (``state.PgThreads``)
    uwf_registry                workflow name -> hash (``registry.PgRegistry``)
    uwf_holders + advisory locks step locks and their holders (``locks.PgLocks``)
    uwf_workers                 the worker registry (``workers.PgWorkers``)
    uwf_schema                  the schema version (``schema``)

Opening a backend connects nothing; the first statement connects and creates or migrates the
schema when needed (``uwf store init`` does the same on purpose).
"""

from __future__ import annotations

from pathlib import Path

from uwf.backend.base import ActiveThread, Backend
from uwf.backend.postgres import schema
from uwf.backend.postgres.db import Db, redacted_url
from uwf.backend.postgres.limits import PgLimits
from uwf.backend.postgres.locks import HELD_THREADS, PgLocks
from uwf.backend.postgres.nodes import PgStore
from uwf.backend.postgres.registry import PgRegistry
from uwf.backend.postgres.state import PgThreads
from uwf.backend.postgres.workers import PgWorkers


class PgBackend(Backend):
    """The shared state in PostgreSQL; ``root`` holds only this machine's files."""

    def __init__(self, url: str, root: Path) -> None:
        self.url = url
        self.root = root
        self.db = Db(url)
        self.db.on_connect.append(self._first_connect)
        self._checked = False
        self.nodes: PgStore = PgStore(self.db)
        self.threads: PgThreads = PgThreads(self.db, self.nodes)
        self.registry = PgRegistry(self.db)
        self.locks: PgLocks = PgLocks(self.db)
        self.limits = PgLimits(self.db, self.locks)
        self.workers = PgWorkers(self.db)

    def _first_connect(self, db: Db) -> None:
        if not self._checked:
            self._checked = True
            schema.ensure(db)

    def init(self) -> dict[str, int]:
        """Create or migrate the schema now: ``{"from", "to"}`` versions."""
        self._checked = True
        return schema.ensure(self.db)

    @property
    def name(self) -> str:
        return redacted_url(self.url)

    def idle_threads(self, now: int) -> list[ActiveThread]:
        """The threads runnable at ``now`` that no session holds the step lock of: one query."""
        return self.threads.runnable(now, f"thread NOT IN ({HELD_THREADS})")

    def relayed(self) -> bool:
        return True  # psycopg2's import and a connection cost an agent more than its step

    def env(self) -> dict[str, str]:
        return {"UWF_STORE": self.url, "WORKFLOW_STORAGE_ROOT": str(self.root)}

    def close(self) -> None:
        self.locks.close()
        self.db.close()


__all__ = ["PgBackend"]
