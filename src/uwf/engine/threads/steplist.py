"""``thread steps`` and a step by its number (``thread steps --at``, ``thread fork --at``):
the chain as its entries, oldest first, each with its output and what it cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uwf.backend.base import Backend
from uwf.model import chain, cost
from uwf.model.threads import locate
from uwf.util.base32 import NodeHash

if TYPE_CHECKING:
    from uwf.cas.store import Store
    from uwf.util.outputs import StartAt, StartEntry, StepAt, StepEntry, ThreadSteps


_FREE = cost.Cost()


def steps(backend: Backend, thread: str) -> ThreadSteps:
    """Every node of the chain, oldest first, outputs expanded, each step's cost.

    Two reads per step (the StepNode, its detail for the cost), plus one per distinct
    output: a role that answers alike on many steps (an approval, a rejection) stores that
    output once, and it is read once.
    """
    ref = locate(backend, thread)
    store = backend.nodes
    head = chain.load_head(store, ref.head)
    start, entries, total = chain_entries(store, head)
    return {
        "thread": ref.thread,
        "workflow": start["workflow"],
        "steps": [start, *entries],
        "cost": total.thread_json(head.timestamp - start["timestamp"]),
    }


def step_at(backend: Backend, thread: str, number: int) -> StartAt | StepAt:
    """Step ``number`` of a thread (0: its StartNode), as ``thread steps`` lists it, with
    ``thread`` and ``number``: found through the step index (``model.stepindex``), so a few
    reads at any depth."""
    from uwf.model import stepindex

    ref = locate(backend, thread)
    store = backend.nodes
    node = stepindex.step_at(backend, chain.load_head(store, ref.head), number)
    if isinstance(node, chain.Start):
        return {"thread": ref.thread, "number": number, **start_entry(node)}
    entry, _ = step_entry(store, node, chain.output_of(store, node))
    return {"thread": ref.thread, "number": number, **entry}


def start_entry(start: chain.Start) -> StartEntry:
    return {
        "hash": start.hash,
        "workflow": start.workflow,
        "prompt": start.prompt,
        "timestamp": start.timestamp,
    }


def step_entry(
    store: Store, step: chain.Step, output: Any, *, keep: bool = True
) -> tuple[StepEntry, cost.Cost]:
    """A step as ``thread steps`` lists it, and what it cost (``keep``: as ``Store.get``)."""
    payload = step.payload
    spent, paid = cost.step_cost(store, step, keep=keep)
    entry: StepEntry = {
        "hash": step.hash,
        "role": step.role,
        "output": output,
        "detail": payload.get("detail") or None,
        "agent": payload.get("agent", ""),
        "timestamp": step.timestamp,
        **spent,
    }
    return entry, paid


def chain_entries(
    store: Store, head: chain.Start | chain.Step
) -> tuple[StartEntry, list[StepEntry], cost.Cost]:
    """The StartNode, then every step oldest first, each with its output expanded and what
    it cost; and the chain's total cost.

    Each step's output and detail are read as the walk back from the head reaches it, not
    in a second pass: a packed chain's nodes sit together in its blocks, so the walk
    inflates each block once (docs/performance.md, "Full history"). Nothing the walk reads
    is kept by the process (``Store.get``): each node is read once, and a long chain would
    only push out what the process keeps.
    """
    out: list[StepEntry] = []
    total = cost.Cost()
    outputs: dict[Any, Any] = {}
    for step in chain.iter_steps(store, head, keep=False):
        key = step.payload.get("output")
        if key not in outputs:
            outputs[key] = chain.output_of(store, step, keep=False)
        entry, paid = step_entry(store, step, outputs[key], keep=False)
        if paid != _FREE:  # most steps record no cost: no sum made for them
            total = total + paid
        out.append(entry)
    out.reverse()
    start = start_entry(chain.start_of(store, head))  # beside the first steps: read last
    return start, out, total


def step_hash_at(backend: Backend, thread: str, number: int) -> tuple[NodeHash, str | None]:
    """The hash of step ``number`` of a thread (``thread fork <thread> --at N``) and the
    thread's working directory, which the fork keeps unless given another."""
    from uwf.model import stepindex

    ref = locate(backend, thread)
    head = chain.load_head(backend.nodes, ref.head)
    return stepindex.step_at(backend, head, number).hash, ref.cwd
