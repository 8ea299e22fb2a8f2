"""``uwf thread resume``: a person continues a thread that waits, or one that has ended
(docs/format.md, "Suspending and resuming").

- **A waiting thread** (its agent suspended the step with ``$SUSPEND``, or deferred it): the
  role it waits for runs again at once, its edge prompt followed by why it waited and what
  the person wrote (``-p``). If that step fails, the thread still waits; resume it again.
- **An ended thread** (completed, killed, max rounds) whose workflow has a ``$START.resume``
  edge: nodes never change and an archived thread never becomes active again, so resuming
  it starts a **new thread** at a StartNode (resume) — the same workflow, task and round
  limit, ``resumes`` the ended thread's head, ``resumeText`` what the person wrote — and runs
  its first step through ``$START.resume``. The chain goes on through the ended thread's
  steps (``uwf.model.chain``): agents see them, step numbers count on, and the round limit
  counts the steps since the resume. The ended thread is untouched; resuming it twice starts
  two threads. The new thread keeps the ended one's working directory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from uwf.backend.base import Backend, HistoryEntry, ThreadInfo, Waiting
from uwf.engine.step import step
from uwf.engine.step.run import SUSPENDED, Runner, process_runner
from uwf.model import chain
from uwf.model.threads import active_status
from uwf.moderator.evaluate import START, rules_of
from uwf.protocol import schemas
from uwf.util.errors import InvalidInput, NotFound, UwfError
from uwf.util.log import ProcessLog
from uwf.util.ulid import ThreadId, check_thread_id, new_thread_id

if TYPE_CHECKING:
    from uwf.util.outputs import ResumeLine, StepLine

RESUME = "resume"
MAX_TEXT_BYTES = 1 << 20


def resume_note(waiting: Waiting, text: str | None) -> str:
    """What follows the edge prompt of a resumed step: why it waited, and the person's text."""
    reason = waiting.reason or ""
    if reason.startswith(SUSPENDED):
        why = f"You suspended this step: {reason.removeprefix(SUSPENDED).strip()}"
    elif reason:
        why = f"This step waited: {reason}"
    else:
        why = "This step waited."
    said = text.strip() if text else ""
    answer = f"A person resumed it and wrote:\n\n{said}" if said else "A person resumed it."
    return f"## Resumed\n\n{why}\n{answer}"


def check_text(text: str | None) -> None:
    """A person's text (``-p``): UTF-8, at most ``MAX_TEXT_BYTES``."""
    if text is None:
        return
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidInput("prompt is not UTF-8 text") from None
    if size > MAX_TEXT_BYTES:
        raise InvalidInput(f"prompt is too large: {size} bytes (limit {MAX_TEXT_BYTES})")


def resume(
    backend: Backend,
    thread: str,
    text: str | None = None,
    *,
    agent: str | None = None,
    timeout: float | None = None,
    runner: Runner = process_runner,
) -> ResumeLine:
    """Resume ``thread`` with ``text`` and run one step; the step's line."""
    check_text(text)
    tid = check_thread_id(thread)
    record = backend.threads.get(tid)
    if record is not None:
        if record.waiting is None:
            status = active_status(None, backend.locks.is_running(tid))
            raise InvalidInput(
                f"thread {tid} is not waiting (status: {status}); "
                f"`uwf thread step {tid}` continues it"
            )
        note = resume_note(record.waiting, text)
        waited = step(backend, tid, agent=agent, timeout=timeout, runner=runner, extra_prompt=note)
        return _line(waited.as_json())
    entry = backend.threads.history_entry(tid)
    if entry is None:
        raise NotFound(f"thread not found: {thread}")
    new = resume_ended(backend, entry, text)
    try:
        result = step(backend, new, agent=agent, timeout=timeout, runner=runner)
    except UwfError as exc:
        exc.message = (
            f"{exc.message} (thread {tid} was resumed as {new}: "
            f"`uwf thread step {new}` runs its first step again)"
        )
        raise
    return _line(result.as_json(), tid)


def _line(step_line: StepLine, resumed_from: ThreadId | None = None) -> ResumeLine:
    line: ResumeLine = {
        "workflow": step_line["workflow"],
        "thread": step_line["thread"],
        "head": step_line["head"],
        "role": step_line["role"],
        "done": step_line["done"],
        "status": step_line["status"],
    }
    if resumed_from is not None:
        line["resumedFrom"] = resumed_from
    return line


def resume_ended(backend: Backend, entry: HistoryEntry, text: str | None) -> ThreadId:
    """A new thread that continues the ended one of ``entry`` through ``$START.resume``
    (nothing run yet)."""
    from uwf.model.threads import task_line

    tid, head, status = entry.thread, entry.head, entry.status
    store = backend.nodes
    start = chain.start_of(store, chain.load_head(store, head))
    workflow = chain.load_workflow(store, start.workflow)
    edges = workflow.graph.edges(START)
    if rules_of(workflow).version != 1 or edges is None or RESUME not in edges:
        raise InvalidInput(
            f"thread {tid} has ended ({status}) and its workflow has no $START.resume edge, "
            f"so it cannot be resumed; `uwf thread fork {head}` starts a thread at its last step"
        )
    payload: dict[str, Any] = {"workflow": start.workflow, "prompt": start.prompt}
    if start.max_rounds is not None:
        payload["maxRounds"] = start.max_rounds
    payload.update(resumes=head, resumeText=text or "")
    resumed = store.put(schemas.ensure(store).start_resume, payload)
    new = new_thread_id()
    info = ThreadInfo(start.workflow, task_line(start.prompt), entry.cwd)
    backend.threads.create(new, resumed, info)
    ProcessLog(backend.root, thread=new, workflow=start.workflow).write(
        "R8M2Q6T4", f"thread resumed from={tid} head={head} start={resumed}"
    )
    return new
