"""The thread table of the backend interface (``uwf.backend.base``): the heads of active
threads, moved only by compare-and-swap, and the archive of finished ones (history).

The semantics of ``move``, ``wait``, ``fan_out``, ``fail``, ``retry`` and ``archive`` — what
each refuses, in which order and in which words — live here once; a backend supplies one
atomic primitive for each (``uwf.backend.records`` answers them for the backends that keep
their records in one mapping). docs/format.md, "Thread state".
"""

from __future__ import annotations

import abc
from collections.abc import Collection

from uwf.backend.failure import Failure, RetryPolicy
from uwf.backend.tree import FanOutLimits
from uwf.backend.values import (
    HISTORY_STATUSES,
    ActiveThread,
    Ending,
    HistoryEntry,
    ThreadInfo,
    Waiting,
    not_active,
)
from uwf.util.base32 import NodeHash
from uwf.util.errors import Conflict, NotActive, NotFound, UwfError
from uwf.util.ulid import ThreadId

__all__ = ["ThreadTable", "joinable"]


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
