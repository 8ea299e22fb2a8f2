"""One run of an eval task from its start to its record, whoever steps its thread (this
process: ``engine.evals.run``; a fleet's workers: ``engine.evals.fleet``): begun as a thread
in a fresh copy of the task's fixture, then judged and recorded as an EvalRun node
(``finish``), or given up with nothing recorded (``discard``) — docs/evals.md.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uwf.backend.base import Backend
from uwf.engine.evals import judges
from uwf.engine.evals.task import Task
from uwf.model import chain
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash
from uwf.util.errors import InvalidInput, UwfError
from uwf.util.ulid import ThreadId, now_ms

if TYPE_CHECKING:
    from uwf.cas.store import Store
    from uwf.util.outputs import EvalRunLine


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
        "workflowName": wf.name,
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


def _models(store: Store, steps: list[chain.Step]) -> list[str]:
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
