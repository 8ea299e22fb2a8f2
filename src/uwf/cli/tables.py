"""What ``--format table`` shows of ``thread list``, ``thread show`` and ``thread steps``: the
columns a person reads at a terminal, made from the same plain data as the JSON (which stays
the contract). ``cli/columns.table`` renders them; ``workflow list`` needs no module of its
own. No ``from __future__ import annotations``: see ``cli/options``.
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from uwf.cli.columns import age
from uwf.cli.options import Rows

if TYPE_CHECKING:
    from uwf.backend.base import Backend
    from uwf.util.outputs import (
        StartAt,
        StartEntry,
        StepAt,
        StepEntry,
        ThreadListed,
        ThreadShown,
        ThreadSteps,
    )


def _now() -> int:
    from uwf.util.ulid import now_ms

    return now_ms()


ACTIVE = ("idle", "running", "waiting", "failing", "failed")  # a child still to end


def fanned_out(children: int, active: int) -> str:
    """A fan-out parent's status: not a thread waiting for a person."""
    noun = "child" if children == 1 else "children"
    left = f"{active} active" if active else "all ended"
    return f"fanned out ({children} {noun}, {left})"


def _status(item: "ThreadListed | ThreadShown") -> str:
    """The status, with who a waiting thread waits for; a fan-out parent's, with its
    children."""
    shown = cast("Mapping[str, Any]", item)
    fan = shown.get("fanOut")
    if fan is not None:  # thread list
        return fanned_out(fan["children"], fan["active"])
    children = shown.get("children")
    if children is not None:  # thread show
        return fanned_out(len(children), sum(1 for c in children if c["status"] in ACTIVE))
    waiting = item.get("waiting")
    return f"{item['status']} ({waiting['role']})" if waiting else str(item["status"])


def _failure(failure: Mapping[str, Any] | None) -> str:
    if not failure:
        return ""
    times = f"×{failure['attempts']} " if failure["attempts"] > 1 else ""
    return f"{times}exit {failure['code']}: {failure['error']}"


def list_rows(backend: "Backend", items: "list[ThreadListed]") -> Rows:
    """``thread list``: thread, age, status, workflow (its name), task, last failure."""
    from uwf.engine.views.timeline import workflow_names

    names = workflow_names(backend, {i["workflow"] for i in items})
    now = _now()
    rows: list[list[object]] = [
        [
            i["thread"],
            age(i["createdAt"], now),
            _status(i),
            names.get(i["workflow"], i["workflow"]),
            i["task"],
            _failure(i.get("failure")),
        ]
        for i in items
    ]
    return ["THREAD", "AGE", "STATUS", "WORKFLOW", "TASK", "LAST FAILURE"], rows


def show_rows(backend: "Backend", shown: "ThreadShown") -> Rows:
    """``thread show``: one field per line."""
    from uwf.engine.views.timeline import workflow_names

    now = _now()
    workflow = shown["workflow"]
    cost = shown.get("cost") or {}
    rows: list[list[object]] = [
        ["thread", shown["thread"]],
        ["workflow", f"{workflow_names(backend, {workflow})[workflow]} ({workflow})"],
        ["status", _status(shown)],
        ["steps", shown["steps"]],
        ["head", shown["head"]],
        ["cost", f"{cost.get('totalTokens', 0)} tokens, {cost.get('calls', 0)} model calls"],
    ]
    if "cwd" in shown:
        rows.insert(5, ["working directory", shown["cwd"]])
    waiting = shown.get("waiting")
    if waiting:
        reason = f": {waiting['reason']}" if waiting.get("reason") else ""
        rows.append(["waiting", f"for {waiting['role']} for {age(waiting['since'], now)}{reason}"])
    failure = shown.get("failure")
    if failure:
        rows.append(["last failure", f"{age(failure['at'], now)} ago, {_failure(failure)}"])
    background = shown.get("background")
    if background:
        rows.append(["background", f"pid {background['pid']} on {background['host']}"])
    worker = shown.get("worker")
    if worker:
        where = f" (pid {worker['pid']} on {worker['host']})" if "pid" in worker else ""
        rows.append(["worker", f"{worker['id']}{where}"])
    return None, rows


STEP_COLUMNS = ["#", "HASH", "ROLE", "STATUS", "AGENT", "TOOK", "TOKENS", "AGE"]


def _start_row(n: int, start: "StartEntry", now: int) -> list[object]:
    return [n, start["hash"], "(task)", "", "", "", "", age(start["timestamp"], now)]


def _step_row(n: int, step: "StepEntry", now: int, key: str) -> list[object]:
    output = step["output"]
    status = output.get(key, "") if isinstance(output, dict) else ""
    took = step["durationMs"]
    usage = step["usage"]
    return [
        n,
        step["hash"],
        step["role"],
        status,
        step["agent"],
        "" if took is None else f"{took / 1000:.1f}s",
        "" if usage is None else usage["totalTokens"],
        age(step["timestamp"], now),
    ]


def _routing_key(backend: "Backend", workflow: str | None) -> str:
    """The output field a workflow routes on (``$status`` in a version-1 workflow)."""
    from uwf.moderator.evaluate import rules_of
    from uwf.protocol.workflow import Workflow
    from uwf.util.base32 import NodeHash

    node = backend.nodes.get(workflow) if workflow is not None else None
    if workflow is None or node is None or not isinstance(node.payload, dict):
        return rules_of(None).key
    return rules_of(Workflow(NodeHash(workflow), node.payload)).key


def steps_rows(backend: "Backend", listed: "ThreadSteps") -> Rows:
    """``thread steps``: number, hash, role, status, agent, time taken, tokens, age (the task
    first, as step 0); the status is the field the workflow routes on (``$status`` in a
    version-1 workflow)."""
    key = _routing_key(backend, listed["workflow"])
    now = _now()
    start, *steps = listed["steps"]
    rows = [_start_row(0, cast("StartEntry", start), now)]
    for n, step in enumerate(cast("list[StepEntry]", steps), start=1):  # the StartNode is first
        rows.append(_step_row(n, step, now, key))
    return STEP_COLUMNS, rows


def step_at_rows(backend: "Backend", found: "StartAt | StepAt") -> Rows:
    """``thread steps --at N``: step N alone, in ``thread steps``' columns."""
    from uwf.model.threads import locate

    now = _now()
    if "role" in found:
        key = _routing_key(backend, locate(backend, found["thread"]).workflow)
        return STEP_COLUMNS, [_step_row(found["number"], cast("StepAt", found), now, key)]
    return STEP_COLUMNS, [_start_row(found["number"], found, now)]
