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
from typing import TYPE_CHECKING, Any, NamedTuple

from uwf.adapters import otel
from uwf.backend.base import ActiveThread, Backend, StepLock
from uwf.engine.step import fanout, limits, tracing
from uwf.engine.step.commit import StepResult, archive, commit_step
from uwf.engine.step.failure import record_failure, refuse_failed
from uwf.engine.step.plan import StepPlan, after_failures, plan_step
from uwf.engine.step.run import (
    Runner,
    agent_env,
    answered_hash,
    artifacts_dir,
    check_workdir,
    defer,
    live_turns,
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
from uwf.util.ulid import ThreadId, check_thread_id

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
    "preplan",
    "step",
    "step_held",
    "step_many",
]


@contextlib.contextmanager
def hold(
    backend: Backend,
    thread: ThreadId,
    *,
    wait: bool,
    log: str | None = None,
    note: tuple[str, str] | None = None,
) -> Iterator[StepLock]:
    """The thread's step lock for the block (``note``: the role and agent of a step planned
    before it, for the holder record); when a background run has it, the Busy error says so
    and how to end it."""
    with contextlib.ExitStack() as stack:
        try:
            lock = stack.enter_context(backend.locks.step(thread, wait=wait, log=log, note=note))
        except Busy:
            if backend.threads.head(thread) is None:  # ended: its last step is letting go
                raise not_active(backend, thread) from None
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
    expected: NodeHash | None = None,
    again: bool = False,
) -> StepResult:
    """Run exactly one step of ``thread``: plan it (``preplan``), take its step lock, then
    ``step_held``.

    ``expected``: the head the caller decided from; a thread that moved meanwhile is a
    Conflict (exit 1), nothing run. ``again``: the head step's role once more (``thread
    poke``: ``plan_step``), a failure of which is not recorded as the thread's."""
    check_timeout(timeout)
    tid = check_thread_id(thread)
    record = backend.threads.get(tid)
    if record is None:  # refused before waiting for the lock
        raise not_active(backend, tid)
    prompts = {"edge_prompt": edge_prompt, "extra_prompt": extra_prompt}
    planned = preplan(backend, record, agent=agent, timeout=timeout, again=again, **prompts)
    with hold(backend, tid, wait=wait, note=noted(planned)) as lock:
        if expected is not None:
            current = backend.threads.head(tid)
            if current is None:
                raise not_active(backend, tid)
            if current != expected:
                raise Conflict(
                    f"thread {tid} moved to {current} meanwhile (from {expected}); nothing was run"
                )
        return step_held(
            backend,
            lock,
            tid,
            agent=agent,
            timeout=timeout,
            runner=runner,
            edge_prompt=edge_prompt,
            extra_prompt=extra_prompt,
            again=again,
            planned=planned,
        )


class Planned(NamedTuple):
    """A step planned before its lock was taken, and the record it was planned from."""

    record: ActiveThread
    plan: StepPlan


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


