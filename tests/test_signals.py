"""Signals sent to a real ``uwf thread step`` whose agent hangs with children of its own.

The agent is a shell script that starts two children (one of them a grandchild through a
second shell), records every pid, and waits forever. Whatever stops ``uwf`` — SIGTERM, SIGHUP,
SIGINT, Ctrl-C on a terminal, ``timeout``, SIGKILL, or a ``thread kill`` from another
process — the process table must end up with no agent and no child of it, the head where it
was, and (for the signals uwf can catch) one ``error: interrupted (<SIGNAL>)`` line and exit
128 + n (docs/errors.md, "Signals").
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rootfiles import RootFiles
from support import BIN, pid_alive, read_terminal, reap, spawn_uwf


@dataclass
class Hang:
    """A hanging agent script and the file where it records its pids."""

    command: str
    pids_file: Path

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in self.pids_file.read_text().split()]
        except FileNotFoundError:
            return []

    def wait_running(self, proc: subprocess.Popen[str] | None = None) -> list[int]:
        """The agent's pids once it and its three descendants are all up."""
        deadline = time.monotonic() + 30
        while len(pids := self.pids()) < 4:
            assert proc is None or proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the agent never started its children"
            time.sleep(0.01)
        return pids


def make_hang(directory: Path, *, ignore_term: bool = False) -> Hang:
    """``hang.sh``: records ``$$``, starts ``sleep`` and ``sh -c 'sleep'`` in the background,
    records their pids (the inner shell records the grandchild's), then waits.
    ``ignore_term``: SIGTERM is ignored by the script and everything it starts."""
    pids = directory / "hang.pids"
    script = directory / "hang.sh"
    script.write_text(
        "#!/bin/sh\n" + ("trap '' TERM\n" if ignore_term else "") + f"echo $$ >> '{pids}'\n"
        "sleep 300 &\n"
        f"echo $! >> '{pids}'\n"
        f"sh -c 'sleep 301 & echo $! >> \"$0\"; wait' '{pids}' &\n"
        f"echo $! >> '{pids}'\n"
        "wait\n"
    )
    script.chmod(0o755)
    return Hang(str(script), pids)


