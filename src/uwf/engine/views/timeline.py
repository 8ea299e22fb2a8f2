"""A thread as the watch, the graph and the web view show it: plain data, read only.

``timeline`` walks back from the head only as far as it is asked (``after``: the newest step
already seen), so following a long thread costs one walk, then a few node reads per new step.
Whether a step is in flight comes from the backend's passive lock query
(``Locks.is_running``): it never takes the step lock, so watching never makes a step fail.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from uwf.backend.base import ActiveThread, Backend
from uwf.cas.store import Store
from uwf.model import artifacts, chain, routing
from uwf.model.threads import active_status, failure_json, locate, waiting_json
from uwf.model.turns import last_assistant_content
from uwf.moderator.evaluate import V05, ModeratorError, Rules, rules_of, status_of
from uwf.protocol.workflow import Workflow
from uwf.util.errors import NotFound, UwfError


def body_text(text: str) -> str:
    """An agent's text output without its leading YAML frontmatter (shown as the output)."""
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":
        for i, line in enumerate(lines[1:], 1):
            if line.strip() == "---":
                return "\n".join(lines[i + 1 :]).strip("\n")
    return text


def seconds(ms: int | None) -> str:
    """A duration for people: ``0.4s``, ``12.0s``, ``3m05s`` (``-`` when unknown)."""
    if ms is None:
        return "-"
    return f"{ms / 1000:.1f}s" if ms < 60_000 else f"{ms // 60_000}m{ms % 60_000 // 1000:02d}s"


def _duration_ms(detail: Any) -> int | None:
    """The agent's own measure of the step, when its detail records one."""
    if isinstance(detail, dict):
        for key in ("durationMs", "duration"):
            value = detail.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _record(
    store: Store, step: chain.Step, number: int, full: bool, rules: Rules = V05
) -> dict[str, Any]:
    output = chain.output_of(store, step)
    if not full:
        return {
            "hash": step.hash,
            "number": number,
            "role": step.role,
            "status": status_of(step.role, output, rules),
            "timestamp": step.timestamp,
        }
    detail_hash = step.payload.get("detail")
    detail = store.get(detail_hash) if isinstance(detail_hash, str) and detail_hash else None
    listed = artifacts.listed(detail.payload if detail is not None else None)
    return {
        "hash": step.hash,
        "number": number,
        "role": step.role,
        "status": status_of(step.role, output, rules),
        "agent": step.payload.get("agent", ""),
        "timestamp": step.timestamp,
        "edgePrompt": step.payload.get("edgePrompt"),
        "output": output,
        "detail": detail_hash or None,
        "durationMs": _duration_ms(detail.payload if detail is not None else None),
        "text": last_assistant_content(store, detail_hash),
        "artifacts": [a.as_json() for a in listed],
        "compact": step.compact,
    }


def timeline(
    backend: Backend, thread: str, after: str | None = None, full: bool = True
) -> dict[str, Any]:
    """``{thread, workflow, workflowName, head, active, status, task, started, count, steps,
    next}``, plus ``waiting`` (``{role, since, reason?, answer}``: the ``thread answer``
    command) and ``failure`` (``thread show``'s) when the thread has them. ``steps`` are the
    steps newer than ``after`` (all when None or not in the chain), oldest first (only hash,
    number, role, status and timestamps unless ``full``; with it also what the step shows, its
    ``artifacts`` and its summary, ``compact``); ``elapsedMs`` is the time since the node
    before (the task or the previous step); ``next`` is where an active thread goes next
    (``{role, status, prompt}``, or ``{error}`` when its graph has no route)."""
    ref = locate(backend, thread)
    store = backend.nodes
    head = chain.load_head(store, ref.head)
    start = chain.start_of(store, head)
    workflow = chain.load_workflow(store, start.workflow)
    count = chain.depth_of(store, head)
    newer: list[chain.Step] = []
    boundary = start.timestamp  # when the node before the oldest new step was written
    for step in chain.iter_steps(store, head):
        if step.hash == after:
            boundary = step.timestamp
            break
        newer.append(step)
    rules = rules_of(workflow)
    records = [_record(store, step, count - i, full, rules) for i, step in enumerate(newer)]
    records.reverse()
    for record in records:  # time since the previous node: the step's upper bound
        record["elapsedMs"] = max(0, record["timestamp"] - boundary)
        boundary = record["timestamp"]
    status = ref.status
    if ref.active:
        status = active_status(ref.waiting, backend.locks.is_running(ref.thread), ref.failure)
    extra: dict[str, Any] = {}
    if ref.active and ref.waiting is not None:
        extra["waiting"] = {
            **waiting_json(ref.waiting),
            "answer": answer_line(store, workflow, thread, ref.waiting.role),
        }
    if ref.active and ref.failure is not None:
        extra["failure"] = failure_json(ref.failure)
    return {
        "thread": thread,
        "workflow": start.workflow,
        "workflowName": workflow.name,
        "cwd": ref.cwd,
        "head": ref.head,
        "active": ref.active,
        "status": status,
        "task": start.prompt,
        "started": start.timestamp,
        "count": count,
        "steps": records,
        "next": _next(store, workflow, head) if ref.active else None,
        **extra,
    }


