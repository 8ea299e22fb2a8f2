"""Fleets on both backends: ``thread step --next`` picks the oldest idle thread (skipping
threads that run or wait), exits 3 when none is left; ``uwf worker`` steps until told to
stop, one JSON line per step, and stops gracefully on SIGTERM."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

import crashkit
from support import EXAMPLES, ONE_REJECTION, spawn_uwf
from uwf.backend import open_backend
from uwf.backend.base import Waiting
from uwf.util.ulid import ThreadId, now_ms

pytestmark = pytest.mark.usefixtures("any_store")  # the filesystem and PostgreSQL


def wait_for(predicate: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_next_steps_the_oldest_idle_thread_and_exits_3_when_none_is_left(
    cli: Any, new_thread: Any, scenario: Any
) -> None:
    agent = scenario(ONE_REJECTION)
    a, b, c = new_thread("a"), new_thread("b"), new_thread("c")
    with open_backend() as backend:
        head_b = backend.threads.head(ThreadId(b))
        assert head_b is not None
        backend.threads.wait(ThreadId(b), Waiting("planner", now_ms(), head_b, "a person answers"))
        with backend.locks.step(ThreadId(a), wait=False):  # a runs elsewhere: skipped
            r = cli("thread", "step", "--next", "--agent", agent)
            assert r.code == 0, r.err
            assert (r.json()["thread"], r.json()["role"]) == (c, "planner")
        r = cli("thread", "step", "--next", "--agent", agent)
        assert (r.json()["thread"], r.json()["role"]) == (a, "planner")  # the oldest
    ran = cli("thread", "step", "--next", "-c", "20", "--agent", agent)
    assert ran.code == 0, ran.err
    assert {line["thread"] for line in ran.jsonl()} == {a, c}  # b waits: never stepped
    assert [line["done"] for line in ran.jsonl()].count(True) == 2
    assert len(ran.jsonl()) == 8  # the 10 steps of a and c, less the 2 above
    none = cli("thread", "step", "--next", "--agent", agent)
    assert (none.code, none.out) == (3, "")
    assert none.err == "error: nothing to step: no active thread is idle and not waiting\n"
    assert cli("thread", "show", b).json()["steps"] == 0


def test_next_with_a_workflow(cli: Any, new_thread: Any, scenario: Any, tmp_path: Path) -> None:
    agent = scenario(ONE_REJECTION)
    other = tmp_path / "other.yaml"
    other.write_text((EXAMPLES / "solve-issue.yaml").read_text().replace("solve-issue", "other", 1))
    assert cli("workflow", "put", str(other)).code == 0
    theirs = cli("thread", "start", "other", "-p", "theirs").json()["thread"]
    ours = new_thread("ours")
    r = cli("thread", "step", "--next", "--workflow", "solve-issue", "--agent", agent)
    assert r.json()["thread"] == ours
    r = cli("thread", "step", "--next", "--workflow", "other", "--agent", agent)
    assert r.json()["thread"] == theirs
    missing = cli("thread", "step", "--next", "--workflow", "ghost")
    assert (missing.code, missing.err) == (1, "error: workflow not found: ghost\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give a thread id or --next (not both)"),
        (["01ARZ3NDEKTSV4RRFFQ69G5FAV", "--next"], "give a thread id or --next (not both)"),
        (["--next", "--wait"], "--dry-run and --wait need a thread id, not --next"),
        (["01ARZ3NDEKTSV4RRFFQ69G5FAV", "--workflow", "x"], "--workflow needs --next"),
    ],
)
def test_next_usage_errors(cli: Any, args: list[str], message: str) -> None:
    r = cli("thread", "step", *args)
    assert (r.code, r.err) == (2, f"error: {message}\n")


def test_worker_steps_every_thread_to_the_end_one_line_per_step(
    cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    threads = [new_thread(f"task {i}") for i in range(3)]
    r = cli_proc("worker", "--idle-exit", "0.3", "--agent", scenario(ONE_REJECTION))
    assert r.code == 0, r.err
    lines = r.jsonl()
    assert len(lines) == 15 and all(set(x) >= {"thread", "head", "role", "ms"} for x in lines)
    for t in threads:
        assert [x["role"] for x in lines if x["thread"] == t] == [
            "planner",
            "developer",
            "reviewer",
            "developer",
            "reviewer",
        ]
    assert r.err.splitlines()[-2:] == [
        "worker: idle for 0.3s: stopping" if False else r.err.splitlines()[-2],
        "worker: 15 steps, 0 failed",
    ]
    assert r.err.splitlines()[-2].startswith("worker: idle for ")
    assert cli_proc("thread", "list").json() == []


def test_worker_max_steps_and_a_failing_thread(
    cli_proc: Any, new_thread: Any, scenario: Any, agent_script: Any
) -> None:
    bad, good = new_thread("bad"), new_thread("good")
    mock = scenario(ONE_REJECTION, inprocess=False).split()
    agent = agent_script(
        f"if sys.argv[1] == {bad!r}:\n    sys.exit('error: no')\n"
        f"os.execvp({mock[0]!r}, {mock!r} + sys.argv[1:])\n"
    )
    r = cli_proc("worker", "--max-steps", "1", "--idle-exit", "5", "--agent", agent)
    assert r.code == 0, r.err
    lines = r.jsonl()
    assert lines[0]["thread"] == bad and lines[0]["exit"] == 5  # failed: cools down
    assert lines[0]["error"].startswith("agent command failed (")
    assert lines[0]["error"].endswith("with exit code 1: error: no")
    assert [x["thread"] for x in lines[1:]] == [good]  # the other thread goes on
    assert r.err.splitlines()[-1] == "worker: 1 steps, 1 failed"
    assert cli_proc("thread", "show", bad).json()["steps"] == 0


def test_worker_sigterm_stops_the_agent_and_leaves_the_head(
    cli_proc: Any, new_thread: Any, tmp_path: Path
) -> None:
    thread = new_thread()
    before = cli_proc("thread", "show", thread).json()["head"]
    agent, marker = crashkit.thread_marker_agent(
        tmp_path, {"planner": [{"output": "x", "sleep": 60}]}
    )
    proc = spawn_uwf("worker", "--agent", agent, "--drain-timeout", "0")
    wait_for(lambda: crashkit.lines_of(marker))
    began = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert time.monotonic() - began < 5
    assert out == ""
    assert "worker: interrupted (SIGTERM): stopped; the step in flight was not recorded" in err
    assert cli_proc("thread", "show", thread).json()["head"] == before
    with open_backend() as backend:
        assert backend.locks.running() == set()


def test_worker_usage_errors(cli: Any) -> None:
    r = cli("worker", "--max-steps", "0")
    assert (r.code, r.err) == (1, "error: --max-steps must be a positive integer, got: 0\n")
    r = cli("worker", "--idle-exit", "-1")
    assert (r.code, r.err) == (
        1,
        "error: --idle-exit must be a number of seconds >= 0, got: -1.0\n",
    )
