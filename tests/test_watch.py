"""`uwf thread watch`: the real CLI in a subprocess, while other processes step the thread.

Steps run through `uwf thread step` with `uwf-mock` entries that sleep a little, so that the
watcher (polling every 50 ms) sees each step start. The watcher must never make a step fail.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support import APPROVE, BIN, DEV, PLAN, REJECT, read_terminal, reap
from uwf.backend.fs import FsBackend
from uwf.engine.views.follow import Follower

SLOW = 0.4


def slow(*outputs: str) -> list[dict[str, Any]]:
    return [{"output": o, "sleep": SLOW} for o in outputs]


SPAWNED: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _reap_spawned() -> Iterator[None]:
    yield
    while SPAWNED:
        reap(SPAWNED.pop())


def spawn(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.Popen(
        [str(BIN / "uwf"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    SPAWNED.append(proc)
    return proc


def read_line(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line, f"watch ended early: {proc.stderr.read() if proc.stderr else ''}"
    return line.rstrip("\n")


def test_watch_follows_a_thread_to_its_end(
    cli: Any, new_thread: Any, scenario: Any, root: Path
) -> None:
    thread = new_thread()
    agent = scenario(
        {
            "planner": slow(PLAN),
            "developer": slow(DEV),
            "reviewer": slow(REJECT + "\n\nSee <b>notes</b>.", APPROVE),
        },
        inprocess=False,
    )
    watch = spawn("thread", "watch", thread, "--interval", "0.05")
    try:
        assert read_line(watch) == f"thread {thread} (solve-issue): idle, 0 steps"
        stepper = spawn("thread", "step", thread, "-c", "10", "--agent", agent)
        lines = [read_line(watch) for _ in range(11)]
        assert stepper.wait(timeout=60) == 0, stepper.stderr.read() if stepper.stderr else ""
        assert watch.wait(timeout=30) == 0
        assert watch.stdout is not None and watch.stdout.read() == ""
    finally:
        watch.kill()
    roles = ["planner", "developer", "reviewer", "developer", "reviewer"]
    statuses = ["_", "_", "rejected", "_", "approved"]
    texts = ["The plan.", "Implemented.", "Needs tests.", "Implemented.", "LGTM."]
    for n, (role, status, text) in enumerate(zip(roles, statuses, texts, strict=True), 1):
        started, done = lines[2 * n - 2], lines[2 * n - 1]
        assert started == f"step {n} started: {role} (uwf-mock)"
        assert done.startswith(f"step {n} {role} -> {status} (uwf-mock, ")
        seconds = float(done.split("(uwf-mock, ")[1].split("s)")[0])
        assert SLOW <= seconds < 30
        assert done.endswith(f"s): {text}")
    assert lines[10] == f"thread {thread} ended: completed after 5 steps"


def test_watch_ends_on_kill_and_on_max_rounds(cli: Any, new_thread: Any, scenario: Any) -> None:
    killed = new_thread()
    watch = spawn("thread", "watch", killed, "--interval", "0.05")
    try:
        assert read_line(watch).endswith("idle, 0 steps")
        assert cli("thread", "kill", killed).code == 0
        assert read_line(watch) == f"thread {killed} ended: killed after 0 steps"
        assert watch.wait(timeout=30) == 0
    finally:
        watch.kill()

    limited = cli("thread", "start", "solve-issue", "-p", "x", "--max-rounds", "2").json()["thread"]
    result = cli("thread", "step", limited, "-c", "5", "--agent", scenario())
    assert result.code == 0, result.err
    done = spawn("thread", "watch", limited)  # already archived: the header and the end
    out, _ = done.communicate(timeout=30)
    assert done.returncode == 0
    assert out.splitlines() == [
        f"thread {limited} (solve-issue): max_rounds, 2 steps",
        f"thread {limited} ended: max_rounds after 2 steps",
    ]


def test_watch_all_follows_every_active_thread(cli: Any, new_thread: Any, scenario: Any) -> None:
    first, second = new_thread("one"), new_thread("two")
    agent = scenario({"planner": slow(PLAN), "developer": slow(DEV)}, inprocess=False)
    watch = spawn("thread", "watch", "--all", "--interval", "0.05")
    try:
        header = {read_line(watch), read_line(watch)}
        assert header == {f"thread {t} (solve-issue): idle, 0 steps" for t in (first, second)}
        a = spawn("thread", "step", first, "--agent", agent)
        b = spawn("thread", "step", second, "--agent", agent)
        assert a.wait(timeout=60) == 0 and b.wait(timeout=60) == 0
        lines = {read_line(watch) for _ in range(4)}
        third = new_thread("three")  # a thread started meanwhile is picked up
        assert read_line(watch) == f"thread {third} (solve-issue): idle, 0 steps"
    finally:
        watch.terminate()
        watch.wait(timeout=30)
    for t in (first, second):
        assert f"{t} step 1 started: planner (uwf-mock)" in lines
        assert any(line.startswith(f"{t} step 1 planner -> _ (uwf-mock, ") for line in lines)


def test_watching_never_makes_a_step_busy(cli: Any, new_thread: Any, scenario: Any) -> None:
    """Steps without --wait, back to back, while a watcher polls as fast as it may."""
    thread = new_thread()
    watch = spawn("thread", "watch", thread, "--interval", "0.001")
    try:
        read_line(watch)
        for _ in range(5):
            result = cli("thread", "step", thread, "--agent", scenario())
            assert result.code == 0, result.err
        assert watch.wait(timeout=30) == 0
    finally:
        watch.kill()


def test_follower_reports_only_what_is_newer(
    cli: Any, new_thread: Any, scenario: Any, root: Path
) -> None:
    thread = new_thread()
    assert cli("thread", "step", thread, "-c", "2", "--agent", scenario()).code == 0
    head = cli("thread", "show", thread).json()["head"]
    follower = Follower(FsBackend(root), thread, since=head)
    assert follower.poll() == []
    assert cli("thread", "step", thread, "--agent", scenario()).code == 0
    [event] = follower.poll()
    assert event["event"] == "step.completed"
    step = event["step"]
    assert (step["number"], step["role"], step["status"], step["agent"]) == (
        3,
        "reviewer",
        "rejected",
        "uwf-mock",
    )
    assert step["edgePrompt"].startswith("Review this change.")
    assert step["text"].endswith("Needs tests.")


def test_watch_usage_errors(cli: Any, new_thread: Any) -> None:
    thread = new_thread()
    both = cli("thread", "watch", thread, "--all")
    assert (both.code, both.err) == (2, "error: give a thread id or --all (not both)\n")
    neither = cli("thread", "watch")
    assert (neither.code, neither.err) == (2, "error: give a thread id or --all (not both)\n")
    bad = cli("thread", "watch", thread, "--interval", "0")
    assert bad.code == 1
    assert bad.err == "error: --interval must be a number of seconds in (0, 60], got: 0.0\n"
    ghost = cli("thread", "watch", "01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert ghost.err == "error: thread not found: 01ARZ3NDEKTSV4RRFFQ69G5FAV\n"


def test_watch_on_a_terminal_shows_a_live_status_line(
    cli: Any, new_thread: Any, scenario: Any
) -> None:
    """With stdout a terminal, a spinner line names the running step; the lines are the same."""
    import pty

    thread = new_thread()
    agent = scenario({"planner": [{"output": PLAN, "sleep": 1.0}]}, inprocess=False)
    primary, secondary = pty.openpty()
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", TERM="xterm")
    watch = subprocess.Popen(
        [str(BIN / "uwf"), "thread", "watch", thread, "--interval", "0.05"],
        stdout=secondary,
        stderr=secondary,
        env=env,
    )
    os.close(secondary)
    try:
        stepper = spawn("thread", "step", thread, "--agent", agent)
        assert stepper.wait(timeout=60) == 0
        assert cli("thread", "kill", thread).code == 0
        assert watch.wait(timeout=30) == 0
        screen = read_terminal(primary)
    finally:
        watch.kill()
        os.close(primary)
    text = screen.decode("utf-8", "replace")
    assert "step 1 planner running" in text  # the spinner line
    assert "\x1b[" in text  # drawn in place with terminal control sequences
    assert "step 1 started: planner (uwf-mock)" in text
    assert f"thread {thread} ended: killed after 1 step" in text
