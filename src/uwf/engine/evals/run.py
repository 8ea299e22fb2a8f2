"""``uwf eval run``: each run of a task is an ordinary thread, stepped here, in a fresh copy of
the task's fixture, then judged and recorded as an EvalRun node (docs/evals.md).

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
    on_run: Callable[[EvalRunLine], None] = lambda line: None,
) -> list[EvalRunLine]:
    """``count`` runs of each task folder, in order; ``on_run`` after each."""
    if not 1 <= count <= MAX_COUNT:
        raise UsageError(f"--count must be between 1 and {MAX_COUNT}, got: {count}")
    if not folders:
        raise UsageError("give at least one task folder")
    tasks = [load_task(folder) for folder in folders]
    planned = [(task, _workflow_of(backend, task, workflow)) for task in tasks]
    batch = new_thread_id()
    lines = []
    for task, wf in planned:
        for _ in range(count):
            line = run_once(backend, task, wf, batch=batch, agent=agent, keep_workdir=keep_workdir)
            lines.append(line)
            on_run(line)
    return lines


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
    from uwf.engine.threads import lifecycle

    workdir = _workdir(task)
    began, clock = now_ms(), time.monotonic()
    try:
        started = lifecycle.start(
            backend, workflow, task.prompt, max_rounds=task.max_steps, cwd=workdir
        )
        thread = started["thread"]
        outcome, error = _drive(backend, thread, task, agent, clock)
        if outcome not in ("completed", "max_rounds"):
            _end(backend, thread)
        duration = int((time.monotonic() - clock) * 1000)
        head = _head(backend, thread)
        ran = judges.Ran(thread, head, outcome, error, workdir, duration)
        judged = judges.judge_all(backend, task, ran)
        run = _record(backend, task, ran, judged, workflow, batch, agent, began)
    finally:
        if not keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    line: EvalRunLine = {
        "run": run,
        "task": task.name,
        "batch": batch,
        "thread": thread,
        "outcome": outcome,
        "score": judges.weighted(judged),
        "judges": {j["name"]: j["score"] for j in judged},
    }
    if keep_workdir:
        line["workdir"] = str(workdir)
    return line


def _workdir(task: Task) -> Path:
    """A new private directory holding a copy of the task's fixture (links copied as links)."""
    workdir = Path(tempfile.mkdtemp(prefix=f"uwf-eval-{task.name[:40]}-"))
    fixture = task.fixture
    if fixture is not None:
        try:
            shutil.copytree(fixture, workdir, symlinks=True, dirs_exist_ok=True)
        except (OSError, shutil.Error) as exc:
            shutil.rmtree(workdir, ignore_errors=True)
            raise InvalidInput(f"eval task {task.name}: cannot copy its fixture: {exc}") from None
    return workdir


def _drive(
    backend: Backend, thread: ThreadId, task: Task, agent: str | None, clock: float
) -> tuple[str, str | None]:
    """Step ``thread`` until it ends: ``(outcome, error)``."""
    from uwf.config.config import load_config
    from uwf.engine.step import step

    deadline = clock + task.timeout_minutes * 60 if task.timeout_minutes is not None else None
    configured = load_config(backend.root).agent_timeout
    while True:
        timeout = configured
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return "timeout", f"passed limits.timeoutMinutes ({task.timeout_minutes:g})"
            timeout = remaining if configured is None else min(configured, remaining)
        try:
            result = step(backend, thread, agent=agent, timeout=timeout)
        except UwfError as exc:
            code = exit_code(exc, loop=True)
            if code == 6:
                return "waiting", exc.message
            if deadline is not None and time.monotonic() >= deadline:
                return "timeout", f"passed limits.timeoutMinutes ({task.timeout_minutes:g})"
            return "failed", exc.message
        if result.done:
            return result.status, None


def _end(backend: Backend, thread: ThreadId) -> None:
    """Kill a thread the run left active (failed, waiting, out of time)."""
    from uwf.engine.threads import lifecycle

    with contextlib.suppress(UwfError):  # it ended meanwhile
        lifecycle.kill(backend, thread)


def _head(backend: Backend, thread: ThreadId) -> chain.Start | chain.Step:
    head = backend.threads.head(thread)
    if head is None:
        entry = backend.threads.history_entry(thread)
        assert entry is not None, thread
        head = entry.head
    return chain.load_head(backend.nodes, head)


def _record(
    backend: Backend,
    task: Task,
    ran: judges.Ran,
    judged: list[dict[str, Any]],
    workflow: NodeHash,
    batch: str,
    agent: str | None,
    began: int,
) -> NodeHash:
    """Store the run's EvalRun node; its hash."""
    store = backend.nodes
    h = schemas.ensure(store)
    steps = chain.steps_oldest_first(store, ran.head)
    wf = chain.load_workflow(store, workflow)
    payload: dict[str, Any] = {
        "task": task.name,
        "taskFile": store.put(h.text, task.text),
        "batch": batch,
        "workflow": workflow,
        "workflowName": str(wf.get("name", "")),
        "thread": ran.thread,
        "start": chain.start_of(store, ran.head).hash,
        "head": ran.head.hash,
        "agent": agent,
        "agents": sorted({str(s.payload.get("agent", "")) for s in steps}),
        "models": _models(store, steps),
        "outcome": ran.outcome,
        "judges": judged,
        "score": judges.weighted(judged),
        "startedAt": began,
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
