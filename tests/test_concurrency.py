"""Steps racing each other: same thread (one runs, the other is refused before its agent
starts), and many threads in parallel (all end correct, nothing lost)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from support import BIN, ONE_REJECTION, history_lines

pytestmark = pytest.mark.usefixtures("any_store")  # the filesystem and PostgreSQL


def spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(BIN / "uwf"), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ),
    )


def wait_for_lines(path: Path, n: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        time.sleep(0.02)
    raise AssertionError(f"{path} never reached {n} lines")


def slow_agent(agent_script: Any, scenario: Any, marker: Path, seconds: float) -> str:
    """An agent that records its start in ``marker``, sleeps, then acts as uwf-mock."""
    mock = scenario(inprocess=False).split()
    return agent_script(
        f"open({str(marker)!r}, 'a').write(str(os.getpid()) + '\\n')\n"
        f"time.sleep({seconds})\n"
        f"os.execvp({mock[0]!r}, {mock!r} + sys.argv[1:])\n"
    )


def gated_agent(agent_script: Any, scenario: Any, marker: Path, gate: Path) -> str:
    """An agent that records its start in ``marker``, waits for ``gate`` to exist (60 s at
    most), then acts as uwf-mock."""
    mock = scenario(inprocess=False).split()
    return agent_script(
        f"open({str(marker)!r}, 'a').write(str(os.getpid()) + '\\n')\n"
        "deadline = time.monotonic() + 60\n"
        f"while not os.path.exists({str(gate)!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n"
        f"os.execvp({mock[0]!r}, {mock!r} + sys.argv[1:])\n"
    )


def test_second_step_on_a_busy_thread_is_refused_before_its_agent_starts(
    new_thread: Any, agent_script: Any, scenario: Any, tmp_path: Path
) -> None:
    """The refusal comes while the first step's agent still runs (it waits for a gate the test
    opens only afterwards): at once, not after the agent."""
    thread = new_thread()
    marker, gate = tmp_path / "agent-starts", tmp_path / "gate"
    agent = gated_agent(agent_script, scenario, marker, gate)
    first = spawn("thread", "step", thread, "--agent", agent)
    try:
        wait_for_lines(marker, 1)  # the first step holds the lock: its agent is running
        second = spawn("thread", "step", thread, "--agent", agent)
        out, err = second.communicate(timeout=60)
        assert second.returncode == 4
        assert err == f"error: thread {thread} is busy\n"
        assert out == ""
        assert first.poll() is None  # refused while the first agent still waited
    finally:
        gate.touch()
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert json.loads(out)["role"] == "planner"
    assert len(marker.read_text().splitlines()) == 1  # the refused step never spawned


def test_wait_queues_behind_the_running_step(
    cli: Any, new_thread: Any, agent_script: Any, scenario: Any, tmp_path: Path
) -> None:
    thread = new_thread()
    marker = tmp_path / "agent-starts"
    agent = slow_agent(agent_script, scenario, marker, 1.0)
    first = spawn("thread", "step", thread, "--agent", agent)
    wait_for_lines(marker, 1)
    second = spawn("thread", "step", thread, "--agent", agent, "--wait")
    out1, err1 = first.communicate(timeout=30)
    out2, err2 = second.communicate(timeout=30)
    assert first.returncode == 0 and second.returncode == 0, (err1, err2)
    assert [json.loads(out1)["role"], json.loads(out2)["role"]] == ["planner", "developer"]
    steps = cli("thread", "steps", thread).json()["steps"]
    assert [s.get("role") for s in steps] == [None, "planner", "developer"]
    assert steps[2]["hash"] == json.loads(out2)["head"]


def test_eight_processes_on_eight_threads(
    cli: Any, root: Path, new_thread: Any, scenario: Any
) -> None:
    agent = scenario(ONE_REJECTION, inprocess=False)
    threads = [new_thread(f"task {i}") for i in range(8)]
    procs = [spawn("thread", "step", t, "--agent", agent, "-c", "20") for t in threads]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert json.loads(out.splitlines()[-1])["done"] is True

    history = history_lines()
    assert sorted(h["thread"] for h in history) == sorted(threads)  # exactly one line each
    assert {h["status"] for h in history} == {"completed"}
    assert cli("thread", "list").json() == []
    for thread in threads:
        steps = cli("thread", "steps", thread).json()["steps"]
        assert [s.get("role") for s in steps[1:]] == [
            "planner",
            "developer",
            "reviewer",
            "developer",
            "reviewer",
        ]
        assert steps[0]["prompt"] == f"task {threads.index(thread)}"
        show = cli("thread", "show", thread).json()
        assert show["steps"] == 5 and show["head"] == steps[-1]["hash"]
    assert cli("cas", "verify").code == 0
