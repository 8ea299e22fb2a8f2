"""Process groups: start a command in a session of its own, wait for its exit, end the group.

The parts ``adapters.process`` builds on (``run``, ``spawn_detached``, ``start_child``) and
that its callers use to end what they started (``kill_group``, ``terminate``): a command is
started without a shell (``popen``, a ``CannotStart`` that names what could not start), its
exit is waited for on a pidfd where Linux gives one (``exit_event``, ``ended``), and its group
is ended with SIGTERM, then SIGKILL after a grace period (``kill_group``), its leader reaped
last so that the group's id cannot name another group meanwhile. docs/errors.md, "Signals".
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from uwf.util.errors import UwfError
from uwf.util.signals import deferred

KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL of a group

Serve = tuple[int, Callable[[], bool]]


class CannotStart(UwfError):
    """The command could not be started; ``cause`` is the operating system's error, for a
    caller that words it its own way (``hermes not found on PATH: …``)."""

    def __init__(self, message: str, cause: OSError) -> None:
        super().__init__(message)
        self.cause = cause


def _parent_death_hook() -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks Linux to SIGKILL the child when its parent dies."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def hook() -> None:  # runs in the child between fork and exec: nothing but the call
        prctl(pr_set_pdeathsig, signal.SIGKILL)

    return hook


def kill_group(proc: subprocess.Popen[Any], grace: float = KILL_GRACE) -> None:
    """SIGTERM the process group of ``proc``, then SIGKILL it if it is still there; reap
    ``proc``.

    A signal to us in the meantime waits until the group is gone (a second Ctrl-C must not
    leave the children running)."""
    with deferred():
        end_group(proc, grace)
        reap(proc, grace)


def end_group(proc: subprocess.Popen[Any], grace: float) -> None:
    """The group's end, its leader left unreaped where it can be (``ended``)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        if ended(proc, grace):
            break
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # children that outlived their leader


def ended(proc: subprocess.Popen[Any], timeout: float | None) -> bool:
    """Whether ``proc`` exited within ``timeout`` seconds (``exit_event``: on Linux 5.3+ it
    is left unreaped, so its pid, the id of its group, stays its own — nothing else can be
    given that number — until ``reap``; elsewhere waiting reaps it)."""
    if proc.returncode is not None:
        return True
    with exit_event(proc) as exited:
        return exited(timeout)


def reap(proc: subprocess.Popen[Any], timeout: float | None = None) -> None:
    """Collect ``proc``'s exit status (it has exited, or was sent SIGKILL: ``timeout``
    bounds the wait for a process the kernel is slow to end)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout)


def terminate(pid: int) -> None:
    """Send SIGTERM to the process ``pid`` (gone already, or not ours: nothing happens)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGTERM)


def start_child(
    argv: Sequence[str], env: dict[str, str], *, stderr: Any, what: str = "command"
) -> subprocess.Popen[bytes]:
    """Start ``argv`` beside us: its own session, SIGKILLed should we die (on Linux), stdin
    from /dev/null, stdout discarded, stderr to the file ``stderr``; CannotStart if it cannot
    start."""
    return popen(
        argv,
        what,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env=env,
        start_new_session=True,
        preexec_fn=_parent_death_hook(),
    )


def popen(argv: Sequence[str], what: str, **options: Any) -> subprocess.Popen[bytes]:
    try:
        return subprocess.Popen(list(argv), **options)
    except FileNotFoundError as exc:
        message = f"{what} not found: {argv[0]} (is it installed and on PATH?)"
        raise CannotStart(message, exc) from None
    except PermissionError as exc:
        raise CannotStart(f"{what} is not executable: {argv[0]}", exc) from None
    except OSError as exc:
        raise CannotStart(f"{what} could not start: {argv[0]}: {exc.strerror}", exc) from None


@functools.cache
def can_serve() -> bool:
    """Whether ``run`` can serve a descriptor while it waits (``serve``): it needs a pidfd
    (Linux 5.3+) to wait on the child and the descriptor at once."""
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


@contextlib.contextmanager
def exit_event(
    proc: subprocess.Popen[Any], serve: Serve | None = None
) -> Iterator[Callable[[float | None], bool]]:
    """A function that waits up to ``timeout`` seconds for ``proc`` to exit (leaving it
    unreaped where it can, ``ended``) and says whether it did; meanwhile, each time
    ``serve``'s descriptor is readable, it calls ``serve``'s function (until that answers
    False).

    On Linux it waits on a pidfd, which becomes readable the moment the process exits.
    ``Popen.wait(timeout)`` polls instead, sleeping up to 50 ms between two looks: every step
    would notice its agent's exit ~25 ms late on average. Elsewhere, or when no pidfd can be
    had, that is the fallback (and nothing is served: callers check ``can_serve``).
    """
    try:
        pidfd: int | None = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or the process is already reaped
        pidfd = None
    serving = [serve] if serve is not None else []

    def exited(timeout: float | None) -> bool:
        if pidfd is not None:
            deadline = None if timeout is None else time.monotonic() + timeout
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                watch = [pidfd, *(fd for fd, _ in serving)]
                ready = select.select(watch, [], [], left)[0]
                if pidfd in ready:
                    return True  # exited; reaped by ``run`` once the watchdog let it go
                if not ready:
                    return False
                if not serving[0][1]():
                    serving.clear()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True

    try:
        yield exited
    finally:
        if pidfd is not None:
            os.close(pidfd)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    state = stat.rsplit(")", 1)[-1].split()
    return bool(state) and state[0] != "Z"