def group_members(pgid: int) -> list[int]:
    """Live processes of process group ``pgid`` (from the process table)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry))
    return members


def assert_all_gone(pids: list[int], within: float) -> float:
    """Every pid (and the leader's whole group) dead within ``within`` seconds; how long it
    took. Survivors are killed so that a failing test leaves nothing behind."""
    began = time.monotonic()
    while time.monotonic() - began < within:
        if not any(pid_alive(p) for p in pids) and not group_members(pids[0]):
            return time.monotonic() - began
        time.sleep(0.01)
    left = [p for p in pids if pid_alive(p)] + group_members(pids[0])
    for pid in left:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    raise AssertionError(f"left in the process table after {within}s: {sorted(set(left))}")


@pytest.fixture
def hang(tmp_path: Path) -> Hang:
    return make_hang(tmp_path)


@pytest.fixture
def thread(new_thread: Any) -> str:
    return str(new_thread())


@pytest.mark.parametrize(
    "sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name
)
def test_a_signal_kills_the_agent_and_its_children(
    cli: Any, root: Path, thread: str, hang: Hang, sig: signal.Signals
) -> None:
    head = RootFiles(root).head(thread)
    proc = spawn_uwf("thread", "step", thread, "--agent", hang.command)
    pids = hang.wait_running(proc)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig
    assert err.splitlines()[-1] == f"error: interrupted ({sig.name})"
    assert out == ""  # no step landed
    assert_all_gone(pids, within=0.5)  # killed before uwf exited: nothing to wait for
    assert RootFiles(root).head(thread) == head
    assert RootFiles(root).backend.locks.running() == set()
    logged = [e["msg"] for e in cli("log", "show", "--thread", thread).json()]
    assert logged[-1] == f"step failed: interrupted ({sig.name})"  # the reason, in the log


def test_timeout_leaves_no_orphan(root: Path, thread: str, hang: Hang) -> None:
    """``timeout N uwf thread step …`` (what a cron job does): timeout's SIGTERM reaches uwf,
    which takes the agent's group down before it exits. The time runs out once the agent
    runs: the test sends ``timeout`` the SIGALRM of its own timer."""
    head = RootFiles(root).head(thread)
    run = subprocess.Popen(
        ["timeout", "60", str(BIN / "uwf"), "thread", "step", thread, "--agent", hang.command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        pids = hang.wait_running(run)
        assert len(pids) == 4, "the agent ran with its children"
        run.send_signal(signal.SIGALRM)  # timeout's own timer: its time is up, now
        _, err = run.communicate(timeout=30)
    finally:
        reap(run)
    assert run.returncode == 124  # timeout's own code: the command timed out
    assert err.splitlines()[-1] == "error: interrupted (SIGTERM)"
    assert_all_gone(pids, within=0.5)
    assert RootFiles(root).head(thread) == head


def test_sigkill_of_uwf_takes_the_agent_and_its_children(
    root: Path, thread: str, hang: Hang
) -> None:
    """uwf cannot catch SIGKILL: its watchdog process (``adapters.watchdog``), which
    outlives it, kills the agent's whole process group."""
    head = RootFiles(root).head(thread)
    proc = spawn_uwf("thread", "step", thread, "--agent", hang.command)
    pids = hang.wait_running(proc)
    proc.kill()
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert_all_gone(pids, within=5)  # at once, but a loaded machine schedules what kills late
    assert RootFiles(root).head(thread) == head
    assert RootFiles(root).backend.locks.running() == set()  # the lock died with uwf


def test_ctrl_c_on_a_terminal_prints_its_error_line(root: Path, thread: str, hang: Hang) -> None:
    """Ctrl-C typed on uwf's terminal: the terminal sends SIGINT to uwf (not to the agent,
    which runs in a session of its own); uwf stops the agent and says why."""
    import fcntl
    import pty
    import termios

    primary, secondary = pty.openpty()

    def take_terminal() -> None:  # in the child: the pty becomes its controlling terminal
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen(
        [str(BIN / "uwf"), "thread", "step", thread, "--agent", hang.command],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        start_new_session=True,
        preexec_fn=take_terminal,
    )
    os.close(secondary)
    try:
        pids = hang.wait_running()
        os.write(primary, b"\x03")  # Ctrl-C
        assert proc.wait(timeout=30) == 130
        screen = read_terminal(primary)
    finally:
        proc.kill()
        os.close(primary)
    text = screen.decode("utf-8", "replace").replace("^C", "")  # the terminal's echo
    assert "error: interrupted (SIGINT)" in text.replace("\r\n", "\n").splitlines()
    assert_all_gone(pids, within=0.5)


@pytest.mark.parametrize("ignore_term", [False, True], ids=["plain", "ignores-sigterm"])
def test_thread_kill_stops_the_running_agent_within_two_seconds(
    root: Path, thread: str, tmp_path: Path, cli: Any, ignore_term: bool
) -> None:
    """``thread kill`` from another process (this one, in-process, so that the time measured
    is the kill's and not a new process's start-up): the step notices within half a second,
    stops its agent's group (SIGKILL after a short grace when SIGTERM is ignored) and exits
    3."""
    hang = make_hang(tmp_path, ignore_term=ignore_term)
    head = RootFiles(root).head(thread)
    proc = spawn_uwf("thread", "step", thread, "--agent", hang.command)
    pids = hang.wait_running(proc)
    began = time.monotonic()
    killed = cli("thread", "kill", thread)
    took = time.monotonic() - began  # `thread kill` returns once the step's lock is free
    assert killed.code == 0, killed.err
    assert killed.json() == {"thread": thread, "killed": True}
    assert_all_gone(pids, within=0.1)
    assert took < 2.0, f"the agent stopped {took:.2f}s after thread kill started"
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 3  # the thread is not active: nothing left to do
    assert err.splitlines()[-1] == (
        f"error: thread {thread} ended (killed) while its step ran; the agent was stopped"
    )
    assert out == ""
    entry = RootFiles(root).backend.threads.history_entry(thread)  # type: ignore[arg-type]
    assert entry is not None and (entry.status, entry.head) == ("killed", head)


def test_a_signal_inside_deferred_is_raised_at_the_end_of_the_block() -> None:
    """``signals.deferred`` (around starting and killing a child): the block runs to its end,
    then the held signal is raised, even when the block raised something else."""
    from uwf.util.errors import Interrupted, UwfError
    from uwf.util.signals import deferred, interrupt_on_signals

    done = []
    with pytest.raises(Interrupted) as err, interrupt_on_signals(), deferred():
        with deferred():  # nested: held until the outermost block ends
            os.kill(os.getpid(), signal.SIGHUP)
            time.sleep(0.05)  # the handler runs here, and holds the signal
        done.append("inner")
        time.sleep(0.05)
        done.append("outer")
    assert done == ["inner", "outer"] and err.value.signum == signal.SIGHUP
    with pytest.raises(Interrupted), interrupt_on_signals(), deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        raise UwfError("the block failed")  # stopping wins over the block's own error
    with interrupt_on_signals(), deferred():
        pass  # nothing held from before
