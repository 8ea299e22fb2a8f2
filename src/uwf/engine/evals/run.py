"""``uwf eval run``: each run of a task is an ordinary thread, stepped here (or by a fleet's
``uwf worker``s: ``engine.evals.fleet``), in a fresh copy of the task's fixture, then judged
and recorded as an EvalRun node (docs/evals.md).

Every task folder is read and every workflow resolved before the first run, so a mistake in
the last folder costs nothing. A run's thread starts with ``--cwd`` at its working directory
(a new temporary directory holding a copy of ``fixture/``) and ``maxRounds`` at the task's
``maxSteps``; it is stepped until it ends, fails, waits for a person or passes the task's
``timeoutMinutes``. A thread that did not end is killed, so an eval never leaves an active
thread behind (its chain stays readable and forkable like any archived thread's). The
judges then run in the working directory, which is removed afterwards unless asked to keep.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from uwf.backend.base import Backend
from uwf.engine.evals.fleet import FleetOptions, run_on_fleet
from uwf.engine.evals.record import Begun, Recording, begin, discard, finish
from uwf.engine.evals.task import Task, load_task
from uwf.util.base32 import NodeHash
from uwf.util.errors import InvalidInput, UsageError, UwfError, exit_code
from uwf.util.ulid import new_thread_id

if TYPE_CHECKING:
    from uwf.util.outputs import EvalRunLine

MAX_COUNT = 1000


def run_tasks(
    backend: Backend,
    folders: list[str],
    *,
    agent: str | None = None,
    workflow: str | None = None,
    count: int = 1,
    keep_workdir: bool = False,
    fleet: FleetOptions | None = None,
    on_run: Callable[[EvalRunLine], None] = lambda line: None,
    allow_outside: list[Path] | None = None,
) -> list[EvalRunLine]:
    """``count`` runs of each task folder, in order; ``on_run`` after each. With ``fleet``,
    ``uwf worker``s step the runs (``engine.evals.fleet``) and runs are reported as they end.
    A task folder that names files outside itself (a judge's program, a workflow file) is
    refused before anything runs, unless they are under a directory of ``allow_outside``."""
    if not 1 <= count <= MAX_COUNT:
        raise UsageError(f"--count must be between 1 and {MAX_COUNT}, got: {count}")
    if not folders:
        raise UsageError("give at least one task folder")
    if fleet is not None:
        fleet.check(agent)
    tasks = [load_task(folder) for folder in folders]
    for task in tasks:
        _confine(task, allow_outside or [], workflow is not None)
    planned = [(task, _workflow_of(backend, task, workflow)) for task in tasks]
    batch = new_thread_id()
    if fleet is not None:
        return run_on_fleet(
            backend,
            [(task, wf) for task, wf in planned for _ in range(count)],
            Recording(batch, agent, keep_workdir),
            fleet,
            on_run,
        )
    lines = []
    for task, wf in planned:
        for _ in range(count):
            line = run_once(backend, task, wf, batch=batch, agent=agent, keep_workdir=keep_workdir)
            lines.append(line)
            on_run(line)
    return lines


def _confine(task: Task, allowed: list[Path], workflow_given: bool) -> None:
    """Refuse a task folder that names files outside itself and ``allowed``."""
    from uwf.engine.evals.task import outside

    found = outside(task, allowed)
    if workflow_given:  # --workflow replaces the task's: its file is not run
        found = [line for line in found if not line.startswith("its workflow ")]
    if found:
        raise InvalidInput(
            f"eval task {task.name}: {'; '.join(found)}: outside its folder {task.folder}; a "
            "task folder is code, and runs only its own files unless you allow a directory "
            'more with --allow-outside DIR (docs/evals.md, "Someone else\'s task folder")'
        )


def _workflow_of(backend: Backend, task: Task, override: str | None) -> NodeHash:
    """The Workflow hash every run of ``task`` runs: ``--workflow``, else the task's, looked
    up as ``thread start`` would from the fixture (a project workflow it carries) or the
    task folder."""
    from uwf.engine.workflows.stored import resolve_for_start

    ident = override if override is not None else task.workflow_ident()
    where = task.fixture or task.folder
    try:
        return resolve_for_start(backend, ident, where)
    except UwfError as exc:
        raise InvalidInput(f"eval task {task.name}: {exc.message}") from None


def run_once(
    backend: Backend,
    task: Task,
    workflow: NodeHash,
    *,
    batch: str,
    agent: str | None = None,
    keep_workdir: bool = False,
) -> EvalRunLine:
    """One run of ``task``: a thread in a fresh working directory, stepped, judged, recorded."""
    run = begin(backend, task, workflow)
    recording = Recording(batch, agent, keep_workdir)
    try:
        outcome, error = _drive(backend, run, agent)
    except BaseException:
        discard(backend, run, recording)
        raise
    return finish(backend, run, outcome, error, recording)


def _drive(backend: Backend, run: Begun, agent: str | None) -> tuple[str, str | None]:
    """Step the run's thread here until it ends: ``(outcome, error)``."""
    from uwf.config.config import load_config
    from uwf.engine.step import step

    deadline = run.deadline()
    configured = load_config(backend.root).agent_timeout
    while True:
        timeout = configured
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout", run.timed_out()
            timeout = remaining if configured is None else min(configured, remaining)
        try:
            result = step(backend, run.thread, agent=agent, timeout=timeout)
        except UwfError as exc:
            code = exit_code(exc, loop=True)
            if code == 6:
                return "waiting", exc.message
            if deadline is not None and time.monotonic() >= deadline:
                return "timeout", run.timed_out()
            return "failed", exc.message
        if result.done:
            return result.status, None
