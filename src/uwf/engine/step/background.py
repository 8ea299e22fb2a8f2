"""Background runs: ``thread step --background`` and ``thread stop`` (docs/architecture.md,
"Background runs").

A background run is a detached process (``adapters.process.spawn_detached``: its own session,
stdin from /dev/null, stdout and stderr appended to ``<root>/runs/<thread>.log``) that takes
the thread's step lock as a background holder (``Holder.log``) and keeps it for its whole
life, running ``step_held`` under it until the thread ends, ``--count`` steps ran, a step
fails or its agent defers it (the thread waits for a person), or ``thread stop`` asks it to
stop. Holding the lock is what makes the thread
``running`` between steps and what refuses a second run or a foreground step as busy; a run
that dies releases the lock with its process, and the record it leaves is stale.

``thread stop`` records a stop request in the backend (so it reaches a run on any machine
sharing it; the run polls it twice a second, between steps and while its agent runs) and, when
the run is on this machine, sends it SIGTERM; it returns once the run has released the lock,
its agent's process group killed on the way, and (on this machine) once the run's process has
exited, its log complete.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uwf.adapters import process
from uwf.backend.base import Backend, Holder, StepLock
from uwf.engine.step.commit import StepResult
from uwf.engine.step.drive import check_timeout, hold, step_held
from uwf.engine.step.run import Runner, process_runner
from uwf.model.threads import not_active, require_active
from uwf.util.errors import Busy, Deferred, Interrupted, NotActive, UwfError, exit_code
from uwf.util.log import ProcessLog
from uwf.util.tuples import NamedTuple
from uwf.util.ulid import ThreadId, check_thread_id

if TYPE_CHECKING:
    from uwf.util.outputs import BackgroundStarted, BackgroundStopped

RUNS_DIR = "runs"
STOP_WAIT = 15.0  # seconds ``thread stop`` waits for a run to release the thread
STOPPED = "stopped by `uwf thread stop`"


class Ended(NamedTuple):
    """How a background run ended: a line for its log, its exit code, the error if any."""

    reason: str
    code: int
    error: str | None = None


def steps(n: int) -> str:
    """``1 step``, ``2 steps``."""
    return f"{n} step" if n == 1 else f"{n} steps"


def log_path(backend: Backend, thread: ThreadId) -> Path:
    """Where the background runs of ``thread`` on this machine write (appended, run by run)."""
    return backend.root / RUNS_DIR / f"{thread}.log"


def launch(
    backend: Backend,
    thread: str,
    *,
    count: int,
    agent: str | None,
    timeout: float | None,
    worker: Sequence[str],
) -> BackgroundStarted:
    """Start a background run of up to ``count`` steps and return ``{"thread","pid","log"}``
    once it holds the thread's step lock.

    ``worker`` is the command that calls ``run`` in the new process; the thread id, the count
    and the options are appended. What the run meets before it holds the lock (busy, not
    active) is raised here, with its loop-contract code.
    """
    check_timeout(timeout)
    tid, _ = require_active(backend, thread)
    argv = [*worker, tid, str(count)]
    if agent is not None:
        argv += ["--agent", agent]
    if timeout is not None:
        argv += ["--timeout", repr(timeout)]
    env = dict(os.environ)
    env.update(backend.env())
    log = log_path(backend, tid)
    ProcessLog(backend.root, thread=tid).write(
        "X7Q4W9M2", f"spawning background process count={count}", log=str(log)
    )
    pid, said = process.spawn_detached(argv, env, log=log, what="background run")
    _raise_refusal(said, log)
    return {"thread": tid, "pid": pid, "log": str(log)}


def _raise_refusal(said: str, log: Path) -> None:
    """Raise what the run answered on its ready pipe, unless it answered that it holds the
    lock (``ready`` below writes the answers)."""
    try:
        answer = json.loads(said)
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        raise UwfError(f"the background run ended before it started; see {log}")
    if answer.get("ok") is True:
        return
    kind = {3: NotActive, 4: Busy}.get(answer.get("code"), UwfError)  # type: ignore[arg-type]
    raise kind(str(answer.get("error")))


def run(
    backend: Backend,
    thread: str,
    *,
    count: int,
    agent: str | None,
    timeout: float | None,
    ready: Callable[[dict[str, Any]], None],
    on_result: Callable[[StepResult], None],
    runner: Runner = process_runner,
) -> Ended:
    """The background run itself (in the worker process): take the step lock as a background
    holder, tell ``ready`` (``{"ok": true}``, or ``{"error","code"}`` when refused), then
    step. Never raises a UwfError: how the run ended is returned (and logged)."""
    ended = _run(backend, thread, _Loop(count, agent, timeout, on_result, runner), ready)
    ProcessLog(backend.root, thread=thread).write(
        "V3N8K5R2", f"background run ended: {ended.reason}"
    )
    return ended


class _Loop(NamedTuple):
    """What the run's steps are given: how many, how, and who hears of each."""

    limit: int
    agent: str | None
    timeout: float | None
    on_result: Callable[[StepResult], None]
    runner: Runner


