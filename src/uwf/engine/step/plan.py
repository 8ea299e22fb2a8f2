"""Deciding a step: what the thread's head calls for, with nothing run and nothing written.

``plan_step`` reads the head, its StartNode and workflow, runs the moderator and looks up the
agent. The result is a frozen :class:`StepPlan`: either the thread ends here (``archive``:
its head already routes to ``$END``, or it has reached its round limit), or a role runs
(``role``, the rendered ``prompt``, the agent's ``argv`` and the directory it works in,
``cwd``: the thread's working directory, or the edge's ``location`` resolved against it). A
dry run prints the plan. ``preplan`` plans a step before its lock is taken (``Planned``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypedDict

from uwf.backend.base import ActiveThread, Backend, Failure
from uwf.config.config import (
    PYTHON_PREFIX,
    Config,
    agent_alias,
    agent_command,
    load_config,
)
from uwf.model import chain, routing
from uwf.moderator.evaluate import BlankPrompt, Decision, ModeratorError
from uwf.protocol import schemas
from uwf.protocol.workflow import Workflow
from uwf.util import secrets
from uwf.util.base32 import NodeHash, describe
from uwf.util.errors import InvalidInput, UsageError, UwfError
from uwf.util.tuples import NamedTuple
from uwf.util.ulid import ThreadId

if TYPE_CHECKING:
    from uwf.cas.store import Store
    from uwf.util.outputs import DryRun

    class _Planned(TypedDict, total=False):
        """What a dry run says of a step that runs (printed before ``dryRun``)."""

        prompt: str
        agent: list[str]
        cwd: str


class Limit(NamedTuple):
    """A fleet limit a step is held to (docs/format.md, "Limits"): ``limits.<section>.<name>``
    of config.yaml, ``section`` being ``agents`` or ``providers``."""

    section: str
    name: str
    concurrency: int | None
    per_minute: int | None


@dataclass(frozen=True)
class StepPlan:
    """One step, decided. ``archive`` set: the thread ends; else ``role`` runs via ``argv``."""

    thread: ThreadId
    workflow: NodeHash
    workflow_name: str
    start: NodeHash
    head: NodeHash  # the head the plan was made from; the step commits only onto it
    depth: int  # steps in the chain so far; the new step is depth + 1
    limit: int | None  # maxRounds
    archive: str | None = None  # "completed" or "max_rounds": end the thread, run nothing
    role: str | None = None
    prompt: str = ""
    argv: tuple[str, ...] = ()
    timeout: float | None = None
    cwd: str | None = None  # where the agent works: None, the directory uwf runs in
    rounds_before: int = 0  # steps of the ended thread a resumed one continues (not counted)
    # docs/format.md, "Fan-out and join": start the children and run nothing (``fan_out``), or
    # the join: the children's final heads, which the new StepNode must carry
    fan_out: Decision | None = None
    children: tuple[NodeHash, ...] | None = None
    limits: tuple[Limit, ...] = ()  # the agent's and its provider's, when configured
    # the retry policies the workflow file sets (docs/format.md, "Retries"): its top's, then
    # the role's, each as written ({attempts?, backoff?, maxBackoff?})
    file_retry: tuple[Mapping[str, float], ...] = ()
    # the failed attempts at this head before this step (docs/format.md, "Previous attempts"):
    # the agent gets them in UWF_PREVIOUS_ATTEMPTS and its step's detail keeps them
    previous_attempts: Mapping[str, Any] | None = None

    @property
    def python(self) -> str | None:
        """The reference of the Python agent the step runs in uwf's process (its agent
        command is ``python:<reference>``: docs/api.md, "Python agents"), else None."""
        command = self.argv[0] if self.argv else ""
        return command[len(PYTHON_PREFIX) :] if command.startswith(PYTHON_PREFIX) else None

    def dry_run(self) -> DryRun:
        """What ``thread step --dry-run`` prints."""
        planned: _Planned = {}
        if self.archive is None and self.fan_out is None:
            planned = {"prompt": self.prompt, "agent": list(self.argv)}
            if self.cwd is not None:
                planned["cwd"] = self.cwd
        out: DryRun = {
            "workflow": self.workflow,
            "thread": self.thread,
            "head": self.head,
            "role": self.role,
            "done": self.archive is not None,
            "status": self.archive or "active",
            "dryRun": True,
        }
        return {**out, **planned, "dryRun": True}  # dryRun last, as it always was


def decide(
    store: Store,
    workflow: Workflow,
    head: chain.Start | chain.Step,
    children: list[Any] | None = None,
) -> Decision:
    """The moderator's decision for a head (``$START`` for a thread with no steps yet);
    ``children``: the joined children's results, for the prompt. A step's decision made when
    it was committed (``decide_after``) is not made again."""
    if children is None and isinstance(head, chain.Step):
        found = _decided.get((workflow.hash, head.hash))
        if found is not None:
            return found
    return routing.decide(store, workflow, head, children=children)


#: The decisions made for the heads this process committed, by (workflow, head) hash: the
#: next step of the thread plans from the same two immutable nodes (docs/architecture.md,
#: "What a process keeps"). A few per thread stepping here; cleared when full.
_decided: dict[tuple[str, str], Decision] = {}
_DECIDED_KEPT = 256


def decide_after(store: Store, workflow: Workflow, step: chain.Step, output: Any) -> Decision:
    """The decision for ``step``, just written, whose ``output`` the caller read (the
    commit's), kept for the thread's next plan (``decide``)."""
    decision = routing.decide(store, workflow, step, output)
    if len(_decided) >= _DECIDED_KEPT:
        _decided.clear()
    _decided[(workflow.hash, step.hash)] = decision
    return decision


def round_limit(start: chain.Start, config: Config) -> int | None:
    """maxRounds: the thread's own (``--max-rounds`` at start), else config's, else none.
    It counts the steps since the StartNode: a resumed thread has as many again."""
    return start.max_rounds if start.max_rounds is not None else config.max_rounds


def agent_dir(workdir: str | None, location: str | None) -> str | None:
    """Where the agent of a step works: the edge's ``location`` (absolute, or relative to the
    thread's working directory, else to uwf's), else the thread's working directory, else
    None (uwf's own)."""
    if location is None:
        return workdir
    base = workdir if workdir is not None else os.getcwd()
    return os.path.normpath(os.path.join(base, os.path.expanduser(location)))


def plan_step(
    backend: Backend,
    thread: ThreadId,
    head: NodeHash,
    *,
    agent: str | None = None,
    timeout: float | None = None,
    edge_prompt: str | None = None,
    by: tuple[str, ...] | None = None,
    workdir: str | None = None,
    extra_prompt: str | None = None,
    again: bool = False,
) -> StepPlan:
    """Decide the step of ``thread`` at ``head``. Reads a handful of nodes, writes nothing.

    ``edge_prompt`` replaces the rendered edge prompt (``thread rerun --edge-prompt``);
    ``extra_prompt`` follows it (``thread resume``: why the step waited and the answer);
    ``by`` is who writes the step instead of a configured agent (``thread answer``);
    ``workdir`` is the thread's working directory (``thread start --cwd``); ``again``: the
    head step's role runs once more, with the prompt it was given (and the children it
    joined), instead of the role the moderator routes to (``thread poke``)."""
    store = backend.nodes
    node = chain.load_head(store, head)
    start = chain.start_of(store, node)
    workflow = chain.load_workflow(store, start.workflow)
    blank: BlankPrompt | None = None  # the role gets no instruction from its edge
    try:
        decision = decide(store, workflow, node) if not again else _again(store, workflow, node)
    except BlankPrompt as exc:
        decision, blank = exc.decision, exc
    except ModeratorError as exc:
        raise UwfError(f"moderator evaluate failed: {exc}") from None
    config = load_config(backend.root)
    secrets.refresh()  # a process stepping in a loop: .env or config.yaml edited since?
    base = StepPlan(
        thread=thread,
        workflow=start.workflow,
        workflow_name=workflow.name,
        start=start.hash,
        head=head,
        depth=chain.depth_of(store, node),
        limit=round_limit(start, config),
        rounds_before=chain.depth_of(store, start) if start.resumes is not None else 0,
        file_retry=file_retry(workflow, None),
    )
    if decision.done:  # e.g. a fork of a step that already routes to $END
        return replace(base, archive="completed")
    if not schemas.is_name(decision.role):  # e.g. a Workflow node put around the validator
        raise InvalidInput(
            f"workflow routes to an invalid role name: {describe(decision.role)} "
            "(role names are plain identifiers)"
        )
    if base.limit is not None and base.depth - base.rounds_before >= base.limit:
        return replace(base, archive="max_rounds")
    children = None
    if again:
        assert isinstance(node, chain.Step)
        joined = node.payload.get("children")
        children = tuple(NodeHash(c) for c in joined) if isinstance(joined, list) else None
    elif decision.fan_out is not None:
        record = backend.threads.get(thread)
        waiting = record.waiting if record is not None else None
        if waiting is None or waiting.children is None:  # a fork, or a crash after the move
            return replace(base, fan_out=decision)
        from uwf.engine.step import fanout

        joined = fanout.results(backend, thread, waiting.children)  # Deferred while active
        try:
            decision = decide(store, workflow, node, joined)
        except BlankPrompt as exc:
            decision, blank = exc.decision, exc
        except ModeratorError as exc:
            raise UwfError(f"moderator evaluate failed: {exc}") from None
        children = tuple(NodeHash(child["head"]) for child in joined)
    prompt = decision.prompt if edge_prompt is None else edge_prompt
    if by is None and not prompt.strip():  # a person (by) needs no instruction
        if edge_prompt is not None:
            raise UsageError("--edge-prompt is blank: the role would run without an instruction")
        if blank is not None:
            raise UwfError(f"moderator evaluate failed: {blank}")
    if by is not None:
        argv: tuple[str, ...] = by
    else:
        argv = (
            *agent_command(config, base.workflow_name, decision.role, agent),
            thread,
            decision.role,
        )
    if extra_prompt:
        prompt = f"{prompt.rstrip()}\n\n{extra_prompt}".lstrip()
    return replace(
        base,
        role=decision.role,
        prompt=prompt,
        argv=argv,
        timeout=timeout if timeout is not None else config.agent_timeout,
        cwd=agent_dir(workdir, decision.location),
        children=children,
        limits=()
        if by is not None
        else limits_of(config, base.workflow_name, decision.role, agent),
        file_retry=file_retry(workflow, decision.role),
    )


class Planned(NamedTuple):
    """A step planned before its lock was taken, and the record it was planned from."""

    record: ActiveThread
    plan: StepPlan

    def fits(self, record: ActiveThread) -> bool:
        """Whether the plan is the plan of ``record`` (read under the lock): made from the
        same thread, head, info and wait mark."""
        return _planned_from(self.record) == _planned_from(record)


def _planned_from(record: ActiveThread) -> tuple[object, ...]:
    """What of a thread's record a plan depends on."""
    return (record.thread, record.head, record.info, record.waiting)


def preplan(
    backend: Backend,
    record: ActiveThread,
    *,
    agent: str | None = None,
    timeout: float | None = None,
    edge_prompt: str | None = None,
    extra_prompt: str | None = None,
    again: bool = False,
) -> Planned | None:
    """The step of ``record`` planned before its lock is taken, so that the lock's holder
    record names the role and agent from the start (written once: docs/architecture.md,
    "Where a step happens"). Planning writes nothing; under the lock ``step_held`` uses the
    plan only if the record it reads there is the same, else plans again. None when planning
    fails: ``step_held`` plans again under the lock and records the failure."""
    try:
        backend.nodes.prefetch_step(record.head, record.info.workflow)
        plan = plan_step(
            backend,
            record.thread,
            record.head,
            agent=agent,
            timeout=timeout,
            edge_prompt=edge_prompt,
            workdir=record.info.cwd,
            extra_prompt=extra_prompt,
            again=again,
        )
    except UwfError:
        return None
    return Planned(record, plan)


def noted(planned: Planned | None) -> tuple[str, str] | None:
    """The (role, agent) a planned step runs, for its holder record; None when it runs none."""
    plan = planned.plan if planned is not None else None
    if plan is None or plan.role is None or plan.archive is not None or not plan.argv:
        return None
    if plan.fan_out is not None:
        return None
    return plan.role, plan.argv[0]


def after_failures(plan: StepPlan, failure: Failure | None) -> StepPlan:
    """``plan`` with the failed attempts the thread state records at its head, for the role
    they were attempts of (docs/format.md, "Previous attempts")."""
    if failure is None or failure.head != plan.head or plan.role is None:
        return plan
    if failure.role is not None and failure.role != plan.role:
        return plan
    from uwf.model import attempts

    return replace(plan, previous_attempts=attempts.record(dict(failure.shown())))


def _again(store: Store, workflow: Workflow, node: chain.Start | chain.Step) -> Decision:
    """The decision that made the step at ``node`` (``thread poke``): its role again, with the
    edge prompt it recorded, and the edge's location when the routing before it still leads
    to that role."""
    if not isinstance(node, chain.Step):
        raise InvalidInput("there is no step to do again: the thread has no steps yet")
    try:
        before = decide(store, workflow, chain.load_head(store, node.prev or node.start))
    except BlankPrompt as exc:  # the step ran with the prompt it recorded (and poke's text)
        before = exc.decision
    prompt = node.payload.get("edgePrompt")
    location = before.location if before.role == node.role else None
    text = prompt if isinstance(prompt, str) else before.prompt
    return Decision(node.role, text, before.status, location)


def file_retry(workflow: Workflow, role: str | None) -> tuple[Mapping[str, float], ...]:
    """The retry policies a Workflow node sets for ``role``: its top's, then the role's."""
    found = workflow.role(role) if role is not None else None
    policies = (workflow.retry, found.retry if found is not None else None)
    return tuple(policy for policy in policies if policy is not None)


def limits_of(config: Config, workflow: str, role: str, agent: str | None) -> tuple[Limit, ...]:
    """The limits of the agent alias that runs ``role`` and of the provider its entry names
    (an ``--agent`` command line names no alias: no agent limit). A provider is named even
    without limits: a 429 it answered pauses it (``engine.step.limits.back_off``)."""
    alias = agent_alias(config, workflow, role, agent)
    entry = config.agents.get(alias) if alias is not None else None
    provider = entry.provider if entry is not None else None
    found = []
    for section, name in (("agents", alias), ("providers", provider)):
        limit = config.limits.get(section, {}).get(name) if name is not None else None
        if name is not None and (limit or section == "providers"):
            limit = limit or {}
            found.append(Limit(section, name, limit.get("concurrency"), limit.get("perMinute")))
    return tuple(found)
