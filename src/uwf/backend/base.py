"""The backend interface: everything uwf persists, in four parts.

* ``nodes`` — the content-addressed store (:class:`uwf.cas.store.Store`): immutable nodes,
  the type index, and the whole-store listing that ``reindex``, ``verify`` and ``gc`` use.
* ``threads`` — the mutable heads of active threads (moved only by compare-and-swap) and the
  archive of finished ones (history).
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
from uwf.backend.tree import FanOutLimits
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
from uwf.util.errors import Conflict, NotActive, NotFound, UwfError
from uwf.util.ulid import ThreadId

if TYPE_CHECKING:  # the worker registry's module: only where workers are read or written
    from uwf.backend.workers import Workers


class ThreadTable(abc.ABC):
    """Active threads (heads moved by compare-and-swap) and the archive of finished ones."""

    @abc.abstractmethod
    def head(self, thread: ThreadId) -> NodeHash | None:
        """The head of an active thread, None if it is not active."""

    @abc.abstractmethod
    def get(self, thread: ThreadId) -> ActiveThread | None:
        """The active record of a thread, None if it is not active."""

    @abc.abstractmethod
    def active(self) -> list[ActiveThread]:
        """Every active thread (in no particular order)."""

    @abc.abstractmethod
    def create(self, thread: ThreadId, head: NodeHash, info: ThreadInfo) -> None:
        """Record a new active thread (a fresh id: never one that exists or existed)."""

    # Start keys (docs/format.md, "Start keys"): ``thread start --key`` names a thread once
    # per workflow name (``scope``), so a start retried by a script returns the same thread.

    @abc.abstractmethod
    def keyed(self, scope: str, key: str) -> ThreadId | None:
        """The thread ``key`` named in ``scope``, None when it names none yet."""

    @abc.abstractmethod
    def create_keyed(
        self, scope: str, key: str, thread: ThreadId, head: NodeHash, info: ThreadInfo
    ) -> tuple[ThreadId, bool]:
        """``create`` the thread unless ``key`` already names one in ``scope``, atomically
        (many processes starting with one key create one thread). Returns the thread the key
        names and whether this call created it. The key stays when the thread is archived."""

    # The semantics of move/wait/fail/retry/archive live here, once; a backend supplies the
    # primitives below (``_move``, ``_wait``, ``_fail``, ``_retry``, ``_archive``), each one
    # atomic step that answers what it found. Every refusal is worded and ordered here: not
    # active, then a head other than the expected one, then (``move``) a new head that is not
    # stored.

    def move(
        self, thread: ThreadId, expected: NodeHash, new: NodeHash, *, end: Ending | None = None
    ) -> bool:
        """Compare-and-swap the head: ``expected`` -> ``new``, ending any wait and failure.

        Raises :class:`~uwf.util.errors.NotActive` when the thread is no longer active,
        :class:`~uwf.util.errors.Conflict` when its head is not ``expected`` and
        :class:`~uwf.util.errors.NotFound` (``CAS node not found``) when ``new`` is not a
        stored node: a head always names a node (docs/format.md, "Thread state"). Nothing
        changes then.

        ``end``: the step ends the thread; a backend that can archive it in the same atomic
        change does and answers True (PostgreSQL: one commit per step); False: the caller
        archives it (``archive``).
        """
        done, head, ended = self._land(thread, expected, new, end)
        if not done:
            raise self._refusal(thread, head, expected, "move", new)
        return ended

    def _land(
        self, thread: ThreadId, expected: NodeHash, new: NodeHash, end: Ending | None
    ) -> tuple[bool, NodeHash | None, bool]:
        """``_move``, plus whether it archived the thread with ``end`` too (by default it
        does not)."""
        done, head = self._move(thread, expected, new)
        return done, head, False

    def wait(self, thread: ThreadId, waiting: Waiting) -> None:
        """Mark an active thread as waiting at ``waiting.head``.

        NotActive when it is not active; Conflict when its head is no longer
        ``waiting.head``. ``move`` and ``archive`` end the wait.
        """
        done, head = self._wait(thread, waiting)
        if not done:
            raise self._refusal(thread, head, waiting.head, "wait")

    def fan_out(
        self,
        thread: ThreadId,
        waiting: Waiting,
        children: list[ActiveThread],
        limits: FanOutLimits = FanOutLimits(),
    ) -> None:
        """Start a fan-out in one atomic change: record ``children`` (new threads, fresh ids),
        count them on the root of ``thread``'s tree and mark ``thread`` as waiting for them at
        ``waiting.head`` (docs/format.md, "Fan-out and join"). Refused like ``wait``, or
        (FanOutRefused) when the tree's ``limits`` do not allow them; then nothing is
        recorded."""
        done, head = self._fan_out(thread, waiting, children, limits)
        if not done:
            raise self._refusal(thread, head, waiting.head, "wait")

    def fail(
        self, thread: ThreadId, failure: Failure, policy: RetryPolicy = RetryPolicy()
    ) -> Failure:
        """Record a failed attempt to step ``thread`` at ``failure.head`` and return the record
        as stored (``Failure.after`` the one before it under ``policy``, in one atomic change:
        attempts from many processes are all counted).

        NotActive when the thread is not active; Conflict when its head is no longer
        ``failure.head`` (a step landed meanwhile: the failure is moot). ``move`` and
        ``retry`` end it, ``wait`` keeps it.
        """
        stored, head = self._fail(thread, failure, policy)
        if stored is None:
            raise self._refusal(thread, head, failure.head, "fail")
        return stored

    def prioritize(self, thread: ThreadId, priority: int) -> int:
        """Set the priority of an active thread; return the one it had. NotActive when it is
        not active."""
        previous = self._prioritize(thread, priority)
        if previous is None:
            raise self.not_active(thread)
        return previous

    @abc.abstractmethod
    def _prioritize(self, thread: ThreadId, priority: int) -> int | None:
        """Atomically: set the priority of active ``thread``; the previous one, None when the
        thread is not active."""

    def retry(self, thread: ThreadId) -> Failure | None:
        """End the last failure of ``thread`` (``thread retry``): a ``failed`` or backing-off
        thread may be stepped again at once, with its attempts counted from zero. Returns the
        record it ended, None when the thread had none at its head. NotActive when the thread
        is not active."""
        cleared, head = self._retry(thread)
        if head is None:
            raise self.not_active(thread)
        return cleared

    def archive(
        self,
        thread: ThreadId,
        workflow: NodeHash,
        status: str,
        at_ms: int,
        expected: NodeHash | None = None,
    ) -> NodeHash:
        """Move an active thread to the archive with ``status``; return its head. The entry
        keeps the task line, the working directory and the parent the thread was created with
        (``ThreadInfo.task``, ``ThreadInfo.cwd``, ``ThreadInfo.parent``).

        With ``expected``, only if the head is still that (else Conflict). NotActive when the
        thread is not active. A crash in the middle may leave the thread both active and
        archived, never neither; readers then treat it as archived.
        """
        if status not in HISTORY_STATUSES:
            raise ValueError(f"unknown history status: {status}")  # a bug, not bad input
        done, head = self._archive(thread, expected, workflow, status, at_ms)
        if not done or head is None:
            raise self._refusal(thread, head, expected, "archive")
        return head

    @abc.abstractmethod
    def _move(
        self, thread: ThreadId, expected: NodeHash, new: NodeHash
    ) -> tuple[bool, NodeHash | None]:
        """Atomically: when ``thread`` is active at ``expected`` and ``new`` is stored, make
        ``new`` its head with no wait. Returns (done, the head found: None when not active)."""

    @abc.abstractmethod
    def _wait(self, thread: ThreadId, waiting: Waiting) -> tuple[bool, NodeHash | None]:
        """Atomically: when ``thread`` is active at ``waiting.head``, record ``waiting``.
        Returns (done, the head found: None when not active)."""

    @abc.abstractmethod
    def _fan_out(
        self,
        thread: ThreadId,
        waiting: Waiting,
        children: list[ActiveThread],
        limits: FanOutLimits,
    ) -> tuple[bool, NodeHash | None]:
        """Atomically: when ``thread`` is active at ``waiting.head``, raise the refusal of
        ``uwf.backend.tree`` when its tree may not start ``children``, else add them to its
        root's ``descendants``, record ``waiting`` and create them. Returns (done, the head
        found: None when not active)."""

    @abc.abstractmethod
    def _fail(
        self, thread: ThreadId, failure: Failure, policy: RetryPolicy
    ) -> tuple[Failure | None, NodeHash | None]:
        """Atomically: when ``thread`` is active at ``failure.head``, record
        ``failure.after(<the record stored>, policy)``. Returns (the record stored, None when
        nothing was; the head found: None when not active)."""

    @abc.abstractmethod
    def _retry(self, thread: ThreadId) -> tuple[Failure | None, NodeHash | None]:
        """Atomically: remove the failure record of ``thread``. Returns (the record removed
        when it was at the head, else None; the head found: None when not active)."""

    @abc.abstractmethod
    def _archive(
        self,
        thread: ThreadId,
        expected: NodeHash | None,
        workflow: NodeHash,
        status: str,
        at_ms: int,
    ) -> tuple[bool, NodeHash | None]:
        """Atomically as far as readers can tell (the history entry first): when ``thread``
        is active (at ``expected``, if given), append its history entry and end it.
        Returns (done, the head found: the one archived when done; None when not active)."""

    def _refusal(
        self,
        thread: ThreadId,
        head: NodeHash | None,
        expected: NodeHash | None,
        what: str,
        new: NodeHash | None = None,
    ) -> UwfError:
        """Why a primitive changed nothing, from the head it found."""
        if head is None:
            return self.not_active(thread)
        if new is not None and head == expected:
            return NotFound(f"CAS node not found: {new}")
        return self.conflict(thread, head, what, expected or head)

    @abc.abstractmethod
    def history(self) -> list[HistoryEntry]:
        """Every archived thread, oldest first (a thread archived twice: both entries)."""

    @abc.abstractmethod
    def history_entry(self, thread: ThreadId) -> HistoryEntry | None:
        """The latest archive entry of ``thread``, None if it was never archived."""

    # The refusals of create/move/wait/archive, worded once for every implementation.

    def not_active(self, thread: ThreadId) -> NotActive:
        """``thread`` is not active: with its status when it was archived."""
        return not_active(thread, self.history_entry(thread))

    @staticmethod
    def conflict(thread: ThreadId, head: NodeHash, what: str, expected: NodeHash) -> Conflict:
        """``thread``'s head is ``head``, not the ``expected`` one that ``what`` (``move``,
        ``wait``, ``fail`` or ``archive``) was conditional on."""
        if what == "move":
            return Conflict(
                f"thread {thread} changed while the step ran (head is {head}, "
                f"expected {expected}); the step was not recorded"
            )
        if what == "wait":
            return Conflict(f"thread {thread} moved to {head} before it could wait")
        if what == "fail":
            return Conflict(f"thread {thread} moved to {head} before its failure was recorded")
        return Conflict(f"thread {thread} moved to {head} while archiving")

    def runnable(self, now: int) -> list[ActiveThread]:
        """Active threads that are not waiting — or wait for children of which none is
        active any more (their join is due) —, not ``failed`` and not backing off at ``now``
        (unix ms), oldest first (thread ids are ULIDs: their order is the order of creation).
        ``thread step --next`` and ``uwf worker`` pick among them."""
        records = self.active()
        parents = {record.info.parent for record in records if record.info.parent}
        return sorted(
            (
                record
                for record in records
                if joinable(record, parents)
                and (record.failure is None or record.failure.ready(now))
            ),
            key=lambda record: record.thread,
        )

    def children(self, thread: ThreadId) -> list[ActiveThread | HistoryEntry]:
        """Every thread ``thread``'s fan-outs started, active or archived, oldest first."""
        found: dict[str, ActiveThread | HistoryEntry] = {}
        for entry in self.history():
            if entry.parent == thread:
                found[entry.thread] = entry
        for record in self.active():
            if record.info.parent == thread:
                found[record.thread] = record
        return [found[key] for key in sorted(found)]


def joinable(record: ActiveThread, busy_parents: Collection[str | None]) -> bool:
    """Whether ``record`` can be stepped by a fleet: not waiting, or waiting for children of
    which none is active (``busy_parents``: the parents of the active threads)."""
    waiting = record.waiting
    if waiting is None:
        return True
    joining = waiting.children is not None and waiting.reason == "children"
    return joining and record.thread not in busy_parents


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
