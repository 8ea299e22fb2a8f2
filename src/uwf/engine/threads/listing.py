"""``thread list``: the threads of the table and, on request, of the history, newest first,
filtered and paged (docs/format.md, "Thread state").

A listed thread's workflow and task are read from the thread table's record; only threads
recorded by versions that kept neither read their StartNode, and only for the page shown.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from uwf.backend.base import HISTORY_STATUSES, Backend
from uwf.model import chain
from uwf.model.threads import active_status, failure_json, fanned_out, task_line, waiting_json
from uwf.util.base32 import NodeHash
from uwf.util.errors import UsageError, UwfError, oneline
from uwf.util.ulid import ThreadId, check_thread_id, timestamp_ms

if TYPE_CHECKING:
    from uwf.util.outputs import ThreadListed

LIST_STATUSES = ("idle", "running", "waiting", "failing", "failed", *HISTORY_STATUSES)
ACTIVE_STATUSES = ("idle", "running", "waiting", "failing", "failed")


def _parse_statuses(value: str | None) -> set[str] | None:
    if value is None:
        return None
    text = value.strip()
    if text == "active":
        return set(ACTIVE_STATUSES)
    parts = [p.strip() for p in text.split(",")]
    for part in parts:  # in the order given, so the error names the first bad one
        if part not in LIST_STATUSES:
            allowed = ", ".join((*LIST_STATUSES, "active"))
            raise UsageError(f"Invalid status: {oneline(part)}. Must be one of: {allowed}")
    return set(parts)


class _Starts:
    """The StartNodes of listed heads, each read once: only for threads created by versions
    that recorded neither workflow nor task (``ThreadInfo``)."""

    def __init__(self, backend: Backend) -> None:
        self.store = backend.nodes
        self.read: dict[str, chain.Start] = {}

    def of(self, head: str) -> chain.Start:
        node = chain.load_head(self.store, NodeHash(head))
        start_hash = node.hash if isinstance(node, chain.Start) else node.start
        if start_hash not in self.read:
            self.read[start_hash] = chain.start_of(self.store, node)
        return self.read[start_hash]


def _active_items(backend: Backend, starts: _Starts) -> list[ThreadListed]:
    """The active threads as listed; the workflow is read from nodes only when not recorded."""
    running = backend.locks.running()
    items: list[ThreadListed] = []
    records = backend.threads.active()
    live = {record.thread for record in records}
    for record in records:
        workflow: str | None = record.info.workflow
        task = record.info.task
        if workflow is None:
            try:
                start = starts.of(record.head)
            except UwfError:
                continue  # an unreadable head is reported by `thread show`, not listed
            workflow, task = start.workflow, task or task_line(start.prompt)
        status = active_status(record.waiting, record.thread in running, record.failure)
        item = _item(record.thread, workflow, record.head, status, task)
        if record.waiting is not None:
            item["waiting"] = waiting_json(record.waiting)
            if fanned_out(record.waiting):
                kids = record.waiting.children or ()
                item["fanOut"] = {"children": len(kids), "active": len(live.intersection(kids))}
        if record.failure is not None:
            item["failure"] = failure_json(record.failure)
        if record.info.priority:
            item["priority"] = record.info.priority
        items.append(item)
    return items


def _item(
    thread: ThreadId, workflow: str, head: NodeHash, status: str, task: str | None
) -> ThreadListed:
    """One listed thread; ``createdAt`` (unix ms) comes from the ULID, ``task`` may be None
    until ``_fill_tasks``."""
    return {
        "thread": thread,
        "workflow": workflow,
        "head": head,
        "status": status,
        "task": task,
        "createdAt": timestamp_ms(thread),
    }


def _fill_tasks(starts: _Starts, items: list[ThreadListed]) -> None:
    """The task line of listed threads that recorded none (archived by older versions), from
    their StartNode: only for the items shown, after filters and pagination."""
    for item in items:
        if item["task"] is None:
            try:
                item["task"] = task_line(starts.of(item["head"]).prompt)
            except UwfError:
                continue  # an unreadable chain: the task stays unknown


def _archived_items(backend: Backend, seen: set[str]) -> list[ThreadListed]:
    items = []
    for entry in reversed(backend.threads.history()):  # the LAST entry of a thread decides
        if entry.thread in seen:
            continue
        seen.add(entry.thread)
        items.append(_item(entry.thread, entry.workflow, entry.head, entry.status, entry.task))
    return items


def _in_window(thread: str, after_ms: int | None, before_ms: int | None) -> bool:
    ts = timestamp_ms(thread)
    if ts is None:
        return False
    return (after_ms is None or ts > after_ms) and (before_ms is None or ts < before_ms)


def list_threads(
    backend: Backend,
    *,
    all_: bool = False,
    status: str | None = None,
    workflow: str | None = None,
    after: str | None = None,
    before: str | None = None,
    skip: int = 0,
    take: int | None = None,
    parent: str | None = None,
) -> list[ThreadListed]:
    """Threads newest first: active ones, plus archived ones with ``--all`` or a status filter.

    Each ``{"thread","workflow","head","status","task","createdAt"}``: ``task`` is the first
    line of the task (recorded when the thread was created), ``createdAt`` unix ms.
    ``workflow``: a name (any of its stored versions) or a Workflow hash.
    """
    wanted = _parse_statuses(status)
    if skip < 0:
        raise UsageError("--skip must be a non-negative integer")
    if take is not None and take < 1:
        raise UsageError("--take must be a positive integer")
    from uwf.util.timeparse import parse_time_ms

    after_ms = parse_time_ms(after) if after is not None else None
    before_ms = parse_time_ms(before) if before is not None else None

    versions = None
    if workflow is not None:
        from uwf.engine.step.fleet import workflow_versions

        versions = workflow_versions(backend, workflow)
    kids = None
    if parent is not None:  # active and archived (docs/format.md, "Fan-out and join")
        kids = {child.thread for child in backend.threads.children(check_thread_id(parent))}
    starts = _Starts(backend)
    items = _active_items(backend, starts)
    if all_ or kids is not None or (wanted is not None and bool(wanted & set(HISTORY_STATUSES))):
        items += _archived_items(backend, {item["thread"] for item in items})
    if kids is not None:
        items = [i for i in items if i["thread"] in kids]
    if wanted is not None:
        items = [i for i in items if i["status"] in wanted]
    if versions is not None:
        items = [i for i in items if i["workflow"] in versions]
    if after_ms is not None or before_ms is not None:
        items = [i for i in items if _in_window(i["thread"], after_ms, before_ms)]
    # A ULID's first 10 characters are its creation time, in an alphabet that sorts like
    # the numbers it encodes (and every id here was checked): no decoding to sort.
    items.sort(key=lambda i: i["thread"][:10], reverse=True)
    end = None if take is None else skip + take
    page = items[skip:end]
    _fill_tasks(starts, page)
    return page
