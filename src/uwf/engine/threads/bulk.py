"""Bulk actions: ``thread kill``, ``thread stop``, ``thread retry`` and ``thread rerun`` over
the threads named and the threads the filters of ``thread list`` match (docs/scale-out.md,
"Bulk actions").

``select`` fixes the targets once, before anything is done: the threads named, in the order
given, then the ones the filters match, newest first, each once. ``run`` then yields one
``BulkLine`` per target, in that order: it checks the target as the single command would
(``Action.check``) and acts on it, or — with ``dry_run`` — stops there. A target the action
does not apply to is ``skipped`` when a filter matched it and an ``error`` when it was named
(as the single command would have failed); an action that fails is an ``error`` too, and the
next target goes on. A dry run and a real run of the same store therefore print the same
threads in the same order, with the same skips and refusals.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from uwf.backend.base import Backend
from uwf.model import chain
from uwf.model.threads import active_status, locate, not_active, workflow_of
from uwf.util.errors import InvalidInput, NotFound, UsageError, UwfError, exit_code, printable
from uwf.util.tuples import NamedTuple
from uwf.util.ulid import ThreadId, check_thread_id

if TYPE_CHECKING:
    from uwf.util.outputs import BulkLine, BulkResult


@dataclass(frozen=True)
class Filters:
    """The filters of ``thread list`` a bulk action selects threads with (all optional)."""

    status: str | None = None
    workflow: str | None = None
    after: str | None = None
    before: str | None = None
    parent: str | None = None

    def selects(self) -> bool:
        """Whether any filter is given (then the filters select threads)."""
        values = (self.status, self.workflow, self.after, self.before, self.parent)
        return any(v is not None for v in values)


class Target(NamedTuple):
    """A thread a bulk action is about: named or matched, and how it looked when selected."""

    thread: ThreadId
    named: bool
    workflow: str | None = None
    status: str | None = None  # None: a thread named that does not exist


class Skip(Exception):
    """A thread the action leaves alone without failing, whether named or matched (``thread
    stop`` of a thread with no background run)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def refusal(command: str) -> str:
    """The usage error of a bulk command given neither threads nor a filter."""
    return (
        f"{command} needs thread ids or a filter (--status, --workflow, --after, --before, "
        "--parent); --status active selects every active thread"
    )


def select(backend: Backend, command: str, ids: Sequence[str], filters: Filters) -> list[Target]:
    """The targets of a bulk action: ``ids`` (checked: a malformed one refuses the whole
    command), then every thread ``filters`` match, newest first, each once. Neither: a usage
    error, so that no bulk action ever applies to every thread by default."""
    if not ids and not filters.selects():
        raise UsageError(refusal(command))
    named = [check_thread_id(i) for i in ids]
    out: list[Target] = []
    seen: set[str] = set()
    for tid in named:
        if tid not in seen:
            seen.add(tid)
            out.append(_named(backend, tid))
    if filters.selects():
        from uwf.engine.threads.listing import list_threads

        matched = list_threads(
            backend,
            status=filters.status,
            workflow=filters.workflow,
            after=filters.after,
            before=filters.before,
            parent=filters.parent,
        )
        for item in matched:
            if item["thread"] not in seen:
                seen.add(item["thread"])
                out.append(Target(item["thread"], False, item["workflow"], item["status"]))
    return out


def _named(backend: Backend, tid: ThreadId) -> Target:
    """A thread named on the command line, with its workflow and status (``thread list``'s)."""
    try:
        ref = locate(backend, tid)
    except NotFound:
        return Target(tid, True)
    try:
        workflow: str | None = workflow_of(backend, ref)
    except UwfError:  # an unreadable chain: the action says what it meets
        workflow = None
    status = ref.status
    if ref.active:
        status = active_status(ref.waiting, backend.locks.is_running(tid), ref.failure)
    return Target(tid, True, workflow, status)


class Action:
    """One bulk action: ``check`` raises what the single command would refuse with (or
    ``Skip``); ``act`` does it and returns what the single command prints."""

    name = ""
    loop = False  # its errors carry the loop contract's codes (docs/errors.md)

    def check(self, backend: Backend, thread: ThreadId) -> None:
        raise NotImplementedError

    def act(self, backend: Backend, thread: ThreadId) -> BulkResult:
        raise NotImplementedError


def _active(backend: Backend, thread: ThreadId) -> None:
    if backend.threads.head(thread) is None:
        raise not_active(backend, thread)


