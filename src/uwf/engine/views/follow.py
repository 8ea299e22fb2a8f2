"""Following threads as they run: cheap polls that turn into events.

One poll of a thread reads where its head is and whether a step is in flight (``locate`` and
the backend's passive ``Locks.holder``: no node is read while nothing changes). A new head
reads only the new steps. The events, shared by ``uwf thread watch`` and the web view's server-sent
events (docs/ui.md):

* ``thread.opened`` — the first poll: ``{thread, workflow, workflowName, status, count, head}``
* ``step.started`` — a step began: ``{thread, number, role, agent}`` (``role`` and ``agent``,
  the command the step spawned, from the step lock's holder record)
* ``step.completed`` — a step landed: ``{thread, step}`` (a ``view.timeline`` step record)
* ``thread.archived`` — the thread ended: ``{thread, status, count}``

A step that starts and lands between two polls gives only its ``step.completed``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from uwf.backend.base import Backend, Holder
from uwf.engine.threads.listing import list_threads
from uwf.engine.views import timeline as view
from uwf.model.threads import locate
from uwf.util.errors import NotFound

AGENT_WAIT = 1.0  # seconds a started step may take to record its role and agent


class Follower:
    """Turns successive polls of one thread into events; ``done`` once it is archived.

    ``since``: a head the caller has already shown (a page rendered a moment ago); the first
    poll then reports only what is newer, without ``thread.opened``.
    """

    def __init__(self, backend: Backend, thread: str, since: str | None = None) -> None:
        self.backend = backend
        self.thread = thread
        self.head = since
        self.known = False  # count and next role read for self.head
        self.count = 0
        self.running = False
        self.next_role: str | None = None
        self.busy_since: float | None = None  # when the lock was first seen for this head
        self.done = False

    def poll(self) -> list[dict[str, Any]]:
        if self.done:
            return []
        ref = locate(self.backend, self.thread)
        holder = self.backend.locks.holder(ref.thread) if ref.active else None
        busy = holder is not None
        events: list[dict[str, Any]] = []
        # A step holds its lock a moment after moving the head (to archive): a step is only
        # taken as started when the lock is held on two polls that see the same head.
        settled = ref.head == self.head and self.known
        if not settled:
            line = view.timeline(self.backend, self.thread, after=self.head)
            if self.head is None:
                events.append(_opened(line, busy))
            else:
                for record in line["steps"]:
                    events.append(
                        {"event": "step.completed", "thread": self.thread, "step": record}
                    )
            self.head, self.count, self.known = ref.head, line["count"], True
            self.next_role = (line["next"] or {}).get("role")
            self.running, self.busy_since = False, None
        if holder is not None and settled and not self.running:
            events += self._started(holder)
        if not busy:
            self.running, self.busy_since = False, None
        if not ref.active:
            self.done = True
            events.append(
                {
                    "event": "thread.archived",
                    "thread": self.thread,
                    "status": ref.status,
                    "count": self.count,
                }
            )
        return events

    def _started(self, holder: Holder) -> list[dict[str, Any]]:
        """The ``step.started`` event once the step recorded its agent (or after a second)."""
        now = time.monotonic()
        if self.busy_since is None:
            self.busy_since = now
        if holder.agent is None and now - self.busy_since < AGENT_WAIT:
            return []
        self.running = True
        agent = Path(holder.agent).name if holder.agent else None
        return [
            {
                "event": "step.started",
                "thread": self.thread,
                "number": self.count + 1,
                "role": holder.role or self.next_role,
                "agent": agent,
            }
        ]


def _opened(line: dict[str, Any], busy: bool) -> dict[str, Any]:
    return {
        "event": "thread.opened",
        "thread": line["thread"],
        "workflow": line["workflow"],
        "workflowName": line["workflowName"],
        "status": "running" if busy else line["status"],
        "count": line["count"],
        "head": line["head"],
    }


class AllFollower:
    """Follows every active thread, picking up threads started meanwhile."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.followers: dict[str, Follower] = {}

    def poll(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for item in reversed(list_threads(self.backend, status="active")):
            if item["thread"] not in self.followers:
                self.followers[item["thread"]] = Follower(self.backend, item["thread"])
        for thread, follower in list(self.followers.items()):
            try:
                events += follower.poll()
            except NotFound:  # gone from both files (a hand edit): stop following it
                follower.done = True
            if follower.done:
                del self.followers[thread]
        return events
