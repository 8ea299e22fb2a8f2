"""Fleets: ``thread step --next`` and ``uwf worker`` (docs/scale-out.md).

Many processes, on one machine or many, share one backend and no coordinator. Each picks the
oldest active thread that is not waiting, not ``failed``, not backing off after a failure (its
next allowed attempt is stored with the thread: docs/format.md, "Retries") and that nobody
steps, takes its step lock without
waiting (a lock another process holds means "skip it", like ``SKIP LOCKED``), and runs one
step under it. Two processes that pick the same thread at the same moment: one gets the
lock, the other moves on; should both ever run (a lock lost with its connection), the
head's compare-and-swap lets exactly one of them record its step.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from uwf.backend.base import ActiveThread, Backend
from uwf.engine.step.commit import StepResult
from uwf.engine.step.drive import step_held
from uwf.engine.step.plan import noted, preplan
from uwf.engine.step.run import Runner, process_runner
from uwf.model.threads import ThreadRef, fanned_out, workflow_of
from uwf.util import clock as clocks
from uwf.util.base32 import NodeHash, is_hash
from uwf.util.errors import (
    Busy,
    HeldBack,
    Interrupted,
    NothingToStep,
    Stopped,
    UwfError,
    exit_code,
)
from uwf.util.ulid import ThreadId, now_ms, timestamp_ms

if TYPE_CHECKING:
    from typing import NotRequired, TypedDict

    from uwf.util.outputs import WorkerFailure, WorkerStep

    class WorkerSummary(TypedDict):
        """What a worker did (its last ``worker:`` line on stderr)."""

        steps: int
        failed: int
        stopped: NotRequired[str]


def workflow_versions(backend: Backend, workflow: str) -> set[NodeHash]:
    """The Workflow hashes ``--workflow`` means: a hash, or every stored version of a name."""
    if is_hash(workflow):
        return {workflow}
    from uwf.engine.workflows.stored import history

    return {v["hash"] for v in history(backend, workflow)}


def _runs(backend: Backend, record: ActiveThread, versions: set[NodeHash] | None) -> bool:
    if versions is None:
        return True
    ref = ThreadRef(record.thread, record.head, True, "active", record.info.workflow)
    try:
        return workflow_of(backend, ref) in versions
    except UwfError:
        return False


def family(records: list[ActiveThread], only: frozenset[ThreadId]) -> set[ThreadId]:
    """The threads of ``records`` that ``only`` covers: those it names and the children
    their fan-outs started, and theirs (docs/format.md, "Fan-out and join")."""
    parents = {r.thread: r.info.parent for r in records}
    covered = set()
    for thread in parents:
        seen: set[ThreadId] = set()
        at: ThreadId | None = thread
        while at is not None and at not in only and at not in seen:
            seen.add(at)
            at = parents.get(at)
        if at is not None and at in only:
            covered.add(thread)
    return covered


def _still_runnable(backend: Backend, record: ActiveThread) -> bool:
    """Re-checked under the step lock: not waiting, or waiting for children that all ended
    (docs/format.md, "Fan-out and join"); the parent's join then runs exactly once."""
    waiting = record.waiting
    if waiting is None:
        return True
    if not fanned_out(waiting):  # e.g. the joining role deferred
        return False
    return all(backend.threads.head(c) is None for c in waiting.children or ())


