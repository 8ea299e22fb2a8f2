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

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uwf.backend.base import Backend
from uwf.engine.evals import judges
from uwf.engine.evals.task import Task, load_task
from uwf.model import chain
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash
from uwf.util.errors import InvalidInput, UsageError, UwfError, exit_code
from uwf.util.ulid import ThreadId, new_thread_id, now_ms

if TYPE_CHECKING:
    from uwf.engine.evals.fleet import FleetOptions
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
        from uwf.engine.evals.fleet import run_on_fleet

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


@dataclass(frozen=True)
class Recording:
    """What every run of one ``eval run`` is recorded with."""

    batch: str
    agent: str | None = None
    keep_workdir: bool = False


@dataclass(frozen=True)
class Begun:
    """A run whose thread was started: its task, workflow, thread and working directory,
    when it began (unix ms) and the monotonic clock then."""

    task: Task
    workflow: NodeHash
    thread: ThreadId
    workdir: Path
    began: int
    clock: float

    def deadline(self) -> float | None:
        """The monotonic time ``limits.timeoutMinutes`` passes (None: no limit)."""
        minutes = self.task.timeout_minutes
        return None if minutes is None else self.clock + minutes * 60

    def timed_out(self) -> str:
        return f"passed limits.timeoutMinutes ({self.task.timeout_minutes:g})"


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


def begin(backend: Backend, task: Task, workflow: NodeHash) -> Begun:
    """Start a run: its working directory, then its thread there (``maxRounds``: the task's
    ``maxSteps``), stepped by nobody yet."""
    from uwf.engine.threads import lifecycle

    workdir = _workdir(task)
    began, clock = now_ms(), time.monotonic()
    try:
        started = lifecycle.start(
            backend, workflow, task.prompt, max_rounds=task.max_steps, cwd=workdir
        )
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return Begun(task, workflow, started["thread"], workdir, began, clock)


def finish(
    backend: Backend, run: Begun, outcome: str, error: str | None, recording: Recording
) -> EvalRunLine:
    """End a run that stopped with ``outcome``: kill its thread unless it ended, judge it,
    record its EvalRun node; its JSON line. The working directory goes unless kept."""
    try:
        if outcome not in ("completed", "max_rounds"):
            _end(backend, run.thread)
        duration = int((time.monotonic() - run.clock) * 1000)
        head = _head(backend, run.thread)
        ran = judges.Ran(run.thread, head, outcome, error, run.workdir, duration)
        judged = judges.judge_all(backend, run.task, ran)
        node = _record(backend, run, ran, judged, recording)
    finally:
        if not recording.keep_workdir:
            shutil.rmtree(run.workdir, ignore_errors=True)
    line: EvalRunLine = {
        "run": node,
        "task": run.task.name,
        "batch": recording.batch,
        "thread": run.thread,
        "outcome": outcome,
        "score": judges.weighted(judged),
        "judges": {j["name"]: j["score"] for j in judged},
    }
    if recording.keep_workdir:
        line["workdir"] = str(run.workdir)
    return line


def discard(backend: Backend, run: Begun, recording: Recording, stop_wait: float = 5.0) -> None:
    """A run given up (an error, a signal): its thread killed, its directory removed unless
    kept; nothing recorded."""
    _end(backend, run.thread, stop_wait)
    if not recording.keep_workdir:
        shutil.rmtree(run.workdir, ignore_errors=True)


def _workdir(task: Task) -> Path:
    """A new private directory holding a copy of the task's fixture (links copied as links;
    the fixture itself is never a link: ``task.load_task`` refused one)."""
    workdir = Path(tempfile.mkdtemp(prefix=f"uwf-eval-{task.name[:40]}-"))
    fixture = task.fixture
    if fixture is not None:
        try:
            shutil.copytree(fixture, workdir, symlinks=True, dirs_exist_ok=True)
        except (OSError, shutil.Error) as exc:
            shutil.rmtree(workdir, ignore_errors=True)
            raise InvalidInput(f"eval task {task.name}: cannot copy its fixture: {exc}") from None
    return workdir


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


def _end(backend: Backend, thread: ThreadId, stop_wait: float = 5.0) -> None:
    """Kill a thread the run left active (failed, waiting, out of time)."""
    from uwf.engine.threads import lifecycle

    with contextlib.suppress(UwfError):  # it ended meanwhile
        lifecycle.kill(backend, thread, stop_wait=stop_wait)


def _head(backend: Backend, thread: ThreadId) -> chain.Start | chain.Step:
    head = backend.threads.head(thread)
    if head is None:
        entry = backend.threads.history_entry(thread)
        assert entry is not None, thread
        head = entry.head
    return chain.load_head(backend.nodes, head)


def _record(
    backend: Backend,
    run: Begun,
    ran: judges.Ran,
    judged: list[dict[str, Any]],
    recording: Recording,
) -> NodeHash:
    """Store the run's EvalRun node; its hash."""
    task, workflow = run.task, run.workflow
    store = backend.nodes
    h = schemas.ensure(store)
    steps = chain.steps_oldest_first(store, ran.head)
    wf = chain.load_workflow(store, workflow)
    payload: dict[str, Any] = {
        "task": task.name,
        "taskFile": store.put(h.text, task.text),
        "batch": recording.batch,
        "workflow": workflow,
        "workflowName": str(wf.get("name", "")),
        "thread": ran.thread,
        "start": chain.start_of(store, ran.head).hash,
        "head": ran.head.hash,
        "agent": recording.agent,
        "agents": sorted({str(s.payload.get("agent", "")) for s in steps}),
        "models": _models(store, steps),
        "outcome": ran.outcome,
        "judges": judged,
        "score": judges.weighted(judged),
        "startedAt": run.began,
        "durationMs": ran.duration_ms,
    }
    if ran.error is not None:
        payload["error"] = ran.error[: judges.ERROR_LIMIT]
    return NodeHash(store.put(h.eval_run, payload))


def _models(store: Any, steps: list[chain.Step]) -> list[str]:
    """The models the steps' details name (``uwf-builtin``, ``uwf-hermes`` record theirs)."""
    found = set()
    for step in steps:
        detail = step.payload.get("detail")
        node = store.get(detail) if isinstance(detail, str) else None
        model = (
            node.payload.get("model")
            if node is not None and isinstance(node.payload, dict)
            else None
        )
        if isinstance(model, str) and model:
            found.add(model)
    return sorted(found)