def answer_line(store: Store, workflow: Workflow, thread: str, role: str) -> str:
    """The ``uwf thread answer`` command that answers ``role`` in ``thread``: its statuses and
    the other fields its schema requires, to fill in (docs/agents.md, "thread answer")."""
    from uwf.moderator import emits

    spec = workflow.role(role)
    meta = spec.meta if spec is not None else None
    node = store.get(meta) if meta is not None else None
    schema = node.payload if node is not None else None
    key = rules_of(workflow).key  # the field --status sets: $status in a version-1 workflow
    parts = [f"uwf thread answer {thread}"]
    found = emits.statuses(schema, key)
    if found.values:
        parts.append(f"--status {'|'.join(found.values)}")
    for field in emits.fields(schema):
        if field.required and field.name != key:
            parts.append(f"--set {field.name}=…")
    parts.append('-m "…"')
    return " ".join(parts)


def _next(store: Store, workflow: Workflow, head: chain.Start | chain.Step) -> dict[str, Any]:
    try:
        decision = routing.decide(store, workflow, head)
    except (ModeratorError, KeyError) as exc:
        return {"error": str(exc)}
    return {"role": decision.role, "status": decision.status, "prompt": decision.prompt}


def workflow_payload(backend: Backend, workflow_hash: str) -> dict[str, Any]:
    """The payload of a thread's Workflow node (``workflow show`` by hash)."""
    payload = chain.workflow_node(backend.nodes, workflow_hash).payload
    if not isinstance(payload, dict):
        raise UwfError(f"workflow {workflow_hash} has no graph")
    return payload


def workflow_names(backend: Backend, hashes: set[str]) -> dict[str, str]:
    """Workflow hash -> name, for the few distinct workflows a listing shows (the hash
    itself when its node cannot be read)."""
    out = {}
    for h in hashes:
        try:
            out[h] = str(workflow_payload(backend, h).get("name") or h)
        except UwfError:
            out[h] = h
    return out


def workflow_graph(backend: Backend, ident: str) -> Any:
    """The routing graph of a workflow file (a path), a registered name, a Workflow hash, or
    the file of a name that is not stored (a project workflow, one of ``workflowPaths``)."""
    from uwf.engine.views import graph
    from uwf.engine.workflows import discovery
    from uwf.engine.workflows import files as workflow_file
    from uwf.engine.workflows import stored as workflows

    if discovery.looks_like_path(ident):
        return graph.of_workflow(workflow_file.load_file(Path(ident)))
    try:
        return graph.of_workflow(workflows.show_workflow(backend, ident)["payload"])
    except NotFound:  # not stored: a project workflow, or one of workflowPaths
        found = discovery.find(ident, Path.cwd()) or discovery.find_in(
            ident, discovery.paths(backend.root)
        )
        if found is None:
            raise
        return graph.of_workflow(workflow_file.load_file(found))


def thread_graph(backend: Backend, thread: str) -> Any:
    """The thread's workflow graph marked with the edges it took and where it is now."""
    from uwf.engine.views import graph

    line = timeline(backend, thread, full=False)
    base = graph.of_workflow(workflow_payload(backend, line["workflow"]))
    steps = [(s["role"], s["status"]) for s in line["steps"]]
    return graph.with_path(base, steps, line["status"])


def family(backend: Backend, thread: str) -> dict[str, Any]:
    """A thread's place in its fan-out tree (docs/format.md, "Fan-out and join"):
    ``{parent, children}``, ``parent`` the thread whose fan-out started it (None), ``children``
    every thread its fan-outs started, oldest first, ``{thread, status, task}`` each."""
    tid = locate(backend, thread).thread
    threads = backend.threads
    record = threads.get(tid)
    entry = threads.history_entry(tid) if record is None else None
    parent = record.info.parent if record is not None else (entry.parent if entry else None)
    running = backend.locks.running()
    children = []
    for child in threads.children(tid):
        if isinstance(child, ActiveThread):
            status = active_status(child.waiting, child.thread in running, child.failure)
            task = child.info.task
        else:
            status, task = child.status, child.task
        children.append({"thread": child.thread, "status": status, "task": task or ""})
    return {"parent": parent, "children": children}
