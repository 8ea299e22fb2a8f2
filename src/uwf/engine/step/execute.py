"""A planned step's run: its agent, under the fleet's limits, watched for a stop, then the
commit of what it answered (docs/architecture.md, "Where a step happens").

``run_agent`` is what ``drive.step_held`` calls once a step is planned and neither ends the
thread nor fans out. How an agent ends decides the error: stopped (``thread stop``), its
thread archived or moved meanwhile, killed by the worker's shutdown, deferred (exit 75), or
failed; else its answer is committed.
"""

from __future__ import annotations

from collections.abc import Callable

from uwf.adapters import otel
from uwf.backend.base import Backend, StepLock
from uwf.engine.step import limits
from uwf.engine.step.commit import StepResult, commit_step
from uwf.engine.step.plan import StepPlan
from uwf.engine.step.run import (
    Runner,
    agent_env,
    answered_hash,
    artifacts_dir,
    defer,
    live_turns,
    process_runner,
    prompt_file,
)
from uwf.util.errors import DEFER_EXIT, AgentFailed, Conflict, NotActive, Stopped, UwfError
from uwf.util.log import ProcessLog

__all__ = ["killed_by_signal", "run_agent"]


def run_agent(
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
