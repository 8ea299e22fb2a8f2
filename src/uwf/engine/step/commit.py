"""Committing a step: check the agent's StepNode, route it, move the head, archive at the end.

The order is what makes "nothing lost" hold (docs/architecture.md, "Where a step happens"):
the StepNode is checked and routed by the moderator BEFORE the head moves, so a step whose
output has no route fails and leaves the head where it was; the head then moves by the
backend's compare-and-swap from the head the plan was made from; only then is the thread
archived if the new head routes to ``$END`` or reaches its round limit.

An output whose status is ``$SUSPEND`` is never routed: the step is not recorded and the
thread waits for its role, as when an agent defers (docs/format.md, "Suspending and
resuming"). Agents on the agent kit suspend before they write a step; this is for the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from uwf.backend.base import Backend, Ending
from uwf.backend.tree import FanOutRefused
from uwf.cas.store import Store
from uwf.engine.step.plan import StepPlan, decide_after
from uwf.engine.step.run import suspend
from uwf.model import artifacts, chain, routing
from uwf.moderator import fanout as fanout_rules
from uwf.moderator.evaluate import SUSPEND, Decision, ModeratorError
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash
from uwf.util.errors import AgentFailed, InvalidInput, NotActive, NotFound, UwfError
from uwf.util.log import ProcessLog
from uwf.util.ulid import ThreadId, now_ms

if TYPE_CHECKING:
    from uwf.util.outputs import StepLine


@dataclass(frozen=True)
class StepResult:
    """What one ``thread step`` did: one JSON line (docs/errors.md, "The step's output").

    ``status`` is the thread's status after the step: ``active``, or how it ended
    (``completed``, ``max_rounds``, ``killed``). ``role`` is the role that ran, None when the
    thread ended without running one.
    """

    workflow: NodeHash
    thread: ThreadId
    head: NodeHash
    role: str | None
    done: bool
    status: str
    children: tuple[ThreadId, ...] | None = None  # the child threads this step started

    def as_json(self) -> StepLine:
        out: StepLine = {
            "workflow": self.workflow,
            "thread": self.thread,
            "head": self.head,
            "role": self.role,
            "done": self.done,
            "status": self.status,
        }
        if self.children is not None:
            out["children"] = list(self.children)
        return out


def check_step_node(store: Store, h: NodeHash, plan: StepPlan) -> chain.Step:
    """The StepNode at ``h`` if it is the step the plan asked for, else AgentFailed."""
    node = store.get(h)
    if node is None:
        raise AgentFailed(f"agent returned a hash that is not in the store: {h}")
    if node.type not in schemas.hashes().steps:
        raise AgentFailed(f"agent returned hash that is not a StepNode: {h}")
    step = chain.Step(h, node.payload, node.timestamp)
    expected_prev = None if plan.head == plan.start else plan.head
    problems = []
    if step.start != plan.start:
        problems.append(f"start is {step.start}, expected {plan.start}")
    if step.prev != expected_prev:
        problems.append(f"prev is {step.prev or 'null'}, expected {expected_prev or 'null'}")
    if step.role != plan.role:
        problems.append(f'role is "{step.role}", expected "{plan.role}"')
    if step.depth is not None and step.depth != plan.depth + 1:
        problems.append(f"depth is {step.depth}, expected {plan.depth + 1}")
    children = step.payload.get("children")
    expected_children = list(plan.children) if plan.children is not None else None
    if children != expected_children:
        problems.append(f"children are {_listed(children)}, expected {_listed(expected_children)}")
    if problems:
        raise AgentFailed(f"agent returned StepNode {h} for another step: {'; '.join(problems)}")
    listed = artifacts.of_detail(store, step.payload.get("detail"))
    try:  # names `step artifacts --extract` could not write back are refused now, not then
        artifacts.check_names([a.path for a in listed])
    except InvalidInput as exc:
        raise AgentFailed(
            f"agent returned StepNode {h} with bad artifacts: {exc.message}"
        ) from None
    return step


def _listed(children: object) -> str:
    if not isinstance(children, list):
        return "none" if children is None else repr(children)
    return "[" + ", ".join(str(child) for child in children) + "]"


def archive(backend: Backend, plan: StepPlan, status: str, head: NodeHash, log: ProcessLog) -> str:
    """Archive the thread at ``head`` (compare-and-swap) and log it; the status it ended with.

    ``thread kill`` does not take the step lock: if it archived the thread between our head
    move and here, the step is recorded all the same and the thread stays ``killed``.
    """
    try:
        backend.threads.archive(plan.thread, plan.workflow, status, now_ms(), expected=head)
    except NotActive:
        entry = backend.threads.history_entry(plan.thread)
        if backend.threads.head(plan.thread) is not None or entry is None:
            raise
        return entry.status
    log.write("F4D8Q2K5", f"thread archived status={status} head={head}")
    return status


def commit_step(backend: Backend, plan: StepPlan, h: NodeHash, log: ProcessLog) -> StepResult:
    """Check, route, move the head from ``plan.head`` to ``h``, archive at the end."""
    store = backend.nodes
    step = check_step_node(store, h, plan)
    workflow = chain.load_workflow(store, plan.workflow)
    output = chain.output_of(store, step)
    if routing.step_status(workflow, step.role, output) == SUSPEND:
        raise suspend(backend, plan, _reason(output), log)
    try:
        after = decide_after(store, workflow, step, output)
        if after.fan_out is not None:  # checked before the head moves
            from uwf.engine.step import fanout

            tasks = fanout_rules.tasks(after.fan_out, output)
            fanout.child_workflow(backend, after.fan_out)
            fanout.check_tree(backend, plan.thread, len(tasks))
    except (ModeratorError, NotFound, FanOutRefused) as exc:
        raise AgentFailed(f"post-step moderator evaluate failed: {exc} (head not moved)") from None
    ending = None
    if after.done:
        ending = "completed"
    elif plan.limit is not None and plan.depth + 1 - plan.rounds_before >= plan.limit:
        ending = "max_rounds"
    end = Ending(plan.workflow, ending, now_ms()) if ending is not None else None
    ended = backend.threads.move(plan.thread, plan.head, h, end=end)  # archived too, maybe
    status = "active"
    children = None
    if ending is not None and ended:
        status = ending
        log.write("T7M2K9Q4", f"thread archived status={status} head={h}")
    elif ending is not None:
        status = archive(backend, plan, ending, h, log)
    elif after.fan_out is not None:
        children = start_children(backend, plan, h, after, step, log)
    return StepResult(
        plan.workflow, plan.thread, h, plan.role, status != "active", status, children
    )


def _reason(output: object) -> str | None:
    """Why an output suspends its step: its ``reason``."""
    reason = output.get("reason") if isinstance(output, dict) else None
    return reason if isinstance(reason, str) and reason.strip() else None


def start_children(
    backend: Backend,
    plan: StepPlan,
    head: NodeHash,
    decision: Decision,
    step: chain.Start | chain.Step,
    log: ProcessLog,
) -> tuple[ThreadId, ...] | None:
    """Start the fan-out the step at ``head`` routes through, once its head has moved. A
    failure here leaves the step recorded: the thread's next step starts them (None)."""
    from uwf.engine.step import fanout

    output = chain.output_of(backend.nodes, step) if isinstance(step, chain.Step) else {}
    try:
        ids = fanout.start(backend, plan.thread, head, plan.workflow, decision, output)
    except UwfError as exc:
        log.write("K4F7N2Q8", f"fan-out not started: {exc.message}")
        return None
    log.write("P6W3H9T2", f"fan-out started children={','.join(ids)}")
    return tuple(ids)
