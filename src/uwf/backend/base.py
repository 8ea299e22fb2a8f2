"""The backend interface: everything uwf persists, in four parts.

* ``nodes`` — the content-addressed store (:class:`uwf.cas.store.Store`): immutable nodes,
  the type index, and the whole-store listing that ``reindex``, ``verify`` and ``gc`` use.
* ``threads`` — the mutable heads of active threads (moved only by compare-and-swap) and the
  archive of finished ones (history): :class:`uwf.backend.table.ThreadTable`, re-exported
  here with the records it reads and writes (``uwf.backend.values``).
* ``registry`` — workflow name -> current Workflow hash.
* ``locks`` — the per-thread step lock (try, wait, and "is it held" answered *without*
  taking it, so that a reader never makes a step fail), the stop request a background run
  polls (``thread stop``), and the gc lock.

The engine, the agent kit, gc and verify talk only to this interface; ``uwf.backend.open_backend``
chooses the implementation in one place. Every implementation passes the conformance class
in ``tests/backend_contract.py``. docs/format.md describes what each implementation stores
and docs/architecture.md how the step uses it.
"""

from __future__ import annotations

import abc
import contextlib
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING

from uwf.backend.failure import Failure as Failure
from uwf.backend.failure import RetryPolicy as RetryPolicy
from uwf.backend.table import ThreadTable as ThreadTable
from uwf.backend.values import (  # the records, importable from here as before
    HISTORY_STATUSES as HISTORY_STATUSES,
)
from uwf.backend.values import (
    ActiveThread as ActiveThread,
)
from uwf.backend.values import (
    Ending as Ending,
)
from uwf.backend.values import (
    HistoryEntry as HistoryEntry,
)
from uwf.backend.values import (
    Holder as Holder,
)
from uwf.backend.values import (
    ThreadInfo as ThreadInfo,
)
from uwf.backend.values import (
    Waiting as Waiting,
)
from uwf.backend.values import (
    not_active as not_active,
)
from uwf.cas.store import Store
from uwf.util.base32 import NodeHash
from uwf.util.ulid import ThreadId

if TYPE_CHECKING:  # the worker registry's module: only where workers are read or written
    from uwf.backend.workers import Workers


class Registry(abc.ABC):
    """Workflow name -> current Workflow hash. Old versions stay in the CAS."""

    @abc.abstractmethod
    def read(self) -> dict[str, NodeHash]:
        """Every entry."""

    def get(self, name: str) -> NodeHash | None:
        return self.read().get(name)

    @abc.abstractmethod
    def set(self, name: str, h: NodeHash) -> NodeHash | None:
        """Point ``name`` at ``h``; return the previous hash (None for a new name)."""


class StepLock(abc.ABC):
    """A held step lock. ``note`` records what the step runs, for readers (``holder``)."""

    @abc.abstractmethod
    def note(self, *, role: str, agent: str) -> None:
        """Record the role and agent of the step in the holder record."""

    def current(self, threads: ThreadTable, thread: ThreadId) -> ActiveThread | None:
        """The active record of ``thread`` read under this lock (None: not active). A
        backend that read it in the same round trip as it took the lock answers the first
        call from that read (a worker hands it to the step: no second read)."""
        return threads.get(thread)

    def moved(self) -> bool | None:
        """Whether the thread's head moved (or it was archived) since the lock was taken,
        as far as the backend was told without asking (PostgreSQL: a notification); None
        when it cannot tell, and the step asks for the head instead."""
        return None

    @abc.abstractmethod
    def stop_requested(self) -> bool:
        """Whether ``Locks.request_stop`` asked this holding to stop (a background run polls
        it twice a second, from any machine sharing the backend)."""


