"""The watchdog: kills the process groups uwf started when uwf dies without killing them itself.

uwf cannot catch SIGKILL (nor the OOM killer), and the kernel passes nothing on to the
children of a dead process: an agent in a session of its own, and whatever it started, would
run on. So each uwf process that starts a process group (``adapters.process.run``: an agent,
a wrapped command, a tool's command) has one watchdog, started with its first group and kept
for its life (a cold ``thread step``: one; a ``uwf worker``: one for all its steps):

* a small ``/bin/sh`` (``SCRIPT``) in a session of its own (a signal to uwf's group or its
  terminal never reaches it; it ignores SIGINT, SIGTERM and SIGHUP), with an empty
  environment, ``/`` as its directory, and as its stdin the read end of a pipe whose write
  end only this process holds (close-on-exec, and closed in a child forked without exec);
* uwf writes ``+ <pgid>`` when a group starts and ``- <pgid>`` when it is done with it —
  before reaping the group's leader, so the number cannot name another group by then;
* when the pipe ends — uwf exited, whatever killed it — the watchdog SIGKILLs every group
  still listed, and exits. After a normal exit the list is empty and it just exits.

Why a shell and not a parent-death signal or a Python interpreter per spawn:
docs/performance.md, "Processes and start-up" (the candidates, measured). One gap remains: a
uwf killed between the agent's start and the ``+`` line (microseconds) leaves that agent
unwatched (docs/reliability.md, invariant 6). Where no ``/bin/sh`` can run (a container image
with Python alone), the same watchdog runs in Python (``PYTHON``). If neither can start, the
groups run unwatched, as an agent always could outlive a killed uwf harmlessly
(docs/reliability.md, invariant 6).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading

__all__ = ["SHELL", "release", "running", "start", "watch"]

SHELL = "/bin/sh"

# POSIX sh (dash, bash, busy box's ash): the groups are a space-separated list; at the end
# of the pipe, each is killed. `read` returns non-zero at end of input.
SCRIPT = """trap '' INT TERM HUP
g=' '
while read -r op p; do
  case $op in
    +) g="$g$p " ;;
    -) case $g in *" $p "*) g="${g%%" $p "*} ${g#*" $p "}" ;; esac ;;
  esac
done
for p in $g; do kill -KILL "-$p" 2>/dev/null; done
"""

# The same in Python (``python -I -S``), where no shell can run.
PYTHON = """import os, signal
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
groups, rest = set(), b""
while chunk := os.read(0, 4096):
    *lines, rest = (rest + chunk).split(b"\\n")
    for line in lines:
        op, pgid = line.split()
        (groups.add if op == b"+" else groups.discard)(int(pgid))
for pgid in groups:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


class _Watchdog:
    """This process's watchdog: its process, our end of its pipe, the groups it watches."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.fd: int | None = None
        self.groups: set[int] = set()

    def tell(self, line: bytes) -> None:
        """Write ``line`` to the watchdog; one that no longer reads (killed: EPIPE; stopped,
        its pipe full: EAGAIN) is replaced."""
        if self.fd is not None:
            try:
                os.write(self.fd, line)
                return
            except OSError:
                pass
        self.restart()

    def restart(self) -> None:
        """End the watchdog if there is one, start another and hand it the groups."""
        self.stop()
        if self._start():
            assert self.fd is not None
            with contextlib.suppress(OSError):
                os.write(self.fd, b"".join(b"+ %d\n" % g for g in sorted(self.groups)))

    def _start(self) -> bool:
        read_end, write_end = os.pipe()
        try:
            for argv in ([SHELL, "-c", SCRIPT], [sys.executable, "-I", "-S", "-c", PYTHON]):
                if not argv[0]:  # an embedding interpreter that cannot start Python
                    continue
                try:
                    self.proc = subprocess.Popen(
                        argv,
                        stdin=read_end,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        start_new_session=True,
                        env={},
                        cwd="/",
                    )
                except OSError:
                    continue
                os.set_blocking(write_end, False)  # a stopped watchdog never blocks us
                self.fd, write_end = write_end, -1
                return True
            return False
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)

    def stop(self) -> None:
        """End the watchdog without letting it kill anything: SIGKILL first, then close its
        pipe, then reap it."""
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            self.proc.wait()
            self.proc = None
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = None


_WATCHDOG = _Watchdog()


def start() -> None:
    """Start the watchdog now if this process has none (or it ended), so that a group
    started next is watched from the moment ``watch`` names it."""
    with _WATCHDOG.mutex:
        if _WATCHDOG.proc is None or _WATCHDOG.proc.poll() is not None:
            _WATCHDOG.restart()


def watch(pgid: int) -> None:
    """Have the watchdog kill group ``pgid`` should this process die before ``release``."""
    with _WATCHDOG.mutex:
        _WATCHDOG.groups.add(pgid)
        _WATCHDOG.tell(b"+ %d\n" % pgid)


def release(pgid: int) -> None:
    """We are done with group ``pgid`` (call it before reaping the group's leader)."""
    with _WATCHDOG.mutex:
        if pgid in _WATCHDOG.groups:
            _WATCHDOG.groups.discard(pgid)
            _WATCHDOG.tell(b"- %d\n" % pgid)


def running() -> int | None:
    """The watchdog's pid, None before the first group (for tests and diagnostics)."""
    proc = _WATCHDOG.proc
    return None if proc is None or proc.poll() is not None else proc.pid


def _forget() -> None:
    """In a child forked without exec: the parent's watchdog is not ours. Close our copy of
    its pipe (the watchdog must see the end when the parent dies) and start afresh."""
    global _WATCHDOG
    if _WATCHDOG.fd is not None:
        with contextlib.suppress(OSError):
            os.close(_WATCHDOG.fd)
    _WATCHDOG = _Watchdog()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)
