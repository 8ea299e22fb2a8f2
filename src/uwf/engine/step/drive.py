"""One step of a thread, end to end: lock, plan, run, commit (docs/architecture.md, "Where
a step happens").

``step`` plans the step (``plan.preplan``), takes the thread's step lock (a second step on
the same thread is refused before anything runs: ``hold``) and calls ``step_held``, which
re-reads the head under the lock, plans again if the record moved, ends the thread, starts a
fan-out, or runs the agent (``execute.run_agent``) and commits (``commit.commit_step``). Any
failure before the commit's compare-and-swap leaves the head where it was; nodes an agent
wrote for a failed step are garbage for ``cas gc``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from uwf.adapters import otel
from uwf.backend.base import ActiveThread, Backend, StepLock
from uwf.engine.step import fanout, tracing
from uwf.engine.step.autopack import pack_soon
from uwf.engine.step.commit import StepResult, archive
from uwf.engine.step.execute import run_agent
from uwf.engine.step.failure import record_failure, refuse_failed
from uwf.engine.step.plan import Planned, StepPlan, after_failures, noted, plan_step, preplan
from uwf.engine.step.run import Runner, check_workdir, process_runner
from uwf.model import chain
from uwf.model.threads import not_active, require_active
from uwf.util.base32 import NodeHash
from uwf.util.errors import Busy, Conflict, Interrupted, UsageError, UwfError, exit_code
from uwf.util.log import ProcessLog
from uwf.util.ulid import check_thread_id

if TYPE_CHECKING:
    from uwf.util.outputs import DryRun
    from uwf.util.ulid import ThreadId

__all__ = ["check_timeout", "dry_run", "hold", "step", "step_held", "step_many"]


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
            if planned is not None and planned.fits(record):
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
                    result = run_agent(
                        backend, lock, plan, runner, log, span, should_stop, shut_down
                    )
            tracing.landed(span, result)
            pack_soon(backend, log)
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
