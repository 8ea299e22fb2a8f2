"""Thread lifecycle commands other than the step itself: start, show, fork, kill (``thread
list`` is ``listing``, ``thread steps`` is ``steplist``).

Each function takes the backend and returns plain data. A thread is active while the thread
table has its head, and archived once the history has an entry for it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from uwf.backend.base import Backend, Holder, ThreadInfo
from uwf.model import chain, cost
from uwf.model.threads import (
    ThreadRef,
    active_status,
    failure_json,
    locate,
    require_active,
    task_line,
    waiting_json,
    workflow_of,
)
from uwf.protocol import schemas
from uwf.util.base32 import check_hash
from uwf.util.errors import InvalidInput, NotActive, UsageError, oneline
from uwf.util.optional import present
from uwf.util.ulid import ThreadId, new_thread_id, now_ms

if TYPE_CHECKING:
    from uwf.util.outputs import (
        BackgroundShown,
        ChildShown,
        FailureShown,
        Forked,
        Killed,
        StartEntry,
        StepEntry,
        ThreadShown,
        ThreadStarted,
        WaitingShown,
        WorkerShown,
    )

    class _Now(TypedDict, total=False):
        """The keys ``thread show`` prints only sometimes (``chain`` is set last, after
        ``cost``: keys print in the order they are set)."""

        cwd: str
        waiting: WaitingShown
        failure: FailureShown
        priority: int
        background: BackgroundShown
        worker: WorkerShown
        children: list[ChildShown]
        chain: list[StartEntry | StepEntry]


MAX_PROMPT_BYTES = 1 << 20


MAX_CWD_BYTES = 4096


def thread_dir(cwd: str | Path) -> str:
    """A thread's working directory (``--cwd``) as recorded: absolute (``~`` expanded, not
    resolved through links), an existing directory here, one printable line."""
    text = str(cwd)
    if not text.strip() or not text.isprintable():
        raise InvalidInput(
            f"working directory must be one line of printable characters: {oneline(text)}"
        )
    path = os.path.abspath(os.path.expanduser(text))
    if len(path.encode("utf-8", "surrogateescape")) > MAX_CWD_BYTES:
        raise InvalidInput(f"working directory is too long (limit {MAX_CWD_BYTES} bytes)")
    if not os.path.exists(path):
        raise InvalidInput(f"working directory does not exist: {oneline(path)}")
    if not os.path.isdir(path):
        raise InvalidInput(f"working directory is not a directory: {oneline(path)}")
    return path


KEY_LIMIT = 200  # characters of a start key
PRIORITY_LIMIT = 1_000_000  # |priority|


def check_priority(priority: int) -> None:
    """A priority: an integer from -1000000 to 1000000 (a usage error otherwise)."""
    if not -PRIORITY_LIMIT <= priority <= PRIORITY_LIMIT:
        raise UsageError(
            f"--priority must be an integer from -{PRIORITY_LIMIT} to {PRIORITY_LIMIT}, "
            f"got: {priority}"
        )


def check_key(key: str | None) -> None:
    """``thread start --key``: 1 to 200 characters, none of them a control character."""
    if key is not None and not (
        0 < len(key) <= KEY_LIMIT and all(c.isprintable() or c == " " for c in key)
    ):
        raise UsageError(f"--key must be 1 to {KEY_LIMIT} characters, with no control characters")


def start(
    backend: Backend,
    workflow_ident: str,
    prompt: str,
    max_rounds: int | None = None,
    cwd: str | Path | None = None,
    key: str | None = None,
    priority: int = 0,
) -> ThreadStarted:
    """Create a thread: a StartNode in the CAS and its head in the thread table. Runs nothing.

    ``cwd`` (``--cwd``) is the thread's working directory: recorded with it, where its agents
    start (docs/format.md, "Working directories"), and where a project workflow is looked up
    (else the current directory). With ``key``, at most once per key and workflow name
    (docs/format.md, "Start keys"): when the key already names a thread of that workflow,
    that thread is returned (``existing``), whatever its state, and nothing is written."""
    from uwf.engine.workflows import stored as workflows

    check_key(key)
    check_priority(priority)
    try:
        size = len(prompt.encode("utf-8"))
    except UnicodeEncodeError:  # undecodable argv or stdin bytes arrive as lone surrogates
        raise InvalidInput("prompt is not UTF-8 text") from None
    if size > MAX_PROMPT_BYTES:
        raise InvalidInput(f"prompt is too large: {size} bytes (limit {MAX_PROMPT_BYTES})")
    if not prompt.strip():
        raise InvalidInput("the task is empty: give it with -p TEXT, or -p - to read it from stdin")
    if max_rounds is not None and max_rounds < 1:
        raise InvalidInput(f"--max-rounds must be a positive integer, got: {max_rounds}")
    workdir = thread_dir(cwd) if cwd is not None else None
    wf_hash = workflows.resolve_for_start(
        backend, workflow_ident, Path(workdir) if workdir is not None else Path.cwd()
    )
    store = backend.nodes
    scope = chain.load_workflow(store, wf_hash).name if key is not None else ""
    if key is not None:
        found = backend.threads.keyed(scope, key)
        if found is not None:  # a start retried: write nothing
            return _keyed(backend, found, key, existing=True)
    h = schemas.ensure(store)
    payload: dict[str, Any] = {"workflow": wf_hash, "prompt": prompt}
    if max_rounds is not None:
        payload["maxRounds"] = max_rounds
    start_hash = check_hash(store.put(h.start, payload))
    thread = new_thread_id()
    info = ThreadInfo(wf_hash, task_line(prompt), workdir, priority=priority)
    if key is None:
        backend.threads.create(thread, start_hash, info)
    else:
        thread, created = backend.threads.create_keyed(scope, key, thread, start_hash, info)
        if not created:  # another start with this key won the race
            return _keyed(backend, thread, key, existing=True)
    from uwf.util.log import ProcessLog  # not at import: `thread show` writes no log

    ProcessLog(backend.root, thread=thread, workflow=wf_hash).write(
        "7HNQ4B2X", f"thread created start={start_hash}" + (" (keyed)" if key else "")
    )
    if key is not None:
        return {"workflow": wf_hash, "thread": thread, "key": key, "existing": False}
    return {"workflow": wf_hash, "thread": thread}


def _keyed(backend: Backend, thread: ThreadId, key: str, *, existing: bool) -> ThreadStarted:
    """What ``thread start --key`` prints for the thread a key names."""
    workflow = workflow_of(backend, locate(backend, thread))
    return {"workflow": workflow, "thread": thread, "key": key, "existing": existing}


def show(backend: Backend, thread: str, *, full: bool = False) -> ThreadShown:
    """``{workflow, thread, head, done, status, steps, cost}`` (plus ``waiting``, ``failure``,
    ``background`` — ``{pid, host, since, log}`` — while a background run holds it, and
    ``worker`` — ``{id, pid, host, since}`` — while a ``uwf worker`` steps it) — a few
    node reads, whatever the length: the cost is the total the head's detail records
    (docs/format.md, "Cost"). ``full`` adds ``chain``: the StartNode and every step, oldest
    first, as ``thread steps`` lists them (this walks the whole chain)."""
    ref = locate(backend, thread)
    store = backend.nodes
    head = chain.load_head(store, ref.head)
    start = chain.start_of(store, head)
    status = ref.status
    holder = backend.locks.holder(ref.thread) if ref.active else None
    if ref.active:
        status = active_status(ref.waiting, holder is not None, ref.failure)
    now: _Now = {}
    if ref.cwd is not None:
        now["cwd"] = ref.cwd
    if ref.waiting is not None and ref.active:
        now["waiting"] = waiting_json(ref.waiting)
    if ref.failure is not None and ref.active:
        now["failure"] = failure_json(ref.failure)
    if ref.priority:
        now["priority"] = ref.priority
    if holder is not None and holder.background:
        now["background"] = _background(holder)
    if holder is not None and holder.worker is not None:
        now["worker"] = _worker(holder, holder.worker)
    if ref.waiting is not None and ref.active and ref.waiting.children is not None:
        now["children"] = _children(backend, ref.waiting.children)
    out: ThreadShown = {
        "workflow": ref.workflow or start.workflow,
        "thread": ref.thread,
        "head": ref.head,
        "done": not ref.active,
        "status": status,
        "steps": chain.depth_of(store, head),
        **now,
        "cost": cost.total(store, head).thread_json(head.timestamp - start.timestamp),
    }
    if full:
        from uwf.engine.threads.steplist import chain_entries  # the whole chain: --full only

        first, entries, _ = chain_entries(store, head)
        out["chain"] = [first, *entries]
    return out


def _children(backend: Backend, children: tuple[ThreadId, ...]) -> list[ChildShown]:
    """The children a parent waits for, in item order, each with its status."""
    running = backend.locks.running()
    out: list[ChildShown] = []
    for child in children:
        record = backend.threads.get(child)
        if record is not None:
            status = active_status(record.waiting, child in running, record.failure)
        else:
            entry = backend.threads.history_entry(child)
            status = entry.status if entry is not None else "missing"
        out.append({"thread": child, "status": status})
    return out


def _background(holder: Holder) -> BackgroundShown:
    """The background run holding a thread: ``{pid, host, since, log}`` as it recorded them."""
    shown = present(pid=holder.pid, host=holder.host, since=holder.since, log=holder.log)
    return cast("BackgroundShown", shown)


def _worker(holder: Holder, worker: str) -> WorkerShown:
    """The ``uwf worker`` holding a thread: ``{id, pid, host, since}``."""
    shown = {"id": worker, **present(pid=holder.pid, host=holder.host, since=holder.since)}
    return cast("WorkerShown", shown)


def fork(backend: Backend, node_hash: str, cwd: str | Path | None = None) -> Forked:
    """A new active thread whose head is an existing StartNode or StepNode. Copies nothing.
    ``cwd``: the new thread's working directory (``--cwd``)."""
    h = check_hash(node_hash)
    workdir = thread_dir(cwd) if cwd is not None else None
    store = backend.nodes
    head = chain.load_head(store, h)
    start = chain.start_of(store, head)
    thread = new_thread_id()
    info = ThreadInfo(start.workflow, task_line(start.prompt), workdir)
    backend.threads.create(thread, h, info)
    from uwf.util.log import ProcessLog

    ProcessLog(backend.root, thread=thread).write("K2V7N4D9", f"thread forked from={h}")
    return {"thread": thread, "forkedFrom": {"step": h}}


def kill(backend: Backend, thread: str, *, stop_wait: float = 5.0) -> Killed:
    """Archive an active thread with history status ``killed``.

    A step running on it notices within half a second (``engine.step``), stops its agent's
    process group and fails; ``kill`` waits up to ``stop_wait`` seconds for that, so that when
    it returns no agent of the thread is still running (docs/errors.md, "Signals").
    """
    tid, head = require_active(backend, thread)
    workflow = workflow_of(backend, ThreadRef(tid, head, True, "active"))
    for child in backend.threads.active():  # its fan-outs' children first, and theirs
        if child.info.parent == tid:
            try:
                kill(backend, child.thread, stop_wait=stop_wait)
            except NotActive:
                continue  # ended meanwhile
    head = backend.threads.archive(tid, workflow, "killed", now_ms())
    from uwf.util.log import ProcessLog

    ProcessLog(backend.root, thread=tid, workflow=workflow).write(
        "Q8M3T6W1", f"thread killed head={head}"
    )
    from uwf.util import clock  # not at import: `thread show` reads no clock

    deadline = clock.monotonic() + stop_wait
    while backend.locks.is_running(tid) and clock.monotonic() < deadline:
        clock.sleep(0.05)
    return {"thread": tid, "killed": True}
