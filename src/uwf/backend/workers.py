"""The worker registry: which ``uwf worker`` processes exist, where, and how far they got
(docs/format.md, "Workers"; docs/scale-out.md, "Seeing the workers").

Every worker writes one record when it starts, rewrites it once per heartbeat interval (one
small file write or one statement: never per step or per poll) and marks it stopped when it
exits normally. What a worker is stepping is not written here: the step lock's holder record
names the worker (``Holder.worker``), so a step costs the registry nothing. Readers decide
``lost`` (no heartbeat for ``LOST_AFTER`` intervals) and ``running``/``idle`` (whether a held
step lock names it).
"""

from __future__ import annotations

import abc

from uwf.util.tuples import NamedTuple

LOST_AFTER = 3  # heartbeat intervals without a beat after which a worker is lost
KEEP_MS = 86_400_000  # records whose last beat is older than a day are pruned


class WorkerRecord(NamedTuple):
    """One worker as it last wrote itself."""

    id: str  # a ULID, fresh per worker process
    host: str
    pid: int
    started: int  # unix ms
    beat: int  # unix ms of its last heartbeat
    interval: int  # ms between two heartbeats
    steps: int = 0  # steps it recorded, as of its last heartbeat
    failed: int = 0  # step attempts that failed, as of its last heartbeat
    stopped: int | None = None  # unix ms it exited normally

    def state(self, now: int, stepping: bool) -> str:
        """``stopped``, ``lost`` (no beat for ``LOST_AFTER`` intervals), ``running`` (a step
        lock names it) or ``idle``."""
        if self.stopped is not None:
            return "stopped"
        if now - self.beat > LOST_AFTER * self.interval:
            return "lost"
        return "running" if stepping else "idle"


class Workers(abc.ABC):
    """The records of the workers of a store, shared by every machine using it."""

    @abc.abstractmethod
    def beat(self, record: WorkerRecord) -> None:
        """Write ``record`` whole (registering, a heartbeat, or the stop): one atomic write."""

    @abc.abstractmethod
    def records(self) -> list[WorkerRecord]:
        """Every record, oldest start first."""

    def scan(self) -> tuple[list[WorkerRecord], list[str]]:
        """Every record uwf can read (``records``), and the damage of those it cannot: one
        ``<file> is damaged: …`` line each (docs/reliability.md, "Repairing damaged state")."""
        return self.records(), []

    def damage(self) -> list[str]:
        """The damage ``scan`` finds, alone (none where records cannot be damaged: nothing is
        read)."""
        return []

    @abc.abstractmethod
    def prune(self, before: int) -> int:
        """Delete the records whose last beat is older than ``before`` (unix ms): stopped and
        lost workers; return how many went."""
