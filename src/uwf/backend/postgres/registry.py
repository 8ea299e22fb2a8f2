"""The PostgreSQL registry of workflow names: ``uwf_registry``, name -> hash, a version counted
up at every change, written under an advisory lock so that concurrent ``workflow put``s of one
name are ordered."""

from __future__ import annotations

from uwf.backend.base import Registry
from uwf.backend.postgres.db import Db
from uwf.backend.postgres.schema import REGISTRY_KEY
from uwf.backend.postgres.state import hash_of
from uwf.util.base32 import NodeHash
from uwf.util.ulid import now_ms


class PgRegistry(Registry):
    """``uwf_registry``: name -> hash, with a version counted up at every change."""

    def __init__(self, db: Db) -> None:
        self.db = db

    def read(self) -> dict[str, NodeHash]:
        rows = self.db.all("SELECT name, hash FROM uwf_registry ORDER BY name")
        what = "the hash of workflow"
        return {name: hash_of(h, "uwf_registry", f"{what} {name}") for name, h in rows}

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


__all__ = ["PgRegistry"]
