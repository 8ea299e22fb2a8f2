"""What ``uwf eval list`` and ``uwf eval report`` read: the EvalRun nodes of the store, found
through the type index (docs/evals.md, "Reading results")."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, cast

from uwf.backend.base import Backend
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash, is_hash
from uwf.util.errors import CorruptNode, NotFound

if TYPE_CHECKING:
    from uwf.util.outputs import EvalGroup, EvalListed, EvalRunShown, EvalStats, EvalTaskReport


def runs(backend: Backend) -> Iterator[tuple[NodeHash, dict[str, Any]]]:
    """Every EvalRun node, oldest first (a node that cannot be read is left out: ``cas
    verify`` reports it)."""
    store = backend.nodes
    for h in store.index(schemas.hashes().eval_run):
        try:
            node = store.get(h)
        except CorruptNode:
            continue
        if node is not None and isinstance(node.payload, dict):
            yield NodeHash(h), node.payload


def list_runs(backend: Backend, task: str | None = None) -> list[EvalListed]:
    """``[{run, task, batch, workflow, workflowName, agent, thread, outcome, score,
    startedAt, durationMs}]``, oldest first; ``task`` keeps that task's runs."""
    return [
        {
            "run": h,
            "task": p["task"],
            "batch": p["batch"],
            "workflow": p["workflow"],
            "workflowName": p["workflowName"],
            "agent": p["agent"],
            "thread": p["thread"],
            "outcome": p["outcome"],
            "score": p["score"],
            "startedAt": p["startedAt"],
            "durationMs": p["durationMs"],
        }
        for h, p in runs(backend)
        if task is None or p["task"] == task
    ]


def report(backend: Backend, ident: str) -> EvalRunShown | EvalTaskReport:
    """One run (``ident`` an EvalRun hash) as stored, or a task's runs summed up per
    workflow version and agent."""
    if is_hash(ident):
        node = backend.nodes.get(ident)
        if node is None or node.type != schemas.hashes().eval_run:
            raise NotFound(f"not an eval run: {ident}")
        return cast("EvalRunShown", {"run": NodeHash(ident), **node.payload})
    found = [p for _, p in runs(backend) if p["task"] == ident]
    if not found:
        raise NotFound(f"no eval runs of task {ident} (uwf eval list shows the tasks run)")
    return {"task": ident, "groups": groups(found)}


def groups(found: list[dict[str, Any]]) -> list[EvalGroup]:
    """The runs grouped by what ran them (workflow version, agent), first seen first."""
    keyed: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    for payload in found:
        keyed.setdefault((payload["workflow"], payload["agent"]), []).append(payload)
    out: list[EvalGroup] = []
    for (workflow, agent), members in keyed.items():
        outcomes: dict[str, int] = {}
        for m in members:
            outcomes[m["outcome"]] = outcomes.get(m["outcome"], 0) + 1
        names = list(dict.fromkeys(j["name"] for m in members for j in m["judges"]))
        out.append(
            {
                "workflow": NodeHash(workflow),
                "workflowName": members[0]["workflowName"],
                "agent": agent,
                "runs": len(members),
                "outcomes": outcomes,
                "score": stats([m["score"] for m in members]),
                "judges": {
                    name: stats(
                        [j["score"] for m in members for j in m["judges"] if j["name"] == name]
                    )
                    for name in names
                },
            }
        )
    return out


def stats(values: list[float]) -> EvalStats:
    """Mean, spread (the sample standard deviation; 0 for one value), min and max."""
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return {
        "n": len(values),
        "mean": round(statistics.fmean(values), 6) if values else 0.0,
        "stdev": round(spread, 6),
        "min": min(values, default=0.0),
        "max": max(values, default=0.0),
    }
