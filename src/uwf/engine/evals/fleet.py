"""``uwf eval run --fleet`` and ``--local-workers N``: runs stepped by ``uwf worker``s
(docs/evals.md, "Runs on a fleet").

``eval run`` starts every run's thread (each in its own copy of the fixture, as in-process)
and steps none of them: the fleet's workers — on any machine sharing the store, or N
``uwf worker --thread …`` processes started here for the duration — step them, in parallel.
This process watches the thread table until each run's thread has ended, then judges and
records the run exactly as the in-process path does (``record.finish``), one JSON line per run
in the order they end. A run ends as it would in-process (its fan-outs' children are part of
it: a failure or a wait of one counts as the run's):

* its thread was archived: ``completed`` (``$END``) or ``max_rounds`` (the thread's own
  ``maxRounds``, the task's ``maxSteps``, counted by whichever process steps it);
* a step failed: the thread's failure record (docs/format.md, "Thread state") — the first
  one ends the run, as a failed step does in-process; the retry policy is not waited for;
* an agent asked for a person (a deferral, ``$SUSPEND``): the thread waits (a fan-out's
  wait for its children is not one: the workers step the children);
* ``limits.timeoutMinutes`` or ``--wait-timeout`` passed: ``timeout``.

A thread that did not end is killed (a worker's step in flight notices within half a second
and stops its agent), so no worker steps it further.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING

from uwf.backend.base import ActiveThread, Backend
from uwf.engine.evals.record import Begun, Recording, begin, discard, finish
from uwf.engine.evals.task import Task
from uwf.util.base32 import NodeHash
from uwf.util.errors import UsageError, UwfError
from uwf.util.ulid import ThreadId

if TYPE_CHECKING:
    import subprocess

    from uwf.util.outputs import EvalRunLine

POLL = 0.1  # seconds between two looks at the thread table (well inside a retry's 1 s)
MAX_LOCAL_WORKERS = 64
STDERR_SHOWN = 300  # characters of a local worker's stderr quoted when it stopped early


@dataclass(frozen=True)
class FleetOptions:
    """``--fleet``, ``--local-workers N`` (None: none) and ``--wait-timeout``; ``worker`` is the
    command that runs ``uwf worker`` (the CLI gives it)."""

    local_workers: int | None = None
    worker: tuple[str, ...] = ()
    wait_timeout: float | None = None

    def check(self, agent: str | None) -> None:
        if self.local_workers is not None and not 1 <= self.local_workers <= MAX_LOCAL_WORKERS:
            raise UsageError(
                f"--local-workers must be between 1 and {MAX_LOCAL_WORKERS}, "
                f"got: {self.local_workers}"
            )
        if self.wait_timeout is not None and not self.wait_timeout > 0:
            raise UsageError(
                f"--wait-timeout must be a positive number of seconds, got: {self.wait_timeout:g}"
            )
        if agent is not None and not self.local_workers:
            raise UsageError(
                "--agent with --fleet needs --local-workers: a fleet's workers step with "
                "their own agents (uwf worker --agent, or config.yaml)"
            )


Ended = tuple[Begun, str, str | None]


def run_on_fleet(
    backend: Backend,
    planned: list[tuple[Task, NodeHash]],
    recording: Recording,
    options: FleetOptions,
    on_run: Callable[[EvalRunLine], None],
) -> list[EvalRunLine]:
    """Start a thread for each planned run, let workers step them, and finish each run as
    its thread ends; the runs' lines in the order they ended."""
    pending: list[Begun] = []
    lines: list[EvalRunLine] = []
    try:
        for task, workflow in planned:
            pending.append(begin(backend, task, workflow))
        wait = _WaitLimit(options.wait_timeout)
        threads = [run.thread for run in pending]
        with _local_workers(backend, options, recording.agent, threads) as workers:
            while pending:
                ended = _ended(backend, pending, wait)
                if not ended and workers.stopped():
                    ended = _ended(backend, pending, wait)  # ended just before they stopped
                    if not ended:
                        raise workers.error()
                for run, outcome, error in ended:
                    pending.remove(run)
                    line = finish(backend, run, outcome, error, recording)
                    lines.append(line)
                    on_run(line)
                if not ended:
                    time.sleep(POLL)
    finally:
        for run in pending:  # an error or a signal: no thread left to the fleet
            discard(backend, run, recording, stop_wait=0)
    return lines