@dataclass
class Kill(Action):
    """``thread kill``. Killing a parent kills its active children first: a child that is a
    target too is then reported as killed by this command, not as already ended."""

    name = "kill"
    killed: set[str] = field(default_factory=set)

    def check(self, backend: Backend, thread: ThreadId) -> None:
        if thread not in self.killed:
            _active(backend, thread)

    def act(self, backend: Backend, thread: ThreadId) -> BulkResult:
        if thread in self.killed:
            return {"thread": thread, "killed": True}
        from uwf.engine.threads.lifecycle import kill

        descendants = self._descendants(backend, thread)
        done = kill(backend, thread)
        self.killed.update(descendants)
        return done

    @staticmethod
    def _descendants(backend: Backend, thread: ThreadId) -> set[str]:
        children: dict[str, list[str]] = {}
        for record in backend.threads.active():
            if record.info.parent is not None:
                children.setdefault(record.info.parent, []).append(record.thread)
        out: set[str] = set()
        todo = list(children.get(thread, []))
        while todo:
            child = todo.pop()
            if child not in out:
                out.add(child)
                todo.extend(children.get(child, []))
        return out


class Stop(Action):
    """``thread stop``: a thread with no background run is skipped, named or not (the single
    command prints ``"stopped": false`` and exits 0 there)."""

    name = "stop"

    def check(self, backend: Backend, thread: ThreadId) -> None:
        _active(backend, thread)
        holder = backend.locks.holder(thread)
        if holder is None:
            raise Skip(f"thread {thread} is not currently running")
        if not holder.background:
            raise Skip(
                f"thread {thread} has no background run (a foreground step holds it: "
                f"pid {holder.pid})"
            )

    def act(self, backend: Backend, thread: ThreadId) -> BulkResult:
        from uwf.engine.step.background import stop

        result, warning = stop(backend, thread)
        if not result["stopped"]:  # the run ended since the check
            raise Skip(warning)
        return result


class Retry(Action):
    """``thread retry``."""

    name = "retry"

    def check(self, backend: Backend, thread: ThreadId) -> None:
        record = backend.threads.get(thread)
        if record is None:
            raise not_active(backend, thread)
        if record.failure is None:
            raise InvalidInput(f"thread {thread} has no failed attempts to retry")

    def act(self, backend: Backend, thread: ThreadId) -> BulkResult:
        from uwf.engine.threads.steer import retry

        return retry(backend, thread)


@dataclass
class Rerun(Action):
    """``thread rerun`` of each thread's last step (active or archived), in a new thread
    that works in ``cwd`` when given, in none with ``no_cwd`` (``--no-cwd``), else in the
    thread's working directory."""

    agent: str | None = None
    timeout: float | None = None
    edge_prompt: str | None = None
    cwd: str | None = None
    no_cwd: bool = False
    name = "rerun"
    loop = True

    def check(self, backend: Backend, thread: ThreadId) -> None:
        self.last_step(backend, thread)

    def act(self, backend: Backend, thread: ThreadId) -> BulkResult:
        from uwf.engine.threads.steer import rerun

        step, cwd = self.of_thread(backend, thread)
        return rerun(
            backend,
            step,
            agent=self.agent,
            timeout=self.timeout,
            edge_prompt=self.edge_prompt,
            cwd=cwd,
        )

    def of_thread(self, backend: Backend, thread: str) -> tuple[str, str | None]:
        """The step a thread's re-run runs again, and where: ``cwd``, none with ``no_cwd``,
        else the thread's."""
        where = None if self.no_cwd else self.cwd or locate(backend, thread).cwd
        return self.last_step(backend, thread), where

    @staticmethod
    def last_step(backend: Backend, thread: str) -> str:
        head = locate(backend, thread).head
        if not isinstance(chain.load_head(backend.nodes, head), chain.Step):
            raise InvalidInput(f"thread {thread} has no step to re-run")
        return head


def run(
    backend: Backend, action: Action, targets: Sequence[Target], *, dry_run: bool = False
) -> Iterator[BulkLine]:
    """One line per target, in order, as each is done (or, with ``dry_run``, would be)."""
    for target in targets:
        line: BulkLine = {"thread": target.thread, "action": action.name}
        if target.workflow is not None:
            line["workflow"] = target.workflow
        if target.status is not None:
            line["status"] = target.status
        _outcome(backend, action, target, line, dry_run)
        if dry_run:
            line["dryRun"] = True
        yield line


def _outcome(
    backend: Backend, action: Action, target: Target, line: BulkLine, dry_run: bool
) -> None:
    """Check the target, then act (unless ``dry_run``): what happened goes into ``line``."""
    try:
        if target.status is None:
            raise NotFound(f"thread not found: {target.thread}")
        action.check(backend, target.thread)
    except Skip as skip:
        line["skipped"] = printable(skip.reason)
        return
    except UwfError as exc:  # refused: an error for a thread named, else a skip
        if target.named:
            _failed(line, exc, action)
        else:
            line["skipped"] = printable(exc.message)
        return
    if dry_run:
        return
    try:
        line["result"] = action.act(backend, target.thread)
    except Skip as skip:
        line["skipped"] = printable(skip.reason)
    except UwfError as exc:
        _failed(line, exc, action)


def _failed(line: BulkLine, exc: UwfError, action: Action) -> None:
    line["error"] = printable(exc.message)
    line["exit"] = exit_code(exc, loop=action.loop)
