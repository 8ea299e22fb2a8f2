"""One step of a thread: lock, plan, run, commit (docs/architecture.md, "Where a step happens").

``step`` takes the thread's step lock (a second step on the same thread is refused before
anything runs), re-reads the head under it, plans (``plan.plan_step``), runs the agent
(``run.process_runner`` or the runner given) while watching that the thread is still active,
and commits (``commit.commit_step``). Any failure before the commit's compare-and-swap leaves
the head where it was; nodes an agent wrote for a failed step are garbage for ``cas gc``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from uwf.adapters import otel
from uwf.backend.base import Backend, StepLock
from uwf.engine.step import fanout, limits, tracing
from uwf.engine.step.commit import StepResult, archive, commit_step
from uwf.engine.step.failure import record_failure, refuse_failed
from uwf.engine.step.plan import StepPlan, plan_step
from uwf.engine.step.run import (
    Runner,
    agent_env,
    answered_hash,
    artifacts_dir,
    check_workdir,
    defer,
    process_runner,
    prompt_file,
)
from uwf.model import chain
from uwf.model.threads import not_active, require_active
from uwf.util.base32 import NodeHash
from uwf.util.errors import (
    DEFER_EXIT,
    AgentFailed,
    Busy,
    Conflict,
    Interrupted,
    NotActive,
    Stopped,
    UsageError,
    UwfError,
    exit_code,
)
from uwf.util.log import ProcessLog
from uwf.util.ulid import ThreadId

if TYPE_CHECKING:
    from uwf.util.outputs import DryRun

__all__ = [
    "Runner",
    "StepPlan",
    "StepResult",
    "check_timeout",
    "dry_run",
    "hold",
    "packing_in_a_process",
    "step",
    "step_held",
    "step_many",
]


@contextlib.contextmanager
def hold(
    backend: Backend, thread: ThreadId, *, wait: bool, log: str | None = None
) -> Iterator[StepLock]:
    """The thread's step lock for the block; when a background run has it, the Busy error
    says so and how to end it."""
    with contextlib.ExitStack() as stack:
        try:
            lock = stack.enter_context(backend.locks.step(thread, wait=wait, log=log))
        except Busy:
            holder = backend.locks.holder(thread)
            if holder is None or not holder.background:
                raise
            where = f"pid {holder.pid}" + (f" on {holder.host}" if holder.host else "")
            raise Busy(
                f"thread {thread} is busy: a background run ({where}) is stepping it; "
                f"`uwf thread stop {thread}` ends it"
            ) from None
        yield lock


def check_timeout(timeout: float | None) -> None:
    """``--timeout``: a positive, finite number of seconds (nan refused too), else a usage
    error (exit 2)."""
    if timeout is not None and not (timeout > 0 and math.isfinite(timeout)):
        raise UsageError(f"--timeout must be a positive number of seconds, got: {timeout}")


def dry_run(
    backend: Backend, thread: str, *, agent: str | None = None, timeout: float | None = None
) -> DryRun:
    """The plan of the next step, as ``thread step --dry-run`` prints it. Runs nothing."""
    check_timeout(timeout)
    tid, head = require_active(backend, thread)
    record = backend.threads.get(tid)
    workdir = record.info.cwd if record is not None else None
    return plan_step(backend, tid, head, agent=agent, timeout=timeout, workdir=workdir).dry_run()


def step(
    backend: Backend,
    thread: str,
    *,
    agent: str | None = None,
    timeout: float | None = None,
    wait: bool = False,
    runner: Runner = process_runner,
    edge_prompt: str | None = None,
    extra_prompt: str | None = None,
) -> StepResult:
    """Run exactly one step of ``thread``: take its step lock, then ``step_held``."""
    check_timeout(timeout)
    tid, _ = require_active(backend, thread)  # refused before waiting for the lock
    with hold(backend, tid, wait=wait) as lock:
        return step_held(
            backend,
            lock,
            tid,
            agent=agent,
            timeout=timeout,
            runner=runner,
            edge_prompt=edge_prompt,
            extra_prompt=extra_prompt,
        )


def step_held(
    backend: Backend,
    lock: StepLock,
    thread: ThreadId,
    *,
    agent: str | None = None,
    timeout: float | None = None,
    runner: Runner = process_runner,
    edge_prompt: str | None = None,
    should_stop: Callable[[], bool] | None = None,
    extra_prompt: str | None = None,
    head: NodeHash | None = None,
) -> StepResult:
    """One step of ``thread`` whose step lock the caller holds (``step``, or a run of many
    steps under one lock): re-read the head (unless the caller read it under the lock:
    ``head``), plan, run, commit. With tracing on, the step is one span (docs/format.md,
    "Traces").

    A ``failed`` thread (its retry policy's last attempt failed) is refused: exit 3 until
    ``thread retry``. ``should_stop`` (a background run passes its lock's ``stop_requested``)
    is polled with the thread's head while the agent runs; when it answers True the agent's
    process group is killed and the step fails, leaving the head where it was.
    ``extra_prompt`` follows the edge prompt (``thread resume``)."""
    record = backend.threads.get(thread)
    if record is None:  # archived while we waited, or between two steps of a run
        raise not_active(backend, thread)
    refuse_failed(record.failure, thread)  # under the lock: a dead letter is never stepped
    if head is None or head != record.head:  # (a caller's head is read under the lock)
        head = record.head
    log = ProcessLog(backend.root, thread=thread)
    plan: StepPlan | None = None
    with otel.span("uwf.step", {"uwf.thread": thread, "uwf.head": head}) as span:
        try:
            plan = plan_step(
                backend,
                thread,
                head,
                agent=agent,
                timeout=timeout,
                edge_prompt=edge_prompt,
                workdir=record.info.cwd,
                extra_prompt=extra_prompt,
            )
            log.bind(workflow=plan.workflow)
            tracing.planned(span, plan)
            if plan.archive is not None:
                status = archive(backend, plan, plan.archive, head, log)
                result = StepResult(plan.workflow, thread, head, None, True, status)
            elif plan.fan_out is not None:  # a fork of a fan-out step, or a crash after it
                output = chain.output_of(backend.nodes, chain.require_step(backend.nodes, head))
                ids = fanout.start(backend, thread, head, plan.workflow, plan.fan_out, output)
                log.write("F9C2T5J8", f"fan-out started late children={','.join(ids)}")
                result = StepResult(plan.workflow, thread, head, None, False, "active", tuple(ids))
            else:
                check_workdir(plan, record.info.cwd)
                result = _run(backend, lock, plan, runner, log, span, should_stop)
            tracing.landed(span, result)
            _pack_soon(backend, log)
            return result
        except UwfError as exc:
            log.write("B8T5N1V6", f"step failed: {exc.message}")
            tracing.failed(span, exc.message, exit_code(exc, loop=True))
            record_failure(backend, thread, head, plan, exc, log)
            raise
        except Interrupted as exc:
            log.write("H2V7N5C9", f"step failed: {exc.message}")
            tracing.failed(span, exc.message, exc.exit_code)
            raise


#: Where a step starts the store's automatic packing: in a thread of this process (the
#: default: a worker, a background run, a program using uwf as a library), or, set by a
#: command that exits after its steps (``packing_in_a_process``), in a process of its own.
_PACK_IN_A_PROCESS: ContextVar[bool] = ContextVar("uwf_pack_in_a_process", default=False)


@contextlib.contextmanager
def packing_in_a_process() -> Iterator[None]:
    """For the steps of the block, start the automatic packing in a process of its own
    (``uwf thread step``: the command exits before a pack in a thread would end)."""
    token = _PACK_IN_A_PROCESS.set(True)
    try:
        yield
    finally:
        _PACK_IN_A_PROCESS.reset(token)


def _pack_soon(backend: Backend, log: ProcessLog) -> None:
    """Start the store's automatic packing when enough small packs or loose nodes piled up
    (docs/architecture.md, "Automatic packing"; ``autoPack: false`` in config.yaml turns it
    off). A few ``stat`` calls when there is nothing to do; never fails the step."""
    try:
        if not backend.nodes.pack_due():
            return
        from uwf.config.config import load_config

        if not load_config(backend.root).auto_pack:
            return
        started = backend.nodes.pack_in_background(process=_PACK_IN_A_PROCESS.get())
    except (UwfError, OSError):
        return
    if started is not None:
        log.write("A7P3K9W2", f"automatic packing started ({started})")


def _run(
    backend: Backend,
    lock: StepLock,
    plan: StepPlan,
    runner: Runner,
    log: ProcessLog,
    span: otel.Span,
    should_stop: Callable[[], bool] | None,
) -> StepResult:
    """Spawn the plan's agent, then commit what it answered (or record that it deferred)."""
    assert plan.role is not None
    if runner is process_runner and plan.python is not None:  # docs/api.md, "Python agents"
        from uwf.engine.step.inproc import InProcess

        runner = InProcess(backend)
    lock.note(role=plan.role, agent=plan.argv[0])
    # One line for the moderator's decision and the spawn. The prompt's length, not its text:
    # the StepNode keeps the text (edgePrompt), which quotes the previous output the log need
    # not hold again; the agent's arguments but the last two (the thread, in the line's
    # fields, and the role).
    how = "spawning" if runner is process_runner else "running in-process"
    log.write(
        "R5J2W8N4",
        f"moderator role={plan.role} prompt={len(plan.prompt)} characters;"
        f" {how} agent command={plan.argv[0]}",
        args=" ".join(plan.argv[1:-2]),
    )
    span.event("spawn", {"uwf.agent": plan.argv[0]})
    with (
        limits.held(backend, plan),
        artifacts_dir(backend, plan) as artifacts,
        prompt_file(backend, plan) as prompt,
    ):
        env = {**agent_env(backend, plan, artifacts, prompt), **span.child_env()}
        stop = _stop_when(backend, plan, should_stop)
        if runner is process_runner and backend.relayed():
            from uwf.engine.step import relay  # socket: only where the store is relayed

            finished = relay.run(backend, plan, env, stop)
        else:
            finished = runner(plan, env, stop)
    span.event("agent exited", {"exit_code": finished.code, "duration_ms": finished.duration_ms})
    span.set("uwf.agent.exit_code", finished.code)
    if finished.stopped:
        raise _stopped(backend, plan, "the agent was stopped")
    if finished.code == DEFER_EXIT and not finished.timed_out:
        raise defer(backend, plan, finished, log)
    try:
        h = answered_hash(plan, finished)
    except AgentFailed:
        if backend.threads.head(plan.thread) != plan.head:  # e.g. killed: the agent saw it first
            raise _stopped(backend, plan, "the step was not recorded") from None
        raise
    log.write("C6P9E3H7", f"agent returned hash={h}")
    result = commit_step(backend, plan, h, log)
    span.event("commit", {"uwf.head": h, "uwf.status": result.status})
    return result


def _stop_when(
    backend: Backend, plan: StepPlan, asked: Callable[[], bool] | None
) -> Callable[[], bool]:
    """True once the thread's head is no longer the plan's (``thread kill`` archived it), or
    once ``asked`` says so (``thread stop``)."""

    def gone() -> bool:
        return backend.threads.head(plan.thread) != plan.head

    return gone if asked is None else lambda: gone() or asked()


def _stopped(backend: Backend, plan: StepPlan, outcome: str) -> UwfError:
    """Why a step ended without a result: its thread was archived, its head moved, or a stop
    was asked for, while the agent ran (``outcome``: what became of the step)."""
    thread = plan.thread
    head = backend.threads.head(thread)
    if head == plan.head:
        return Stopped(f"thread {thread}: the step was stopped (thread stop); {outcome}")
    if head is not None:
        return Conflict(f"thread {thread} moved to {head} while its step ran; {outcome}")
    entry = backend.threads.history_entry(thread)
    status = entry.status if entry is not None else "gone"
    return NotActive(f"thread {thread} ended ({status}) while its step ran; {outcome}")


def step_many(
    backend: Backend,
    thread: str,
    count: int,
    *,
    on_result: Callable[[StepResult], None],
    **kwargs: Any,
) -> list[StepResult]:
    """Up to ``count`` steps, stopping when the thread is done; ``on_result`` after each.

    A failing step raises after the steps before it were handed to ``on_result``.
    """
    results = []
    for _ in range(count):
        result = step(backend, thread, **kwargs)
        results.append(result)
        on_result(result)
        if result.done:
            break
    return results
