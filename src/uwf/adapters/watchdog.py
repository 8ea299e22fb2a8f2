"""The watchdog: kills the process groups uwf started when uwf dies without killing them itself.

uwf cannot catch SIGKILL (nor the OOM killer), and the kernel passes nothing on to the
children of a dead process: an agent in a session of its own, and whatever it started, would
run on. So each uwf process that starts a process group (``adapters.process.run``: an agent,
a wrapped command, a tool's command) has one watchdog, started with its first group and kept
for its life (a cold ``thread step``: one; a ``uwf worker``: one for all its steps):

* a small ``/bin/sh`` (``SCRIPT``) in a session of its own (a signal to uwf's group or its
  terminal never reaches it; it ignores SIGINT, SIGTERM and SIGHUP), with ``PATH`` alone in
  its environment, ``/`` as its directory, and as its stdin the read end of a pipe whose
  write end only this process holds (close-on-exec, and closed in a child forked without
  exec);
* uwf writes ``? <token>`` before it starts a group, ``+ <pgid> <token>`` once the group
  started (its leader's pid is known only then), and ``- <pgid>`` when it is done with it —
  before reaping the group's leader, so the number cannot name another group by then;
* when the pipe ends — uwf exited, whatever killed it — the watchdog SIGKILLs every group
  still listed, and exits. After a normal exit the list is empty and it just exits.

A uwf killed between a group's start and its ``+`` line (a moment, but a moment that a busy
machine's scheduler can stretch to milliseconds) leaves a token pending: the group's leader
was started with ``ENV=<token>`` in its environment (``marked``), so the watchdog finds it,
and what it started in that moment, in ``/proc/<pid>/environ`` and kills their groups too.

Why a shell and not a parent-death signal or a Python interpreter per spawn:
docs/performance.md, "Processes and start-up" (the candidates, measured). Where no
``/bin/sh`` can run (a container image with Python alone), the same watchdog runs in Python
(``PYTHON``); where no ``grep`` is, a pending token finds nothing. If neither can start, the
groups run unwatched, as an agent always could outlive a killed uwf harmlessly
(docs/reliability.md, invariant 6).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Mapping

__all__ = ["ENV", "SHELL", "close", "marked", "release", "running", "spawning", "start", "watch"]

SHELL = "/bin/sh"
ENV = "UWF_WATCHDOG_TOKEN"  # in a watched group leader's environment (docs/format.md)
PATH = "/usr/bin:/bin"  # the watchdog's only variable: where ``grep`` is, for a pending token

# POSIX sh (dash, bash, busy box's ash): the groups and the pending tokens are
# space-separated lists; at the end of the pipe, each group is killed, and each process whose
# environment holds a pending token (its group too). `read` returns non-zero at end of input.
SCRIPT = """trap '' INT TERM HUP
g=' ' t=' '
drop() { case $2 in *" $1 "*) r="${2%%" $1 "*} ${2#*" $1 "}" ;; *) r=$2 ;; esac; }
while read -r op p k; do
  case $op in
    '?') t="$t$p " ;;
    +) g="$g$p "; drop "$k" "$t"; t=$r ;;
    -) drop "$p" "$g"; g=$r ;;
    x) drop "$p" "$t"; t=$r ;;
  esac
done
for p in $g; do kill -KILL "-$p" 2>/dev/null; done
for k in $t; do
  for f in $(grep -lsF "UWF_WATCHDOG_TOKEN=$k" /proc/[0-9]*/environ); do
    p=${f#/proc/}; p=${p%/environ}
    kill -KILL "-$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null
  done
done
"""

# The same in Python (``python -I -S``), where no shell can run.
PYTHON = """import os, signal
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, signal.SIG_IGN)
groups, tokens, rest = set(), set(), b""
while chunk := os.read(0, 4096):
    *lines, rest = (rest + chunk).split(b"\\n")
    for line in lines:
        op, *args = line.split()
        if op == b"?":
            tokens.add(args[0])
        elif op == b"+":
            groups.add(int(args[0]))
            tokens.discard(args[1])
        elif op == b"-":
            groups.discard(int(args[0]))
        else:
            tokens.discard(args[0])
pids = []
for name in [n for n in os.listdir("/proc") if n.isdigit()] if tokens else ():
    try:
        with open(f"/proc/{name}/environ", "rb") as fh:
            env = fh.read().split(bytes(1))
    except (OSError, ValueError):
        continue
    if any(b"UWF_WATCHDOG_TOKEN=" + k in env for k in tokens):
        pids.append(int(name))
for kill, ids in ((os.killpg, [*groups, *pids]), (os.kill, pids)):
    for i in ids:
        try:
            kill(i, signal.SIGKILL)
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
        self.tokens: set[str] = set()  # groups being started (``spawning``)

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
                told = [b"+ %d -\n" % g for g in sorted(self.groups)]
                told += [b"? %s\n" % k.encode() for k in sorted(self.tokens)]
                os.write(self.fd, b"".join(told))

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
                        env={"PATH": PATH},
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


def spawning() -> str | None:
    """A token for a group about to start, already told to the watchdog (None when no
    watchdog runs): start the group's leader with ``marked`` environment, then ``watch``."""
    with _WATCHDOG.mutex:
        if _WATCHDOG.fd is None:
            return None
        token = os.urandom(8).hex()
        _WATCHDOG.tokens.add(token)
        _WATCHDOG.tell(b"? %s\n" % token.encode())
        return token


def marked(env: Mapping[str, str] | None, token: str | None) -> dict[str, str] | None:
    """``env`` (None: ours) with ``token`` in it, for the leader of a group being started."""
    if token is None:
        return None if env is None else dict(env)
    return {**(os.environ if env is None else env), ENV: token}


def watch(pgid: int | None, token: str | None = None) -> None:
    """Have the watchdog kill group ``pgid`` should this process die before ``release``;
    ``token`` (from ``spawning``) is no longer pending. ``pgid`` None: the group did not
    start."""
    with _WATCHDOG.mutex:
        _WATCHDOG.tokens.discard(token or "")
        if pgid is not None:
            _WATCHDOG.groups.add(pgid)
            _WATCHDOG.tell(b"+ %d %s\n" % (pgid, (token or "-").encode()))
        elif token is not None:
            _WATCHDOG.tell(b"x %s\n" % token.encode())


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


def close(timeout: float = 2.0) -> None:
    """End this process's watchdog now, as its own exit would: our end of the pipe is closed,
    so the watchdog kills whatever group it still watches and exits; it is reaped (killed
    after ``timeout``). For a long-lived host of uwf (a test session, an application that
    steps in process) that wants no watchdog left to its interpreter's exit; the next spawn
    starts another."""
    with _WATCHDOG.mutex:
        proc, fd = _WATCHDOG.proc, _WATCHDOG.fd
        _WATCHDOG.proc, _WATCHDOG.fd = None, None
        _WATCHDOG.groups.clear()
        _WATCHDOG.tokens.clear()
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
        if proc is not None:
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


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
