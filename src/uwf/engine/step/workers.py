"""Workers you can see (docs/scale-out.md, "Seeing the workers"): a ``uwf worker`` registers
in the backend's worker registry, beats once per interval from a thread of its own, and marks
itself stopped when it exits; ``uwf worker list`` reads the records back with what each
worker is stepping, which the step lock's holder record says (``Holder.worker``).

Cost: nothing per step (the worker's id rides in the holder record every step writes
anyway); one small file write (filesystem) or one statement (PostgreSQL, on a connection of
the heartbeat thread) per interval; a prune of records older than a day when a worker starts.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from uwf.backend.base import Backend
from uwf.backend.workers import KEEP_MS, WorkerRecord
from uwf.util import clock
from uwf.util.errors import Damaged, UwfError
from uwf.util.log import ProcessLog
from uwf.util.ulid import new_thread_id, now_ms

if TYPE_CHECKING:
    from uwf.util.outputs import WorkerListed

DEFAULT_INTERVAL = 10.0  # seconds between two heartbeats (``uwf worker --heartbeat``)
LONGEST_INTERVAL = 3600.0


class Heartbeat:
    """A worker's record in the registry: written when it starts, rewritten every
    ``interval`` seconds by a daemon thread with the counts ``counts`` gives, and marked
    stopped when the block ends (any way but SIGKILL: that worker shows as lost)."""

    def __init__(
        self, backend: Backend, interval: float, counts: Callable[[], tuple[int, int]]
    ) -> None:
        started = now_ms()
        self.backend = backend
        self.counts = counts
        self.interval = interval
        self.record = WorkerRecord(
            id=new_thread_id(started),
            host=os.uname().nodename,
            pid=os.getpid(),
            started=started,
            beat=started,
            interval=max(1, round(interval * 1000)),
        )
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="uwf-heartbeat", daemon=True)
        self._log = ProcessLog(backend.root)
        self.damage: list[str] = []  # records of other workers that cannot be read

    @property
    def id(self) -> str:
        return self.record.id

    def __enter__(self) -> Heartbeat:
        """Prune, then register. A registry that is damaged (``workers/`` that is not a
        directory) stops the worker before it starts: it could never be seen. A store that is
        away does not: the worker backs off as ever, and the beats retry."""
        try:
            self.backend.workers.prune(now_ms() - KEEP_MS)
        except (UwfError, OSError) as exc:  # cannot be pruned now: the next start does
            self._log.write("W3K8N5Q2", f"worker registry not pruned: {exc}")
        try:
            self._write()
            self.damage = self.backend.workers.damage()
        except Damaged:
            raise
        except (UwfError, OSError) as exc:
            self._log.write("W5T8H3M6", f"first heartbeat not written: {exc}")
        self._thread.start()
        return self

    def _write(self, stopped: int | None = None) -> None:
        steps, failed = self.counts()
        beat = now_ms() if stopped is None else stopped
        self.record = self.record._replace(beat=beat, steps=steps, failed=failed, stopped=stopped)
        self.backend.workers.beat(self.record)

    def _loop(self) -> None:
        while not clock.wait(self._done, self.interval):
            self._beat()

    def _beat(self) -> None:
        try:
            self._write()
        except (UwfError, OSError) as exc:  # the store is away: the next beat tries again
            self._log.write("W7D2F6J9", f"heartbeat not written: {exc}")

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        try:
            self._write(stopped=now_ms())
        except (UwfError, OSError) as error:  # it shows as lost instead
            self._log.write("W5M8R3T6", f"worker not marked stopped: {error}")


def listed(backend: Backend) -> tuple[list[WorkerListed], list[str]]:
    """``uwf worker list``: every worker of the last day, oldest start first, with its state
    and what it steps (docs/scale-out.md, "Seeing the workers"); and the damage of the
    records that cannot be read, one line each."""
    stepping = {h.worker: h for h in backend.locks.holders() if h.worker is not None}
    now = now_ms()
    out: list[WorkerListed] = []
    records, damage = backend.workers.scan()
    for record in records:
        if record.beat < now - KEEP_MS:
            continue  # pruned when the next worker starts
        holder = stepping.get(record.id)
        item: WorkerListed = {
            "id": record.id,
            "host": record.host,
            "pid": record.pid,
            "state": record.state(now, holder is not None),
            "started": record.started,
            "heartbeat": record.beat,
            "steps": record.steps,
            "failed": record.failed,
        }
        if holder is not None:
            item["thread"] = holder.thread
            if holder.role is not None:
                item["role"] = holder.role
        if record.stopped is not None:
            item["stopped"] = record.stopped
        out.append(item)
    return out, damage
