"""The watchdog (``uwf.adapters.watchdog``): one small process per uwf process that kills the
process groups uwf started when uwf dies of SIGKILL (docs/reliability.md, invariant 6).

Each test runs a small starter script in a process of its own — it starts the watchdog and
a hanging group through ``adapters.process.run`` — kills it with SIGKILL, and reads the
process table. ``tests/test_signals.py`` and ``tests/test_crash.py`` do the same through a
real ``uwf thread step``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from support import pid_alive, reap, spawn_uwf, wait_dead
from uwf.adapters import watchdog

# argv: <directory> <watchdog: sh|python> <then: hang|fork-then-hang|kill-watchdog-then-hang|
# three-runs|hang-unwatched>. Writes <directory>/watchdog (its pid and argv[0]) once it runs, then
# <directory>/group (the hanging group's pids) once the group is up.
STARTER = """
import os, sys, time
from pathlib import Path
from uwf.adapters import process, watchdog

directory, kind, then = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
if kind == "python":
    watchdog.SHELL = str(directory / "no-shell-here")

def note(name, text):
    (directory / (name + ".tmp")).write_text(text)
    os.replace(directory / (name + ".tmp"), directory / name)

def started():
    pid = watchdog.running()
    while not (cmdline := open(f"/proc/{pid}/cmdline", "rb").read()):
        time.sleep(0.001)  # its exec is still setting up its arguments
    return f"{pid} {cmdline.split(bytes(1))[0].decode()}"

watchdog.start()
if then == "kill-watchdog-then-hang":
    os.kill(watchdog.running(), 9)
    watchdog._WATCHDOG.proc.wait()
    watchdog.start()  # what process.run does first
if then == "fork-then-hang":
    child = os.fork()
    if child == 0:  # holds whatever was inherited across the fork, and lives on
        time.sleep(300)
        os._exit(0)
    note("forked", str(child))
if then == "hang-unwatched":  # dies, as it were, between the group's start and its "+" line
    watchdog.watch = lambda pgid, token=None: None
if then == "three-runs":
    seen = []
    for _ in range(3):
        process.run(["true"])
        seen.append(started())
    note("watchdog", "\\n".join(seen))
    sys.exit(0)