def _run(
    backend: Backend, thread: str, loop: _Loop, ready: Callable[[dict[str, Any]], None]
) -> Ended:
    told = False
    try:
        tid, _ = require_active(backend, thread)
        with hold(backend, tid, wait=False, log=str(log_path(backend, tid))) as lock:
            if backend.threads.head(tid) is None:  # archived before we held the lock
                raise not_active(backend, tid)
            ready({"ok": True})
            told = True
            return _steps(backend, lock, tid, loop)
    except UwfError as exc:
        code = exit_code(exc, loop=True)
        if not told:
            ready({"error": exc.message, "code": code})
        return Ended(f"failed: {exc.message}", code, exc.message)


def _steps(backend: Backend, lock: StepLock, thread: ThreadId, loop: _Loop) -> Ended:
    ran = 0
    try:
        while ran < loop.limit:
            if lock.stop_requested():
                return Ended(STOPPED, 0)
            result = step_held(
                backend,
                lock,
                thread,
                agent=loop.agent,
                timeout=loop.timeout,
                runner=loop.runner,
                should_stop=lock.stop_requested,
            )
            ran += 1
            loop.on_result(result)
            if result.done:
                return Ended(f"the thread is {result.status} ({steps(ran)} ran)", 0)
        return Ended(f"{steps(ran)} ran (--count {loop.limit})", 0)
    except (UwfError, Interrupted) as exc:
        if lock.stop_requested():
            return Ended(STOPPED, 0)
        if isinstance(exc, Interrupted):
            return Ended(exc.message, exc.exit_code, exc.message)
        code = exit_code(exc, loop=True)
        if isinstance(exc, NotActive | Deferred):  # killed, or waits for a person: no failure
            return Ended(exc.message, code)
        return Ended(f"failed: {exc.message}", code, exc.message)


def stop(
    backend: Backend, thread: str, *, wait: float = STOP_WAIT
) -> tuple[BackgroundStopped, str]:
    """End the background run of ``thread``: ``({"thread","stopped"}, warning)``.

    The head stays where it was and the thread active. With no run, ``stopped`` is false and
    the warning says why (a record left by a run that died is removed on the way); the warning
    is ``""`` when a run was stopped.
    """
    tid = check_thread_id(thread)
    holder = backend.locks.holder(tid)
    if holder is None or not holder.background:
        return {"thread": tid, "stopped": False}, _nothing_to_stop(backend, tid, holder)
    backend.locks.request_stop(tid)
    here = holder.host == os.uname().nodename and holder.pid is not None
    if here and _same_holding(backend.locks.holder(tid), holder):  # not a reused pid
        assert holder.pid is not None
        process.terminate(holder.pid)
    deadline = time.monotonic() + wait
    # the lock released, then (on this machine) the process gone: its log is complete then
    while _same_holding(backend.locks.holder(tid), holder) or (
        here and holder.pid is not None and process.alive(holder.pid)
    ):
        if time.monotonic() >= deadline:
            raise UwfError(
                f"the background run of thread {tid} (pid {holder.pid} on {holder.host}) "
                f"did not stop within {wait:g}s"
            )
        time.sleep(0.05)
    ProcessLog(backend.root, thread=tid).write(
        "D6W3P8T5", f"background run stopped pid={holder.pid} host={holder.host}"
    )
    return {"thread": tid, "stopped": True}, ""


def _same_holding(now: Holder | None, then: Holder) -> bool:
    return now is not None and (now.pid, now.host, now.since) == (then.pid, then.host, then.since)


def _nothing_to_stop(backend: Backend, thread: ThreadId, holder: Holder | None) -> str:
    """The warning of a ``thread stop`` with no background run (not active: NotActive)."""
    stale = backend.locks.clear_stale(thread) if holder is None else None
    if backend.threads.head(thread) is None:
        raise not_active(backend, thread)
    if holder is not None:
        return (
            f"thread {thread} has no background run (a foreground step holds it: pid {holder.pid})"
        )
    if stale is not None and stale.background:
        return (
            f"thread {thread} is not currently running: its background run (pid {stale.pid}) "
            "died; its record was removed"
        )
    return f"thread {thread} is not currently running"