class Locks(abc.ABC):
    """The per-thread step lock and the gc lock.

    A step lock dies with its holder (process exit, closed connection), so a crash never
    leaves a thread locked. Asking whether a lock is held never takes it.
    """

    @abc.abstractmethod
    def step(
        self,
        thread: ThreadId,
        *,
        wait: bool,
        log: str | None = None,
        worker: str | None = None,
        note: tuple[str, str] | None = None,
    ) -> contextlib.AbstractContextManager[StepLock]:
        """Hold the step lock of ``thread`` for the block.

        ``wait=False`` raises :class:`~uwf.util.errors.Busy` (``thread <id> is busy``) at once
        when another holder has it. ``log`` marks the holder as a background run writing its
        log there (``Holder.log``), ``worker`` as that ``uwf worker`` (``Holder.worker``);
        ``note``, the (role, agent) of a step planned before the lock was taken, is recorded
        with the holder as ``StepLock.note`` would (the record is then written once).
        Releasing the lock ends the holder record and any stop request made for it.
        """

    @abc.abstractmethod
    def running(self) -> set[ThreadId]:
        """The threads whose step lock is held right now (passive: takes no lock)."""

    def is_running(self, thread: ThreadId) -> bool:
        return thread in self.running()

    @abc.abstractmethod
    def holder(self, thread: ThreadId) -> Holder | None:
        """Who holds the step lock of ``thread``, None when nobody does."""

    def holders(self) -> list[Holder]:
        """The holder of every step lock held right now (passive, as ``holder``)."""
        found = (self.holder(thread) for thread in sorted(self.running()))
        return [holder for holder in found if holder is not None]

    @abc.abstractmethod
    def request_stop(self, thread: ThreadId) -> Holder | None:
        """Ask the current holder of ``thread``'s step lock to stop; return that holder, None
        when nobody holds it. The request is for that holding only: a later holder never sees
        it. Takes no lock."""

    @abc.abstractmethod
    def clear_stale(self, thread: ThreadId) -> Holder | None:
        """Remove the holder record that a holder which died left behind (SIGKILL, a reboot)
        and return what it said; None when the lock is held or no record was left."""

    @abc.abstractmethod
    def gc(self, *, background: bool = False) -> contextlib.AbstractContextManager[None]:
        """Hold the gc lock: a second ``cas gc`` fails at once (Busy). ``background``: the
        filesystem store's automatic packing, which a ``cas gc`` or ``cas pack`` waits for
        instead of failing (docs/architecture.md, "Automatic packing")."""

    @abc.abstractmethod
    def sweep(self, archived: Collection[ThreadId], *, dry_run: bool = False) -> int:
        """Remove what the step locks of ``archived`` threads left behind (lock files, holder
        records); return how many threads' were (or, ``dry_run``, would be) removed.

        Only for threads in the history: an archived thread never becomes active again, so
        its lock is never needed again. A lock some process holds right now (a step that a
        ``thread kill`` is stopping) is never removed.
        """


LONGEST_PAUSE = 3600.0  # seconds: the longest a 429 pauses a provider (a Retry-After is cut)


class Limits(abc.ABC):
    """Limits shared by every process using the backend (docs/format.md, "Limits"): how many
    steps of one agent or provider run at once, and how many start in a minute."""

    @abc.abstractmethod
    def hold(
        self, name: str, concurrency: int | None, per_minute: int | None
    ) -> contextlib.AbstractContextManager[None]:
        """A slot of ``name`` for the block: at most ``concurrency`` holders at once (None: no
        cap), and at most ``per_minute`` holds begun in the last 60 s (the hold counts as one
        when it begins). Raises :class:`~uwf.util.errors.HeldBack` at once, with
        ``"concurrency"`` or ``"perMinute"`` as its message, when a limit is reached. A slot
        dies with its holder (process exit, closed connection)."""

    @abc.abstractmethod
    def pause(self, name: str, until: int) -> int:
        """Hold every step of ``name`` back until ``until`` (unix ms), e.g. a provider that
        answered 429; a later pause never shortens an earlier one. Returns the pause in force."""

    @abc.abstractmethod
    def paused(self, name: str) -> int | None:
        """Until when (unix ms) ``name`` is paused, None when it is not (or no longer)."""


class Backend(abc.ABC):
    """A storage backend: the four parts and the fleet's limits, plus the local root of this
    machine.

    ``root`` is where this machine keeps what is not shared: ``config.yaml``, ``.env``, the
    debug log and agent caches. For the filesystem backend the shared state lives there too.
    """

    root: Path
    nodes: Store
    threads: ThreadTable
    registry: Registry
    locks: Locks
    limits: Limits
    workers: Workers  # the worker registry (``uwf.backend.workers``)

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """How to show this backend to a user (never with a password)."""

    def env(self) -> dict[str, str]:
        """What an agent's environment needs to open this same backend."""
        return {"UWF_STORE": str(self.root), "WORKFLOW_STORAGE_ROOT": str(self.root)}

    def idle_threads(self, now: int) -> list[ActiveThread]:
        """The threads runnable at ``now`` (``threads.runnable``) that no process steps now:
        what a fleet worker may claim. A backend may answer in one query."""
        running = self.locks.running()
        return [r for r in self.threads.runnable(now) if r.thread not in running]

    def relayed(self) -> bool:
        """Whether an agent reaches this store best through the step that spawned it (its
        requests served by uwf over a pipe: ``engine.step.relay``) rather than by opening it:
        a database whose driver and connection cost an agent more than the whole step."""
        return False

    def init(self) -> dict[str, int]:
        """Create what the backend needs (``uwf store init``); ``{"from","to"}`` schema versions.

        The filesystem needs nothing before its first write: version 1 from the start.
        """
        return {"from": 1, "to": 1}

    def state_damage(self) -> list[tuple[str, str]]:
        """The damage of the state beside the threads and the registry — the start keys, the
        worker registry, the fleet limits' files — as ``(part, "<file> is damaged: …")``:
        what ``cas verify`` reports with the rest (docs/reliability.md, "Repairing damaged
        state"). A backend whose tables cannot hold such damage has none."""
        return []

    def sweep_temp_files(self, cutoff_ms: int, *, dry_run: bool = False) -> int:
        """Delete the temp files that writers killed mid-write left, last written before
        ``cutoff_ms`` (unix ms); return how many were (or, ``dry_run``, would be) deleted. A
        backend that writes no temp files has none."""
        return 0

    def close(self) -> None:  # noqa: B027 - optional hook: connections, pools
        """Release what the backend holds open."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