def _same_record(a: ActiveThread, b: ActiveThread) -> bool:
    """Whether a plan made from ``a`` is the plan of ``b``."""
    return (a.thread, a.head, a.info, a.waiting) == (b.thread, b.head, b.info, b.waiting)


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
    again: bool = False,
    shut_down: Callable[[], bool] | None = None,
    record: ActiveThread | None = None,
    planned: Planned | None = None,
) -> StepResult:
    """One step of ``thread`` whose step lock the caller holds (``step``, or a run of many
    steps under one lock): re-read the head (unless the caller read it under the lock:
    ``head``), plan, run, commit. With tracing on, the step is one span (docs/format.md,
    "Traces").

    A ``failed`` thread (its retry policy's last attempt failed) is refused: exit 3 until
    ``thread retry``. ``should_stop`` (a background run passes its lock's ``stop_requested``)
    is polled with the thread's head while the agent runs; when it answers True the agent's
    process group is killed and the step fails, leaving the head where it was.
    ``extra_prompt`` follows the edge prompt (``thread resume``); ``again``: the head step's
    role runs once more (``thread poke``), and its failure is not recorded. ``shut_down`` (a
    worker passes it) is asked when the agent died of a signal: True if that was the
    shutdown of the process stepping it, and the step then fails as Stopped (no failure
    recorded) instead of AgentFailed. ``record``: the thread's record the caller read under
    the lock (a worker's claim), else it is read here; ``planned``: the step planned before
    the lock (``preplan``), used when the record is still the one it was planned from."""
    if record is None or record.thread != thread:
        record = lock.current(backend.threads, thread)
    if record is None:  # archived while we waited, or between two steps of a run
        raise not_active(backend, thread)
    refuse_failed(record.failure, thread)  # under the lock: a dead letter is never stepped
    if head is None or head != record.head:  # (a caller's head is read under the lock)
        head = record.head
    log = ProcessLog(backend.root, thread=thread)
    plan: StepPlan | None = None
    with otel.span("uwf.step", {"uwf.thread": thread, "uwf.head": head}) as span:
        try:
            if planned is not None and _same_record(planned.record, record):
                plan = planned.plan
            else:
                backend.nodes.prefetch_step(head, record.info.workflow)
                plan = plan_step(
                    backend,
                    thread,
                    head,
                    agent=agent,
                    timeout=timeout,
                    edge_prompt=edge_prompt,
                    workdir=record.info.cwd,
                    extra_prompt=extra_prompt,
                    again=again,
                )
            if not again:
                plan = after_failures(plan, record.failure)
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
                with backend.nodes.staging():  # the agent's puts land with the head
                    result = _run(backend, lock, plan, runner, log, span, should_stop, shut_down)
            tracing.landed(span, result)
            _pack_soon(backend, log)
            return result
        except UwfError as exc:
            log.write("B8T5N1V6", f"step failed: {exc.message}")
            tracing.failed(span, exc.message, exit_code(exc, loop=True))
            if not again:  # a step done again by hand is not the thread's own next attempt
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
    shut_down: Callable[[], bool] | None = None,
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
        live_turns(backend, plan) as turns,
    ):
        env = {**agent_env(backend, plan, artifacts, prompt, turns), **span.child_env()}
        stop = _stop_when(backend, lock, plan, should_stop)
        if runner is process_runner and backend.relayed():
            from uwf.engine.step import relay  # socket: only where the store is relayed

            finished = relay.run(backend, plan, env, stop)
        else:
            finished = runner(plan, env, stop)
    span.event("agent exited", {"exit_code": finished.code, "duration_ms": finished.duration_ms})
    span.set("uwf.agent.exit_code", finished.code)
    if finished.stopped:
        raise _stopped(backend, plan, "the agent was stopped")
    if shut_down is not None and killed_by_signal(finished.code) and shut_down():
        raise Stopped(
            f"thread {plan.thread}: its agent was stopped by the worker's shutdown (SIGTERM "
            "reached its process group too): the step was not recorded and counts as no "
            "failed attempt"
        )
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


#: How an agent ends when a signal stopped it: killed by it (-N), or exiting 128 + N as the
#: agent kit and shells do (SIGHUP, SIGINT, SIGKILL, SIGTERM).
_SIGNALLED = frozenset(code for n in (1, 2, 9, 15) for code in (-n, 128 + n))


def killed_by_signal(code: int) -> bool:
    """Whether an agent's exit status says a stopping signal ended it."""
    return code in _SIGNALLED


def _stop_when(
    backend: Backend, lock: StepLock, plan: StepPlan, asked: Callable[[], bool] | None
) -> Callable[[], bool]:
    """True once the thread's head is no longer the plan's (``thread kill`` archived it), or
    once ``asked`` says so (``thread stop``). The head is read only when the lock cannot
    tell that it did not move (``StepLock.moved``: PostgreSQL is told, and asks nothing)."""

    def gone() -> bool:
        if lock.moved() is False:
            return False
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