HANG = 'sleep 300 & echo $$ $! > "$0.tmp" && mv "$0.tmp" "$0"; wait'
note("watchdog", started())
process.run(["sh", "-c", HANG, str(directory / "group")])
"""


def start(tmp_path: Path, kind: str, then: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", STARTER, str(tmp_path), kind, then],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, proc: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + 30
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.01)
    return path.read_text()


def group_of(tmp_path: Path, proc: subprocess.Popen[str]) -> list[int]:
    return [int(p) for p in wait_for(tmp_path / "group", proc).split()]


def assert_gone(pids: list[int], within: float = 5.0) -> None:
    """Every pid dead within ``within`` seconds (a loaded machine schedules the watchdog
    late); survivors are killed so that a failing test leaves nothing behind."""
    deadline = time.monotonic() + within
    while any(pid_alive(p) for p in pids):
        if time.monotonic() > deadline:
            left = [p for p in pids if pid_alive(p)]
            for pid in left:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"left running after {within}s: {left}")
        time.sleep(0.01)


@pytest.mark.parametrize("kind", ["sh", "python"])
def test_sigkill_of_the_starter_kills_its_group_and_the_watchdog_ends(
    tmp_path: Path, kind: str
) -> None:
    """The shell watchdog, and where no shell can run, the Python one."""
    proc = start(tmp_path, kind, "hang")
    try:
        group = group_of(tmp_path, proc)
        pid, program = wait_for(tmp_path / "watchdog", proc).split()
        assert program == ("/bin/sh" if kind == "sh" else sys.executable)
        assert all(pid_alive(p) for p in group)
        proc.kill()
    finally:
        reap(proc)
    assert_gone(group)
    wait_dead(int(pid), timeout=5)  # its work done, the watchdog is gone too


@pytest.mark.parametrize("kind", ["sh", "python"])
def test_a_group_started_but_not_yet_watched_is_found_by_its_token(
    tmp_path: Path, kind: str
) -> None:
    """uwf killed after its agent started and before it named the agent's group to the
    watchdog: the group's leader carries the pending token in its environment, and the
    watchdog finds it there."""
    proc = start(tmp_path, kind, "hang-unwatched")
    try:
        group = group_of(tmp_path, proc)
        pid = int(wait_for(tmp_path / "watchdog", proc).split()[0])
        environ = Path(f"/proc/{group[0]}/environ").read_bytes().split(bytes(1))
        assert sum(v.startswith(watchdog.ENV.encode() + b"=") for v in environ) == 1
        proc.kill()
    finally:
        reap(proc)
    assert_gone(group)
    wait_dead(pid, timeout=5)


def test_one_watchdog_serves_every_group_of_a_process_and_ends_with_it(tmp_path: Path) -> None:
    proc = start(tmp_path, "sh", "three-runs")
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    seen = (tmp_path / "watchdog").read_text().splitlines()
    assert len(seen) == 3 and len(set(seen)) == 1  # the same process for the three runs
    wait_dead(int(seen[0].split()[0]), timeout=5)  # its pipe ended with the starter


def test_a_killed_watchdog_is_replaced_before_the_next_group(tmp_path: Path) -> None:
    proc = start(tmp_path, "sh", "kill-watchdog-then-hang")
    try:
        group = group_of(tmp_path, proc)
        replacement = int(wait_for(tmp_path / "watchdog", proc).split()[0])
        assert pid_alive(replacement)
        proc.kill()
    finally:
        reap(proc)
    assert_gone(group)
    wait_dead(replacement, timeout=5)


def test_a_child_forked_without_exec_does_not_keep_the_watchdog_waiting(tmp_path: Path) -> None:
    """The fork's copy of the watchdog's pipe is closed in the child, so the pipe still
    ends when the starter dies."""
    proc = start(tmp_path, "sh", "fork-then-hang")
    forked = 0
    try:
        group = group_of(tmp_path, proc)
        forked = int(wait_for(tmp_path / "forked", proc))
        proc.kill()
        reap(proc)
        assert_gone(group)
        assert pid_alive(forked)  # it lives on, and did not hold the watchdog back
    finally:
        reap(proc)
        if forked:
            with contextlib.suppress(OSError):
                os.kill(forked, signal.SIGKILL)


def test_a_step_starts_one_watchdog_for_all_its_runs(
    new_thread: Any, scenario: Any, cli: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``thread step -c 3``: three agents and one watchdog, a ``/bin/sh`` — no Python
    interpreter beside the agent."""
    fresh = watchdog._Watchdog()
    monkeypatch.setattr(watchdog, "_WATCHDOG", fresh)
    started: list[list[str]] = []
    real = subprocess.Popen.__init__

    def spy(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        started.append([str(a) for a in args])
        real(self, args, *rest, **kwargs)

    monkeypatch.setattr(subprocess.Popen, "__init__", spy)
    agent = scenario(inprocess=False)
    try:
        res = cli("thread", "step", new_thread(), "-c", "3", "--agent", agent)
    finally:
        fresh.stop()
    assert res.code == 0, res.err
    assert len(res.out.splitlines()) == 3
    programs = [argv[0] for argv in started]
    assert programs == ["/bin/sh", *["uwf-mock"] * 3]


def test_sigkill_of_a_real_step_kills_its_agent_and_the_watchdog_ends(
    new_thread: Any, tmp_path: Path
) -> None:
    """``uwf thread step`` killed with SIGKILL while its agent (and a child of the agent)
    run: its one watchdog — a ``/bin/sh``, not a Python interpreter — kills the agent's group
    and exits; nothing of the step is left in the process table."""
    thread = new_thread()
    ready = tmp_path / "agent.pids"
    agent = tmp_path / "agent.sh"
    agent.write_text(
        f"#!/bin/sh\nsleep 300 &\necho $$ $! > '{ready}.tmp'\nmv '{ready}.tmp' '{ready}'\nwait\n"
    )
    agent.chmod(0o755)
    proc = spawn_uwf("thread", "step", thread, "--agent", str(agent))
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the agent never started"
            time.sleep(0.01)
        group = [int(p) for p in ready.read_text().split()]
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        others = [int(c) for c in children if int(c) != group[0]]
        assert len(others) == 1  # the agent and one watchdog, nothing else
        (watcher,) = others
        assert Path(f"/proc/{watcher}/exe").resolve() == Path(watchdog.SHELL).resolve()
        proc.kill()
    finally:
        reap(proc)
    assert proc.returncode == -signal.SIGKILL
    assert_gone(group)
    wait_dead(watcher, timeout=5)


def test_close_ends_the_watchdog_and_the_groups_it_still_watches() -> None:
    """``watchdog.close`` (a long-lived host's exit, the test session's end) does what the
    host's own exit does: the watchdog kills what it still watches, ends and is reaped."""
    watchdog.start()
    dog = watchdog.running()
    assert dog is not None
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        watchdog.watch(sleeper.pid)
        watchdog.close()
        assert watchdog.running() is None
        assert sleeper.wait(timeout=10) == -signal.SIGKILL  # killed by the watchdog
        wait_dead(dog, timeout=5)
    finally:
        reap(sleeper)
