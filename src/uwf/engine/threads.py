"""Thread lifecycle commands other than the step itself: start, show, list, steps, fork, kill.

Each function takes the storage root and returns plain data. A thread is active while it has
an entry in ``threads.yaml`` and archived once it has a line in ``history.jsonl``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from uwf.engine import chain
from uwf.engine.state import HISTORY_STATUSES, State
from uwf.protocol import schemas
from uwf.protocol.store import open_store
from uwf.util import fsio
from uwf.util.base32 import check_hash
from uwf.util.errors import InvalidInput, NotFound, UwfError, oneline
from uwf.util.log import ProcessLog
from uwf.util.timeparse import parse_time_ms
from uwf.util.ulid import check_thread_id, new_thread_id, now_ms, timestamp_ms

MAX_PROMPT_BYTES = 1 << 20
LIST_STATUSES = ("idle", "running", *HISTORY_STATUSES)


@dataclass(frozen=True)
class ThreadRef:
    """Where a thread's head is: active in threads.yaml, or archived in history.jsonl."""

    thread: str
    head: str
    active: bool
    status: str
    workflow: str | None = None


def locate(root: Path, thread: str) -> ThreadRef:
    """The head of an active or archived thread (active wins when in both)."""
    check_thread_id(thread)
    state = State(root)
    head = state.head(thread)
    if head is not None:
        return ThreadRef(thread, head, True, "active")
    entry = state.history_entry(thread)
    if entry is not None:
        return ThreadRef(thread, entry["head"], False, entry["status"], entry["workflow"])
    raise NotFound(f"thread not found: {thread}")


def not_active(root: Path, thread: str) -> UwfError:
    """The error for a thread that has no active head: unknown, or archived (with status)."""
    entry = State(root).history_entry(thread)
    if entry is None:
        return NotFound(f"thread not found: {thread}")
    return InvalidInput(f"thread not active: {thread} (status: {entry['status']})")


def lock_path(root: Path, thread: str) -> Path:
    """The per-thread step lock (``<root>/locks/<thread>.lock``)."""
    return root / "locks" / thread


def is_running(root: Path, thread: str) -> bool:
    """True while some process holds the thread's step lock."""
    path = lock_path(root, thread)
    if not path.with_name(path.name + ".lock").exists():
        return False
    try:
        with fsio.locked(path, wait=False):
            return False
    except UwfError:
        return True


def start(
    root: Path,
    workflow_ident: str,
    prompt: str,
    max_rounds: int | None = None,
    cwd: Path | None = None,
) -> dict[str, Any]:
    """Create a thread: a StartNode in the CAS and its head in threads.yaml. Runs nothing."""
    from uwf.engine import workflows

    try:
        size = len(prompt.encode("utf-8"))
    except UnicodeEncodeError:  # undecodable argv or stdin bytes arrive as lone surrogates
        raise InvalidInput("prompt is not UTF-8 text") from None
    if size > MAX_PROMPT_BYTES:
        raise InvalidInput(f"prompt is too large: {size} bytes (limit {MAX_PROMPT_BYTES})")
    if max_rounds is not None and max_rounds < 1:
        raise InvalidInput(f"--max-rounds must be a positive integer, got: {max_rounds}")
    wf_hash = workflows.resolve_for_start(root, workflow_ident, cwd or Path.cwd())
    store = open_store(root)
    h = schemas.ensure(store)
    payload: dict[str, Any] = {"workflow": wf_hash, "prompt": prompt}
    if max_rounds is not None:
        payload["maxRounds"] = max_rounds
    start_hash = store.put(h.start, payload)
    thread = new_thread_id()
    with State(root).edit_threads() as threads:
        threads[thread] = start_hash
    ProcessLog(root, thread=thread, workflow=wf_hash).write(
        "7HNQ4B2X", f"thread created start={start_hash}"
    )
    return {"workflow": wf_hash, "thread": thread}


def workflow_of(root: Path, ref: ThreadRef) -> str:
    if ref.workflow:
        return ref.workflow
    store = open_store(root)
    try:
        return chain.start_of(store, chain.load_head(store, ref.head)).workflow
    except UwfError:
        raise UwfError(f"failed to resolve workflow from head: {ref.head}") from None


def show(root: Path, thread: str) -> dict[str, Any]:
    """``{workflow, thread, head, done, status, steps}`` — a few node reads, whatever the length."""
    ref = locate(root, thread)
    store = open_store(root)
    head = chain.load_head(store, ref.head)
    workflow = ref.workflow or chain.start_of(store, head).workflow
    status = ref.status
    if ref.active:
        status = "running" if is_running(root, thread) else "idle"
    return {
        "workflow": workflow,
        "thread": thread,
        "head": ref.head,
        "done": not ref.active,
        "status": status,
        "steps": chain.depth_of(store, head),
    }


