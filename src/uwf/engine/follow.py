"""Following threads as they run: cheap polls that turn into events.

One poll of a thread reads where its head is and whether a step is in flight (``threads.locate``
and the passive ``view.running``: no node is read while nothing changes). A new head reads only
the new steps. The events, shared by ``uwf thread watch`` and the web view's server-sent
events (docs/ui.md):

* ``thread.opened`` — the first poll: ``{thread, workflow, workflowName, status, count, head}``
* ``step.started`` — a step began: ``{thread, number, role, agent}`` (``agent``: the command
  the step spawned, from the process log; None when the log does not say)
* ``step.completed`` — a step landed: ``{thread, step}`` (a ``view.timeline`` step record)
* ``thread.archived`` — the thread ended: ``{thread, status, count}``

A step that starts and lands between two polls gives only its ``step.completed``.
"""

from __future__ import annotations

import datetime as _dt
import time
from pathlib import Path
from typing import Any

from uwf.engine import logs, threads, view
from uwf.util.errors import NotFound, UwfError

SPAWN_TAG = "R5J2W8N4"  # the step's "spawning agent" log line (uwf.util.log.TAGS)
AGENT_WAIT = 1.0  # seconds a started step waits for its spawn line before it is reported


def running_agent(root: Path, thread: str, after_ms: int) -> str | None:
    """The command of the agent the thread's running step spawned: the newest spawn line of
    the thread logged after ``after_ms`` (when its head was written), or None (not yet)."""
    after = _dt.datetime.fromtimestamp(after_ms / 1000, _dt.UTC)
    since = after.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    today = _dt.datetime.now(_dt.UTC).date()
    for day in sorted({after.date(), today}, reverse=True):
        try:
            entries = logs.show_logs(root, thread=thread, date=day.isoformat())
        except UwfError:
            return None
        for entry in reversed(entries):
            msg = str(entry.get("msg", ""))
            if str(entry.get("ts", "")) < since:
                return None
            if entry.get("tag") == SPAWN_TAG and "command=" in msg:
                return Path(msg.split("command=", 1)[1].strip()).name or None
    return None


class Follower:
    """Turns successive polls of one thread into events; ``done`` once it is archived.

    ``since``: a head the caller has already shown (a page rendered a moment ago); the first
    poll then reports only what is newer, without ``thread.opened``.
    """

    def __init__(self, root: Path, thread: str, since: str | None = None) -> None:
        self.root = root
        self.thread = thread
        self.head = since
        self.known = False  # count and next role read for self.head
        self.count = 0
        self.running = False
        self.next_role: str | None = None
        self.head_ms = 0
        self.busy_since: float | None = None  # when the lock was first seen for this head
        self.done = False

    def poll(self) -> list[dict[str, Any]]:
        if self.done:
            return []
        ref = threads.locate(self.root, self.thread)
        busy = ref.active and view.running(self.root, self.thread)
        events: list[dict[str, Any]] = []
        # A step holds its lock a moment after moving the head (to archive): a step is only
        # taken as started when the lock is held on two polls that see the same head.
        settled = ref.head == self.head and self.known
        if not settled:
            line = view.timeline(self.root, self.thread, after=self.head)
            if self.head is None:
                events.append(_opened(line, busy))
            else:
                for record in line["steps"]:
                    events.append(
                        {"event": "step.completed", "thread": self.thread, "step": record}
                    )
            self.head, self.count, self.known = ref.head, line["count"], True
            self.next_role = (line["next"] or {}).get("role")
            self.head_ms = line["steps"][-1]["timestamp"] if line["steps"] else line["started"]
            self.running, self.busy_since = False, None
        if busy and settled and not self.running:
            events += self._started()
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

    def _started(self) -> list[dict[str, Any]]:
        """The ``step.started`` event once the step's spawn line is logged (or after a second)."""
        now = time.monotonic()
        if self.busy_since is None:
            self.busy_since = now
        agent = running_agent(self.root, self.thread, self.head_ms)
        if agent is None and now - self.busy_since < AGENT_WAIT:
            return []
        self.running = True
        return [
            {
                "event": "step.started",
                "thread": self.thread,
                "number": self.count + 1,
                "role": self.next_role,
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

    def __init__(self, root: Path) -> None:
        self.root = root
        self.followers: dict[str, Follower] = {}

    def poll(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        for item in reversed(threads.list_threads(self.root, status="active")):
            if item["thread"] not in self.followers:
                self.followers[item["thread"]] = Follower(self.root, item["thread"])
        for thread, follower in list(self.followers.items()):
            try:
                events += follower.poll()
            except NotFound:  # gone from both files (a hand edit): stop following it
                follower.done = True
            if follower.done:
                del self.followers[thread]
        return events
