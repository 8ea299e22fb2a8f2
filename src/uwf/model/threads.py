"""Where a thread is: active (its head in the thread table) or archived (in the history)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from uwf.backend import base
from uwf.backend.base import Backend, Failure, Waiting
from uwf.model import chain
from uwf.util.base32 import NodeHash
from uwf.util.errors import NotFound, UwfError
from uwf.util.tuples import NamedTuple
from uwf.util.ulid import ThreadId, check_thread_id

if TYPE_CHECKING:
    from uwf.util.outputs import FailureShown, WaitingShown


TASK_LINE = 100  # characters of a task's first line recorded for listings


def task_line(prompt: str) -> str:
    """The first non-blank line of a task, shortened for listings."""
    line = next((x.strip() for x in prompt.splitlines() if x.strip()), "")
    return line if len(line) <= TASK_LINE else line[: TASK_LINE - 1] + "…"


class ThreadRef(NamedTuple):
    """A thread's head, whether it is active, and its status (``active`` or the history's)."""

    thread: ThreadId
    head: NodeHash
    active: bool
    status: str
    workflow: NodeHash | None = None  # known without reading nodes: archived, or recorded
    waiting: Waiting | None = None  # an active thread whose agent deferred at this head
    failure: Failure | None = None  # attempts that failed at this head since the last step
    cwd: str | None = None  # its working directory (``thread start --cwd``)
    priority: int = 0  # an active thread's (docs/format.md, "Priorities")


def active_status(waiting: Waiting | None, running: bool, failure: Failure | None = None) -> str:
    """An active thread's status: ``running`` while a step holds its lock, ``waiting`` when
    its agent deferred the step (a person answers later), ``failed`` when the last attempt
    its retry policy allows failed (a dead letter: docs/format.md, "Retries"), ``failing``
    when its last attempt to step failed (docs/format.md, "Thread state"), else ``idle``."""
    if running:
        return "running"
    if waiting is not None:
        return "waiting"
    if failure is None:
        return "idle"
    return "failed" if failure.exhausted else "failing"


def fanned_out(waiting: Waiting) -> bool:
    """Whether a wait is a fan-out's: the parent waits for its children (docs/format.md,
    "Fan-out and join"), not a joining role that deferred."""
    return waiting.children is not None and waiting.reason == FAN_OUT_REASON


#: The reason of a fan-out parent's wait mark (``uwf.engine.step.fanout``).
FAN_OUT_REASON = "children"


def waiting_json(waiting: Waiting) -> WaitingShown:
    """What ``thread show`` and ``thread list`` say of a wait: ``{role, since, reason?}``."""
    out: WaitingShown = {"role": waiting.role, "since": waiting.since}
    if waiting.reason:
        out["reason"] = waiting.reason
    return out


def failure_json(failure: Failure) -> FailureShown:
    """What ``thread show`` and ``thread list`` say of a thread's last failure
    (``Failure.shown``: the stored record without its head)."""
    return failure.shown()


def locate(backend: Backend, thread: str) -> ThreadRef:
    """The head of an active or archived thread (active wins when in both)."""
    tid = check_thread_id(thread)
    record = backend.threads.get(tid)
    if record is not None:
        info = record.info
        return ThreadRef(
            tid,
            record.head,
            True,
            "active",
            info.workflow,
            record.waiting,
            record.failure,
            info.cwd,
            info.priority,
        )
    entry = backend.threads.history_entry(tid)
    if entry is not None:
        return ThreadRef(tid, entry.head, False, entry.status, entry.workflow, cwd=entry.cwd)
    raise NotFound(f"thread not found: {thread}")


def not_active(backend: Backend, thread: ThreadId) -> UwfError:
    """The error for a thread with no active head: unknown, or archived (with its status)."""
    entry = backend.threads.history_entry(thread)
    if entry is None:
        return NotFound(f"thread not found: {thread}")
    return base.not_active(thread, entry)


def require_active(backend: Backend, thread: str) -> tuple[ThreadId, NodeHash]:
    """A checked thread id and its head; ``not_active`` when it has none."""
    tid = check_thread_id(thread)
    head = backend.threads.head(tid)
    if head is None:
        raise not_active(backend, tid)
    return tid, head


def workflow_of(backend: Backend, ref: ThreadRef) -> NodeHash:
    """The Workflow hash a thread runs (recorded, else read from its StartNode)."""
    if ref.workflow:
        return ref.workflow
    try:
        return chain.start_of(backend.nodes, chain.load_head(backend.nodes, ref.head)).workflow
    except UwfError:
        raise UwfError(f"failed to resolve workflow from head: {ref.head}") from None
