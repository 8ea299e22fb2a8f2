"""Fan-out and join (docs/format.md, "Fan-out and join"): starting a step's child threads and
gathering their results for the step that joins them.

The moderator decides (``Decision.fan_out``; ``uwf.moderator.fanout`` computes the tasks);
this module writes: the children's StartNodes, then one atomic change of the thread state
(``ThreadTable.fan_out``) that creates the children and marks the parent as waiting for them.
"""

from __future__ import annotations

from typing import Any

from uwf.backend import tree
from uwf.backend.base import ActiveThread, Backend, ThreadInfo, Waiting
from uwf.backend.tree import FanOutLimits
from uwf.model import chain
from uwf.model.threads import FAN_OUT_REASON, task_line
from uwf.moderator import fanout
from uwf.moderator.evaluate import Decision, ModeratorError
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash
from uwf.util.errors import Deferred, NotFound, UwfError
from uwf.util.ulid import ThreadId, new_thread_id, now_ms

REASON = FAN_OUT_REASON  # the reason of a parent's wait mark


def child_workflow(backend: Backend, spec: dict[str, Any]) -> NodeHash:
    """The Workflow the children run: the registered ``spec["workflow"]``. A fan-out that
    names none (a Workflow node stored before uwf asked for one) would have its children run
    the parent's own workflow again: a recursion it did not ask for, refused."""
    name = spec.get("workflow")
    if not isinstance(name, str):
        raise ModeratorError(
            "fan-out names no workflow: its children would run this workflow again, a "
            "recursion the workflow must ask for (fanOut.workflow: its own name); "
            'docs/format.md, "Fan-out and join"'
        )
    found = backend.registry.get(name)
    if found is None:
        raise NotFound(f'fan-out workflow not found: "{name}" (register it with uwf workflow put)')
    return found


def start(
    backend: Backend,
    thread: ThreadId,
    head: NodeHash,
    workflow: NodeHash,
    decision: Decision,
    output: Any,
) -> list[ThreadId]:
    """Start the children of ``thread`` at ``head`` (whose output is ``output``), and mark it
    as waiting for them; their ids, in item order."""
    assert decision.fan_out is not None
    tasks = fanout.tasks(decision.fan_out, output)
    target = child_workflow(backend, decision.fan_out)
    store = backend.nodes
    start_type = schemas.ensure(store).start
    record = backend.threads.get(thread)
    cwd = record.info.cwd if record is not None else None  # children work where it works
    children = []
    for task in tasks:
        start_hash = store.put(start_type, {"workflow": target, "prompt": task})
        info = ThreadInfo(target, task_line(task), cwd=cwd, parent=thread)
        children.append(ActiveThread(new_thread_id(), start_hash, info))
    ids = tuple(child.thread for child in children)
    waiting = Waiting(decision.role, now_ms(), head, REASON, ids)
    backend.threads.fan_out(thread, waiting, children, limits(backend))
    return list(ids)


def limits(backend: Backend) -> FanOutLimits:
    """``fanOut`` of this machine's config.yaml: how far one fan-out tree may grow."""
    from uwf.config.config import load_config

    config = load_config(backend.root)
    return FanOutLimits(config.fan_out_depth, config.fan_out_threads)


def check_tree(backend: Backend, thread: ThreadId, count: int) -> None:
    """FanOutRefused when ``thread``'s tree may not start ``count`` children (checked before
    a step's head moves; ``ThreadTable.fan_out`` checks again, atomically, when it starts
    them)."""
    threads = backend.threads
    refused = tree.refusal(thread, tree.locate(thread, threads.get), count, limits(backend))
    if refused is not None:
        raise refused


def results(backend: Backend, parent: ThreadId, children: tuple[ThreadId, ...]) -> list[Any]:
    """Each child's result for the join, in order: ``{thread, task, status, role, output,
    head}``. Deferred (exit 6) while any child is still active."""
    threads = backend.threads
    active = [child for child in children if threads.head(child) is not None]
    if active:
        raise Deferred(
            f"thread {parent} waits for its children: {len(active)} of {len(children)} still "
            f"active ({', '.join(active[:3])}{', …' if len(active) > 3 else ''})"
        )
    store = backend.nodes
    out = []
    for child in children:
        entry = threads.history_entry(child)
        if entry is None:
            raise UwfError(f"thread {parent}: its child thread {child} is missing from the store")
        node = chain.load_head(store, entry.head)
        step = node if isinstance(node, chain.Step) else None
        out.append(
            {
                "thread": child,
                "task": chain.start_of(store, node).prompt,
                "status": entry.status,
                "role": step.role if step is not None else None,
                "output": chain.output_of(store, step) if step is not None else {},
                "head": entry.head,
            }
        )
    return out
