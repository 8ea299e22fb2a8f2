"""Child processes: spawn without a shell, supervise, and never leave one behind.

Every process uwf or an agent starts (an agent, a wrapped command, a tool's command) goes
through ``run``:

* its own process group (session), so that it and all its children are killed as one;
* a watchdog (``adapters.watchdog``: one small process per uwf process) that kills the
  group, the children the child started included, should we die without doing it ourselves
  (SIGKILL, the OOM killer);
* stdin closed or fed from a string; stdout captured up to a bound (the tail is kept) or
  whole; stderr copied live, line by line, to ours (with a prefix; a line cut at
  ``LINE_SHOWN`` bytes, secrets masked, control characters escaped) while its tail is kept,
  all in fixed memory however long a line is;
* a timeout, a ``should_stop`` callback polled twice a second, a signal or any exception
  in the parent kills the whole group: SIGTERM, then SIGKILL after a grace period. When the
  child exits by itself, what it left running in its group is killed too.

``spawn_detached`` is the other way to start a process: one meant to outlive us (a background
run), in its own session, reporting once on a pipe that it started. ``start_child`` starts one
that runs beside us and dies with us (``uwf eval run --local-workers``' workers): its own
session, on Linux a parent-death signal, stdout discarded, stderr to a file; ``kill_group``
ends it.

The groups themselves — starting a command in its own session, waiting for its exit on a
pidfd, ending the group — are ``adapters.groups``; this module re-exports what its callers
use of them (``kill_group``, ``start_child``, ``terminate``, ``alive``, ``can_serve``,
``CannotStart``).

``uwf.util.signals.interrupt_on_signals`` turns SIGTERM, SIGHUP and SIGINT into
:class:`Interrupted` in the main thread, so that a ``timeout 2 uwf thread step …`` or a
Ctrl-C unwinds through ``run`` and takes the agent's group down with it; a signal that
arrives while the child is being started or killed waits for that to finish
(``signals.deferred``). docs/errors.md, "Signals".
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from uwf.adapters import watchdog
from uwf.adapters.groups import KILL_GRACE as KILL_GRACE
from uwf.adapters.groups import CannotStart as CannotStart
from uwf.adapters.groups import Serve as Serve
from uwf.adapters.groups import alive as alive
from uwf.adapters.groups import can_serve as can_serve
from uwf.adapters.groups import end_group, exit_event, popen, reap
from uwf.adapters.groups import kill_group as kill_group
from uwf.adapters.groups import start_child as start_child
from uwf.adapters.groups import terminate as terminate
from uwf.adapters.pipes import Tail, feed, pump_stderr, pump_stdout
from uwf.util.errors import UwfError
from uwf.util.signals import deferred
from uwf.util.tuples import NamedTuple

STDOUT_LIMIT = 1 << 20  # bytes of stdout kept (the tail)
STDERR_TAIL = 2000  # characters of stderr kept for error messages
# Linux's MAX_ARG_STRLEN: the bytes of one argument or one NAME=value environment string,
# its final NUL included (32 pages). Longer ones make exec fail with E2BIG.
ARG_LIMIT = 131072
STOP_GRACE = 0.5  # the same when ``should_stop`` asked for it (the work is no longer wanted)
POLL = 0.5  # seconds between two calls of ``should_stop``
READY_FD = "UWF_READY_FD"  # where a detached child finds the write end of its ready pipe

# The epitaph of a detached process: waits for the end of its stdin, a pipe whose write end
# only that process holds. A process that ends as it should writes to it first; one that dies
# (SIGKILL, the OOM killer) says nothing, and the epitaph appends its last line to the log
# (argv[2], "{now}" replaced by the UTC time).
EPITAPH = """
import datetime, os, signal, sys
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
said = b""
while True:
    chunk = os.read(0, 512)
    if not chunk:
        break
    said += chunk
if not said:
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")
    with open(sys.argv[1], "a", encoding="utf-8") as log:
        log.write(sys.argv[2].replace("{now}", now.replace("+00:00", "Z")) + "\\n")