def _parse_statuses(value: str | None) -> set[str] | None:
    if value is None:
        return None
    text = value.strip()
    if text == "active":
        return {"idle", "running"}
    parts = [p.strip() for p in text.split(",")]
    for part in parts:  # in the order given, so the error names the first bad one
        if part not in LIST_STATUSES:
            allowed = ", ".join((*LIST_STATUSES, "active"))
            raise InvalidInput(f"Invalid status: {oneline(part)}. Must be one of: {allowed}")
    return set(parts)


def list_threads(
    root: Path,
    *,
    all_: bool = False,
    status: str | None = None,
    after: str | None = None,
    before: str | None = None,
    skip: int = 0,
    take: int | None = None,
) -> list[dict[str, Any]]:
    """Threads newest first: active ones, plus archived ones with ``--all`` or a status filter."""
    wanted = _parse_statuses(status)
    if skip < 0:
        raise InvalidInput("--skip must be a non-negative integer")
    if take is not None and take < 1:
        raise InvalidInput("--take must be a positive integer")
    after_ms = parse_time_ms(after) if after is not None else None
    before_ms = parse_time_ms(before) if before is not None else None

    state = State(root)
    store = open_store(root)
    items: list[dict[str, Any]] = []
    active = state.active()
    start_workflow: dict[str, str] = {}
    for thread, head in active.items():
        try:
            node = chain.load_head(store, head)
            start_hash = node.hash if isinstance(node, chain.Start) else node.start
            if start_hash not in start_workflow:
                start_workflow[start_hash] = chain.start_of(store, node).workflow
        except UwfError:
            continue  # an unreadable head is reported by `thread show`, not listed
        st = "running" if is_running(root, thread) else "idle"
        items.append(
            {"thread": thread, "workflow": start_workflow[start_hash], "head": head, "status": st}
        )
    include_archived = all_ or (wanted is not None and bool(wanted & set(HISTORY_STATUSES)))
    if include_archived:
        seen = set(active)
        for entry in reversed(state.history()):  # the LAST line of a thread decides
            if entry["thread"] in seen:
                continue
            seen.add(entry["thread"])
            items.append(
                {
                    "thread": entry["thread"],
                    "workflow": entry["workflow"],
                    "head": entry["head"],
                    "status": entry["status"],
                }
            )
    if wanted is not None:
        items = [i for i in items if i["status"] in wanted]
    if after_ms is not None or before_ms is not None:
        kept = []
        for item in items:
            ts = timestamp_ms(item["thread"])
            if ts is None:
                continue
            if after_ms is not None and not ts > after_ms:
                continue
            if before_ms is not None and not ts < before_ms:
                continue
            kept.append(item)
        items = kept
    items.sort(key=lambda i: timestamp_ms(i["thread"]) or 0, reverse=True)
    end = None if take is None else skip + take
    return items[skip:end]


def steps(root: Path, thread: str) -> dict[str, Any]:
    """Every node of the chain, oldest first, outputs expanded (REFERENCE §1.11)."""
    ref = locate(root, thread)
    store = open_store(root)
    head = chain.load_head(store, ref.head)
    start_node = chain.start_of(store, head)
    out: list[dict[str, Any]] = [
        {
            "hash": start_node.hash,
            "workflow": start_node.workflow,
            "prompt": start_node.prompt,
            "timestamp": start_node.timestamp,
        }
    ]
    for step in chain.steps_oldest_first(store, head):
        out.append(
            {
                "hash": step.hash,
                "role": step.role,
                "output": chain.output_of(store, step),
                "detail": step.payload.get("detail") or None,
                "agent": step.payload.get("agent", ""),
                "timestamp": step.timestamp,
            }
        )
    return {"thread": thread, "workflow": start_node.workflow, "steps": out}


def fork(root: Path, node_hash: str) -> dict[str, Any]:
    """A new active thread whose head is an existing StartNode or StepNode. Copies nothing."""
    check_hash(node_hash)
    store = open_store(root)
    node = store.get(node_hash)
    if node is None:
        raise NotFound(f"CAS node not found: {node_hash}")
    h = schemas.hashes()
    if node.type not in (h.start, h.step):
        raise InvalidInput(f"node {node_hash} is not a StartNode or StepNode")
    thread = new_thread_id()
    with State(root).edit_threads() as threads:
        threads[thread] = node_hash
    ProcessLog(root, thread=thread).write("K2V7N4D9", f"thread forked from={node_hash}")
    return {"thread": thread, "forkedFrom": {"step": node_hash}}


def kill(root: Path, thread: str) -> dict[str, Any]:
    """Archive an active thread with history status ``killed``."""
    check_thread_id(thread)
    state = State(root)
    head = state.head(thread)
    if head is None:
        raise not_active(root, thread)
    workflow = workflow_of(root, ThreadRef(thread, head, True, "active"))
    head = state.archive(thread, workflow, "killed", now_ms())
    ProcessLog(root, thread=thread, workflow=workflow).write(
        "Q8M3T6W1", f"thread killed head={head}"
    )
    return {"thread": thread, "killed": True}