@dataclass(frozen=True)
class _WaitLimit:
    """``--wait-timeout``: seconds from when every run's thread was started."""

    seconds: float | None
    since: float = field(default_factory=time.monotonic)

    def passed(self, now: float) -> bool:
        return self.seconds is not None and now >= self.since + self.seconds


def _ended(backend: Backend, pending: list[Begun], wait: _WaitLimit) -> list[Ended]:
    """The pending runs that ended, each with its outcome and error (see the module). A run's
    thread and the children of its fan-outs are one: a failure or a wait of any ends it."""
    from uwf.engine.step.run import waits_message

    records = backend.threads.active()
    parents = {r.thread: r.info.parent for r in records}
    members: dict[ThreadId, list[ActiveThread]] = {}
    for record in records:
        members.setdefault(_root(parents, record.thread), []).append(record)
    now = time.monotonic()
    out: list[Ended] = []
    for run in pending:
        group = members.get(run.thread, [])
        failed = next((r for r in group if r.failure is not None), None)
        asks = [r for r in group if r.waiting is not None and r.waiting.reason != "children"]
        deadline = run.deadline()
        if not any(r.thread == run.thread for r in group):
            out.append(_archived(backend, run))
        elif failed is not None and failed.failure is not None:
            out.append((run, "failed", failed.failure.error))
        elif asks and asks[0].waiting is not None:
            said = waits_message(asks[0].thread, asks[0].waiting.role, asks[0].waiting.reason)
            out.append((run, "waiting", said))
        elif deadline is not None and now >= deadline:
            out.append((run, "timeout", run.timed_out()))
        elif wait.passed(now):
            out.append((run, "timeout", f"passed --wait-timeout ({wait.seconds:g} s)"))
    return out


def _root(parents: dict[ThreadId, ThreadId | None], thread: ThreadId) -> ThreadId:
    """The active thread whose fan-outs started ``thread`` (itself when none)."""
    at, seen = thread, {thread}
    while (parent := parents.get(at)) is not None and parent in parents and parent not in seen:
        seen.add(parent)
        at = parent
    return at


def _archived(backend: Backend, run: Begun) -> Ended:
    entry = backend.threads.history_entry(run.thread)
    status = entry.status if entry is not None else "killed"
    if status in ("completed", "max_rounds"):
        return run, status, None
    return run, "failed", f"thread {run.thread} was killed before the run ended"


@dataclass
class _Workers:
    """The local workers: processes and the files their stderr goes to."""

    procs: list[subprocess.Popen[bytes]]
    errs: list[IO[bytes]]

    def stopped(self) -> bool:
        """Whether there were local workers and every one of them has exited."""
        return bool(self.procs) and all(p.poll() is not None for p in self.procs)

    def error(self) -> UwfError:
        codes = ", ".join(str(p.returncode) for p in self.procs)
        said = ""
        for err in self.errs:
            err.seek(0)
            lines = err.read().decode("utf-8", "replace").strip().splitlines()
            if lines:
                said = ": " + lines[-1][-STDERR_SHOWN:]
                break
        return UwfError(f"every local worker exited before the runs ended (exit {codes}){said}")


@contextlib.contextmanager
def _local_workers(
    backend: Backend, options: FleetOptions, agent: str | None, threads: Sequence[ThreadId]
) -> Iterator[_Workers]:
    """``options.local_workers`` ``uwf worker --thread …`` processes for the duration,
    stopped (SIGTERM: gracefully) when the runs are done."""
    from uwf.adapters import process

    argv = [*options.worker]
    for thread in threads:
        argv += ["--thread", thread]
    if agent is not None:
        argv += ["--agent", agent]
    env: dict[str, str] = {**os.environ, **backend.env()}
    workers = _Workers([], [])
    with contextlib.ExitStack() as files:
        try:
            for _ in range(options.local_workers or 0):
                err = files.enter_context(tempfile.TemporaryFile())
                workers.errs.append(err)
                workers.procs.append(process.start_child(argv, env, stderr=err, what="uwf worker"))
            yield workers
        finally:
            for proc in workers.procs:
                if proc.poll() is None:
                    process.kill_group(proc)