"""


def fits_env(name: str, value: str) -> bool:
    """Whether ``name=value`` fits in one environment string (``ARG_LIMIT``)."""
    return len(name) + 2 + len(value.encode("utf-8", "surrogateescape")) <= ARG_LIMIT


def fits_arg(value: str) -> bool:
    """Whether ``value`` fits in one command-line argument (``ARG_LIMIT``)."""
    return len(value.encode("utf-8", "surrogateescape")) + 1 <= ARG_LIMIT


class Finished(NamedTuple):
    """How a child process ended, and what it printed. (A NamedTuple, not a dataclass: no
    ``dataclasses`` on an agent's path, tests/test_startup.py.)"""

    code: int  # its exit status; -N when a signal N killed it
    stdout: str  # the tail of stdout (bounded)
    stderr_tail: str
    timed_out: bool = False
    stopped: bool = False  # ``should_stop`` answered True and the group was killed
    duration_ms: int = 0
    stdout_dropped: int = 0  # bytes of stdout before the tail kept (``stdout_limit``)
    stderr_dropped: int = 0  # bytes of stderr before the tail kept (``stderr_keep``)


def _start(
    argv: Sequence[str],
    env: dict[str, str] | None,
    feed: bool,
    what: str,
    cwd: Path | str | None,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    return popen(
        argv,
        what,
        stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        start_new_session=True,  # no preexec_fn: Python starts it with vfork, not fork
        pass_fds=tuple(pass_fds),
    )


def _wait(
    proc: subprocess.Popen[bytes],
    timeout: float | None,
    should_stop: Callable[[], bool] | None,
    serve: Serve | None = None,
) -> tuple[bool, bool]:
    """Wait for ``proc`` to exit (unreaped where it can be, ``ended``); (timed out,
    stopped). The group is killed in either case."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with exit_event(proc, serve) as exited:
        while True:
            step = POLL if should_stop is not None else None
            if deadline is not None:
                left = deadline - time.monotonic()
                step = left if step is None else min(step, left)
            if exited(None if step is None else max(step, 0)):
                return False, False
            if deadline is not None and time.monotonic() >= deadline:
                with deferred():
                    end_group(proc, KILL_GRACE)
                return True, False
            if should_stop is not None and should_stop():
                with deferred():
                    end_group(proc, STOP_GRACE)
                return False, True


def run(
    argv: Sequence[str],
    env: dict[str, str] | None = None,
    *,
    timeout: float | None = None,
    stdin: str | None = None,
    stderr_prefix: str | None = None,
    should_stop: Callable[[], bool] | None = None,
    what: str = "command",
    cwd: Path | str | None = None,
    stdout_limit: int | None = STDOUT_LIMIT,
    stderr_keep: int = STDERR_TAIL,
    serve: Serve | None = None,
    pass_fds: Sequence[int] = (),
    stderr_to: Callable[[str], object] | None = None,
) -> Finished:
    """Run ``argv`` to its end (or timeout, stop, signal) and return how it ended.

    ``stderr_prefix`` None keeps stderr to the tail only; a string copies each line to our
    stderr as it arrives, prefixed (``"uwf-mock: "``; ``""`` for none), so that it is never
    mistaken for uwf's own ``error:`` line; ``stderr_to`` is given the text instead, as it
    arrives (an in-process agent's stderr: ``uwf-cmd`` run in uwf's process). ``stdout_limit``
    bounds the stdout kept (its tail; None keeps it all), ``stderr_keep`` the characters of
    stderr kept. A command that cannot start (not found, not executable) is a configuration
    error: ``CannotStart`` naming ``what`` ("agent command not found: …"). ``pass_fds`` are
    kept open in the child; ``serve`` is a descriptor and a function called each time it is
    readable while the child runs (until the function answers False): the step's store relay
    (only where ``can_serve``).
    """
    began = time.monotonic()
    with deferred():  # a signal now would leave a child that nobody kills
        watchdog.start()
        token = watchdog.spawning()
        try:
            proc = _start(argv, watchdog.marked(env, token), stdin is not None, what, cwd, pass_fds)
        except BaseException:
            watchdog.watch(None, token)
            raise
        watchdog.watch(proc.pid, token)
    try:
        out, out_total, tail, workers = _pump(
            proc, stdin, stdout_limit, stderr_prefix, stderr_keep, stderr_to
        )
        timed_out, stopped = _wait(proc, timeout, should_stop, serve)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # what it left running in its group
    except BaseException:
        with deferred():
            end_group(proc, KILL_GRACE)
        raise
    finally:
        with deferred():  # the group is gone: the watchdog lets it go, then the leader is reaped
            watchdog.release(proc.pid)
            reap(proc, KILL_GRACE)
    for worker in workers:
        worker.join(timeout=5)
    kept = out if stdout_limit is None else out[-stdout_limit:]
    stderr_tail = tail.text()
    return Finished(
        code=proc.returncode if proc.returncode is not None else -signal.SIGKILL,
        stdout=bytes(kept).decode("utf-8", "replace"),
        stderr_tail=stderr_tail,
        timed_out=timed_out,
        stopped=stopped,
        duration_ms=int((time.monotonic() - began) * 1000),
        stdout_dropped=out_total[0] - len(kept),
        stderr_dropped=tail.dropped(stderr_tail),
    )


def _pump(
    proc: subprocess.Popen[bytes],
    stdin: str | None,
    stdout_limit: int | None,
    stderr_prefix: str | None,
    stderr_keep: int,
    stderr_to: Callable[[str], object] | None = None,
) -> tuple[bytearray, list[int], Tail, list[threading.Thread]]:
    """Start the threads that feed stdin and drain stdout and stderr."""
    assert proc.stdout is not None and proc.stderr is not None
    out = bytearray()
    seen = [0]
    tail = Tail(stderr_keep)
    workers = [
        threading.Thread(
            target=pump_stdout, args=(proc.stdout, out, stdout_limit, seen), daemon=True
        ),
        threading.Thread(
            target=pump_stderr, args=(proc.stderr, tail, stderr_prefix, stderr_to), daemon=True
        ),
    ]
    if stdin is not None:
        assert proc.stdin is not None
        workers.append(
            threading.Thread(target=feed, args=(proc.stdin, stdin.encode()), daemon=True)
        )
    for worker in workers:
        worker.start()
    return out, seen, tail, workers


def _read_all(fd: int, timeout: float) -> bytes | None:
    """Everything written to the pipe ``fd`` until its last writer closes it; None when that
    takes longer than ``timeout`` seconds."""
    data = bytearray()
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            return bytes(data)
        data.extend(chunk)


class Epitaph:
    """The last line of a detached process's log, written for it should it die without
    ending as it should (``EPITAPH``, a process of its own session); ``said`` tells it that
    it did end as it should."""

    def __init__(self, log: Path, line: str) -> None:
        self.write_end: int | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        if not sys.executable:
            return
        read_end, write_end = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", EPITAPH, str(log), line],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError:
            os.close(write_end)
            return
        finally:
            os.close(read_end)
        os.set_inheritable(write_end, False)  # never held by an agent: its death says nothing
        self.write_end = write_end

    def said(self) -> None:
        """The process ended its log itself: the epitaph writes nothing."""
        if self.write_end is not None:
            with contextlib.suppress(OSError):
                os.write(self.write_end, b"ended")
                os.close(self.write_end)
            self.write_end = None


def spawn_detached(
    argv: Sequence[str],
    env: dict[str, str],
    *,
    log: Path,
    ready_timeout: float = 60.0,
    what: str = "command",
) -> tuple[int, str]:
    """Start ``argv`` detached and wait until it says it started; return its pid and what it
    said.

    Detached: its own session (no controlling terminal: a shell that exits, a closed terminal
    or a Ctrl-C do not reach it), stdin from /dev/null, stdout and stderr appended to ``log``,
    and no parent-death signal, so that it outlives us. The child finds the write end of a
    pipe in ``$UWF_READY_FD``; what it writes there before closing it (or exiting: ``""``) is
    what it said. A child silent for ``ready_timeout`` seconds is killed (UwfError).
    """
    try:  # the log is private to the user: it holds what agents said (0600, in a 0700 dir)
        log.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if log.parent.stat().st_mode & 0o077:
            log.parent.chmod(0o700)
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
        out = os.fdopen(fd, "ab")
    except OSError as exc:
        raise UwfError(f"cannot write {log}: {exc.strerror or exc}") from None
    read_end, write_end = os.pipe()
    try:
        try:
            with out:
                proc = popen(
                    argv,
                    what,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env={**env, READY_FD: str(write_end)},
                    start_new_session=True,
                    pass_fds=(write_end,),
                )
        finally:
            os.close(write_end)  # the child's copy is the only one left: EOF when it closes
        said = _read_all(read_end, ready_timeout)
    finally:
        os.close(read_end)
    if said is None:
        kill_group(proc)
        raise UwfError(f"{what} did not start within {ready_timeout:g}s; see {log}")
    # Still our child: a daemon thread reaps it when it ends, so that a caller that lives on
    # (uwf ui, the CLI run in-process) keeps no zombie and never drops a running Popen.
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc.pid, said.decode("utf-8", "replace")


def start_background(argv: Sequence[str], env: dict[str, str]) -> int:
    """Start ``argv`` to run on after us, unwatched (the filesystem store's automatic
    packing: docs/architecture.md, "Automatic packing"): its own session, no standard
    streams, no parent-death signal; its pid. Not waited for; a daemon thread reaps it, so
    that a process that lives on (a worker) keeps no zombie."""
    proc = popen(
        argv,
        "background command",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    threading.Thread(target=proc.wait, daemon=True).start()
    return proc.pid
