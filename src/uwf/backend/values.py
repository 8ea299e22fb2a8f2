"""What the backend interface (``uwf.backend.base``) reads and writes about threads: an active
thread's record (``ActiveThread``: its head, ``ThreadInfo``, a wait, a failure), an archived
one's (``HistoryEntry``), how a thread ends (``Ending``), who holds a step lock (``Holder``).
Plain values: every backend builds them, the engine and the views read them."""

from __future__ import annotations

from typing import Any

from uwf.backend.failure import Failure
from uwf.util.base32 import NodeHash
from uwf.util.errors import NotActive
from uwf.util.optional import present
from uwf.util.tuples import NamedTuple
from uwf.util.ulid import ThreadId

__all__ = [
    "HISTORY_STATUSES",
    "ActiveThread",
    "Ending",
    "HistoryEntry",
    "Holder",
    "ThreadInfo",
    "Waiting",
    "not_active",
]

HISTORY_STATUSES = ("completed", "killed", "max_rounds")


def not_active(thread: ThreadId, entry: HistoryEntry | None) -> NotActive:
    """The one wording of "thread not active" (docs/errors.md, "thread step"): with the
    status of ``entry``, its archive entry, when it has one."""
    status = f" (status: {entry.status})" if entry is not None else ""
    return NotActive(f"thread not active: {thread}{status}")


# The records below are NamedTuples, not frozen dataclasses: every command imports this module,
# and `uwf thread show` loads no ``dataclasses`` (tests/test_startup.py).


class ThreadInfo(NamedTuple):
    """What a thread's active record holds besides its head.

    Written when the thread is created (``thread start``, ``thread fork``), so that listing
    threads reads no node. Threads created by older versions have none of it (all None):
    readers then fall back to the nodes.
    """

    workflow: NodeHash | None = None  # the Workflow the thread runs
    task: str | None = None  # the first line of its task, shortened (for listings)
    cwd: str | None = None  # the directory its agents work in (``thread start --cwd``)
    parent: ThreadId | None = None  # the thread whose fan-out started it
    priority: int = 0  # higher is stepped first by --next and workers (``prioritize``)
    # a root's: the threads its fan-out tree has started (``uwf.backend.tree``)
    descendants: int = 0

    def as_json(self) -> dict[str, Any]:
        return present(
            workflow=self.workflow or None,
            task=self.task or None,
            cwd=self.cwd or None,
            parent=self.parent or None,
            priority=self.priority or None,
            descendants=self.descendants or None,
        )


class Waiting(NamedTuple):
    """A thread whose agent deferred its step ("not now", exit 75): it waits at ``head`` for
    ``role``, e.g. for a person to answer. A mark for another head than the thread's is stale
    and never shown: any head move ends the wait."""

    role: str
    since: int  # unix ms
    head: NodeHash
    reason: str | None = None  # what the agent said when it deferred; "children": a fan-out
    children: tuple[ThreadId, ...] | None = None  # a fan-out's children, in item order

    def as_json(self) -> dict[str, Any]:
        children = None if self.children is None else list(self.children)
        return {
            "role": self.role,
            "since": self.since,
            "head": self.head,
            **present(reason=self.reason or None, children=children),
        }


class ActiveThread(NamedTuple):
    """An active thread: its head, what was recorded when it was created, whether it waits
    and its last failure (``waiting`` and ``failure`` are None unless they are at this very
    head)."""

    thread: ThreadId
    head: NodeHash
    info: ThreadInfo = ThreadInfo()
    waiting: Waiting | None = None
    failure: Failure | None = None


class Ending(NamedTuple):
    """How a step ends its thread (``ThreadTable.move``'s ``end``): the archive's arguments."""

    workflow: NodeHash
    status: str  # one of HISTORY_STATUSES
    at_ms: int


class HistoryEntry(NamedTuple):
    """One archived thread:
    ``{"thread","workflow","head","completedAt","status","task"?,"cwd"?}``.

    ``task`` is the active record's task line and ``cwd`` its working directory, carried
    over when the thread is archived (so that listings read no node, and a resumed thread
    works where the ended one did); entries written by older versions have neither.
    """

    thread: ThreadId
    workflow: NodeHash
    head: NodeHash
    completed_at: int  # unix ms
    status: str  # one of HISTORY_STATUSES
    task: str | None = None
    cwd: str | None = None
    parent: ThreadId | None = None  # the active record's parent, carried over

    def as_json(self) -> dict[str, Any]:
        return {
            "thread": self.thread,
            "workflow": self.workflow,
            "head": self.head,
            "completedAt": self.completed_at,
            "status": self.status,
            **present(task=self.task, cwd=self.cwd, parent=self.parent),
        }


class Holder(NamedTuple):
    """Who holds a thread's step lock, as far as the holder recorded it."""

    thread: ThreadId
    pid: int | None = None
    host: str | None = None
    since: int | None = None  # unix ms the lock was taken
    role: str | None = None  # set once the step knows which role runs
    agent: str | None = None  # the agent command (argv[0]) that runs
    log: str | None = None  # set for a background run: its log file (on ``host``)
    worker: str | None = None  # the ``uwf worker`` stepping it (``WorkerRecord.id``)

    @property
    def background(self) -> bool:
        """Whether the holder is a background run (``thread step --background``)."""
        return self.log is not None

    def as_json(self) -> dict[str, Any]:
        return present(**self._asdict())  # the thread, and what the holder recorded