def by_priority(records: list[ActiveThread], aging: int, now: int) -> list[ActiveThread]:
    """The order ``--next`` and workers try threads in (docs/format.md, "Priorities"): the
    highest effective priority first — the thread's priority plus one for every ``aging``
    seconds since it was created, so that no thread waits forever —, oldest first within."""

    def key(record: ActiveThread) -> tuple[int, str]:
        created = timestamp_ms(record.thread) or now
        return (-(record.info.priority + max(0, now - created) // (aging * 1000)), record.thread)

    return sorted(records, key=key)


def _aging(backend: Backend) -> int:
    from uwf.config.config import load_config

    try:
        return load_config(backend.root).priority_aging
    except UwfError:
        return 300  # the step reports a config.yaml it cannot read


def step_next(
    backend: Backend,
    *,
    versions: set[NodeHash] | None = None,
    only: frozenset[ThreadId] | None = None,
    skip: Iterable[ThreadId] = (),
    on_pick: Callable[[ThreadId], None] | None = None,
    agent: str | None = None,
    timeout: float | None = None,
    runner: Runner = process_runner,
    worker: str | None = None,
    should_stop: Callable[[], bool] | None = None,
    shut_down: Callable[[], bool] | None = None,
) -> StepResult:
    """One step of the first thread, in priority order (``by_priority``), that is active,
    not waiting, not failed, not backing off and not being stepped.

    ``versions`` limits it to threads of those workflows, ``only`` to those threads and
    their fan-outs' children (``family``); ``skip`` leaves threads out; ``worker`` names the
    ``uwf worker`` in the step lock's holder record; ``should_stop`` is polled while the
    agent runs, ``shut_down`` asked when it died of a signal (``step_held``).
    A thread a fleet limit holds back is passed over for the next one; NothingToStep when
    there is none, HeldBack (the last reason) when every candidate was held back.
    """
    skipped = set(skip)
    held: HeldBack | None = None
    now = now_ms()
    idle = backend.idle_threads(now)
    if only is not None:
        covered = family(backend.threads.active(), only)
        idle = [r for r in idle if r.thread in covered]
    for record in by_priority(idle, _aging(backend), now):
        if record.thread in skipped:
            continue
        if not _runs(backend, record, versions):
            continue
        planned = preplan(backend, record, agent=agent, timeout=timeout)
        try:
            with backend.locks.step(
                record.thread, wait=False, worker=worker, note=noted(planned)
            ) as lock:
                current = lock.current(backend.threads, record.thread)  # read under the lock
                if current is None or not _still_runnable(backend, current):
                    continue  # archived or deferred since the listing
                if current.failure is not None and not current.failure.ready(now_ms()):
                    continue  # failed by another process since the listing
                if on_pick is not None:
                    on_pick(record.thread)
                return step_held(
                    backend,
                    lock,
                    record.thread,
                    agent=agent,
                    timeout=timeout,
                    runner=runner,
                    head=current.head,
                    should_stop=should_stop,
                    shut_down=shut_down,
                    record=current,  # no second read of the row
                    planned=planned,
                )
        except HeldBack as exc:
            held = exc  # its agent or provider is at a limit: try a thread it may step
        except Busy:
            continue  # another process took it first: skip-locked
    if held is not None:
        raise held
    raise NothingToStep("nothing to step: no active thread is idle and not waiting")


#: Seconds within which a second SIGTERM is the first one again (``timeout`` sends it to the
#: worker and to its process group), and within which an agent's death by a signal and the
#: worker's own SIGTERM are one shutdown (docs/scale-out.md, "Where to run workers").
#: Measured on the system clock, not ``uwf.util.clock``'s: signals come in real time.
SIGNAL_ECHO = 1.0


@dataclass
class Worker:
    """``uwf worker``: ``step_next`` in a loop, with back-off when idle. A thread whose step
    failed waits for the next attempt its retry policy allows, recorded in the backend, so
    every worker on every machine honours it.

    ``emit`` gets one record per step attempt (the step's JSON, plus ``ms``; or the thread
    and the error); ``say`` gets the worker's own lines (idle, stopping). Interrupted (SIGTERM,
    SIGINT) stops the loop after the step's agent was stopped, the head untouched.

    SIGTERM drains (``take_signal``, given to ``util.signals.draining``): a step in flight
    may finish within ``drain_timeout`` seconds, then its agent is stopped (``Stopped``: no
    failure recorded, the head stays); no other step starts. ``id`` (the registry's) is
    written into the holder record of every step lock it takes.
    """

    backend: Backend
    emit: Callable[[WorkerStep | WorkerFailure], None]
    say: Callable[[str], None]
    max_steps: int | None = None
    idle_exit: float | None = None
    versions: set[NodeHash] | None = None
    only: frozenset[ThreadId] | None = None  # ``--thread``: these threads (and their children)
    agent: str | None = None
    timeout: float | None = None
    runner: Runner = process_runner
    backoff: tuple[float, float] = (0.05, 5.0)  # first and longest pause when idle
    # uwf.util.clock's, read at each call (a test may put another clock in place)
    sleep: Callable[[float], None] = clocks.sleep
    clock: Callable[[], float] = clocks.monotonic
    id: str | None = None
    drain_timeout: float = 0.0
    steps: int = 0
    failed: int = 0
    stepping: ThreadId | None = None  # the thread whose step lock it holds
    drain_since: float | None = None  # when SIGTERM asked it to drain (``clock``)
    drain_said: bool = False
    drain_stopped: bool = False  # the drain ran out of time and stopped the step
    agent_signalled: bool = False  # the shutdown's signal reached the agent too
    term_at: float | None = None  # when the first SIGTERM came (time.monotonic())

    def take_signal(self, signum: int) -> bool:
        """A signal handler's question: take a first SIGTERM during a step (drain), and its
        echo within ``SIGNAL_ECHO`` seconds (``timeout`` signals the worker, then its process
        group); else not (the signal stops the worker at once)."""
        if signum != signal.SIGTERM:
            return False
        now = time.monotonic()
        if self.term_at is not None and now - self.term_at < SIGNAL_ECHO:
            return self.drain_since is not None  # the same request, sent twice
        self.term_at = self.term_at if self.term_at is not None else now
        if self.stepping is None or self.drain_since is not None:
            return False
        if not self.drain_timeout > 0:
            return False
        self.drain_since = self.clock()
        return True

    def _shut_down(self) -> bool:
        """Asked when the agent died of a signal: whether that was this worker's shutdown —
        a SIGTERM it got, or gets within ``SIGNAL_ECHO`` seconds (systemd's
        ``KillMode=control-group`` signals every process of the service at once)."""
        deadline = time.monotonic() + SIGNAL_ECHO
        while self.term_at is None and time.monotonic() < deadline:
            time.sleep(0.02)  # the handler runs between two bytecodes of this loop
        self.agent_signalled = self.term_at is not None
        return self.agent_signalled

    def _overdue(self) -> bool:
        """Polled while an agent runs: whether a drain ran out of time."""
        if self.drain_since is None:
            return False
        if not self.drain_said:
            self.drain_said = True
            self.say(
                f"SIGTERM: letting the step of thread {self.stepping} finish (up to "
                f"{self.drain_timeout:g}s, --drain-timeout)"
            )
        return self.clock() - self.drain_since >= self.drain_timeout

    def run(self) -> WorkerSummary:
        """Work until ``max_steps``, ``idle_exit`` seconds without work, or a signal."""
        pause, idle_since = self.backoff[0], self.clock()
        stopped = None
        try:
            while self.max_steps is None or self.steps < self.max_steps:
                attempted = self._attempt()
                if self.drain_since is not None:
                    stopped = "interrupted (SIGTERM)"
                    self.say(self._drained())
                    break
                if attempted:
                    pause, idle_since = self.backoff[0], self.clock()
                    continue
                if self.only is not None and self._ended():
                    self.say("every thread it was given has ended: stopping")
                    break
                idle = self.clock() - idle_since
                if self.idle_exit is not None and idle >= self.idle_exit:
                    self.say(f"idle for {idle:.1f}s: stopping")
                    break
                if self.idle_exit is not None:
                    pause = min(pause, max(0.0, self.idle_exit - idle))
                self.sleep(pause)
                pause = min(pause * 2, self.backoff[1])
        except Interrupted as exc:
            stopped = exc.message
            self.say(f"{exc.message}: stopped; the step in flight was not recorded")
        out: WorkerSummary = {"steps": self.steps, "failed": self.failed}
        if stopped is not None:
            out["stopped"] = stopped
        return out

    def _ended(self) -> bool:
        """Whether every thread of ``only`` has ended (archived, or never known)."""
        assert self.only is not None
        try:
            active = {r.thread for r in self.backend.threads.active()}
        except UwfError:  # the store is away: not known to have ended
            return False
        return not active & self.only

    def _drained(self) -> str:
        if self.drain_stopped:
            return "SIGTERM: stopped after --drain-timeout; the step in flight was not recorded"
        if self.agent_signalled:
            return (
                "SIGTERM: the agent was stopped with the worker; the step in flight was not "
                "recorded"
            )
        return "SIGTERM: the step in flight ended; stopped"

    def _pick(self, thread: ThreadId) -> None:
        self.stepping = thread

    def _attempt(self) -> bool:
        """One step attempt; False when there was nothing to do (or the store is away)."""
        began = self.clock()
        try:
            result = step_next(
                self.backend,
                versions=self.versions,
                only=self.only,
                on_pick=self._pick,
                agent=self.agent,
                timeout=self.timeout,
                runner=self.runner,
                worker=self.id,
                should_stop=self._overdue,
                shut_down=self._shut_down,
            )
        except (NothingToStep, HeldBack):  # held back: idle until a limit has room
            return False
        except UwfError as exc:
            if self.stepping is None:  # the store itself failed (e.g. unreachable): back off
                self.say(f"error: {exc.message}")
                return False
            if (
                isinstance(exc, Stopped)
                and self.drain_since is not None
                and not (self.agent_signalled)
            ):
                self.drain_stopped = True
                exc = Stopped(
                    f"thread {self.stepping}: the step outlived --drain-timeout "
                    f"({self.drain_timeout:g}s) after SIGTERM: its agent was stopped and the "
                    "step was not recorded"
                )
            self._failed(self.stepping, exc, began)  # the thread stepped: the last one picked
            return True
        finally:
            self.stepping = None
        self.steps += 1
        self.emit({**result.as_json(), "ms": round((self.clock() - began) * 1000)})
        return True

    def _failed(self, thread: ThreadId, exc: UwfError, began: float) -> None:
        self.failed += 1
        self.emit(
            {
                "thread": thread,
                "error": exc.message,
                "exit": exit_code(exc, loop=True),
                "ms": round((self.clock() - began) * 1000),
            }
        )
