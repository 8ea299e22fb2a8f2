"""A thread's last failure is part of its state (docs/format.md, "Thread state"): whoever
steps it — a foreground `thread step`, `--next`, `uwf worker`, a background run — records the
error line, the exit code, when, and the attempts that failed since the last step landed;
`thread show` and `thread list` show it (status `failing`) and a landed step clears it.

Every test drives the real CLI in subprocesses, on the filesystem and on PostgreSQL
(``any_store``: the real server of tests/pgserver.py).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from fleetkit import show
from support import ONE_REJECTION, PLAN

FAILS = {"exit": 1, "stderr": "error: rate limited"}
ERROR = "agent command failed (uwf-mock) with exit code 1: error: rate limited"


def failing_then_ok(scenario: Any, failures: int) -> str:
    """A planner whose first ``failures`` runs fail, then succeed; the rest of ONE_REJECTION."""
    return str(
        scenario(
            {**ONE_REJECTION, "planner": [{"attempts": [FAILS] * failures + [PLAN]}]},
            inprocess=False,
        )
    )


def test_a_foreground_step_records_the_failure_and_a_landed_step_clears_it(
    any_store: str, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    agent = failing_then_ok(scenario, 2)
    before = int(time.time() * 1000)
    for attempt in (1, 2):
        r = cli_proc("thread", "step", thread, "--agent", agent)
        assert (r.code, r.err.splitlines()[-1]) == (5, f"error: {ERROR}")
        shown = show(cli_proc, thread)
        assert shown["status"] == "failing"
        failure = shown["failure"]
        assert failure == {
            "error": ERROR,
            "code": 5,
            "at": failure["at"],
            "attempts": attempt,
            "since": failure["since"],
            "role": "planner",
            "agent": "uwf-mock",
            "host": os.uname().nodename,
            "retryAt": failure["at"] + 1000 * 2 ** (attempt - 1),  # the default back-off
        }
        assert before <= failure["since"] <= failure["at"] <= int(time.time() * 1000)
    listed = cli_proc("thread", "list").json()
    assert [(t["thread"], t["status"], t["failure"]["attempts"]) for t in listed] == [
        (thread, "failing", 2)
    ]
    assert cli_proc("thread", "list", "--status", "failing").json() == listed
    assert cli_proc("thread", "list", "--status", "idle").json() == []
    assert cli_proc("thread", "list", "--status", "active").json() == listed
    ok = cli_proc("thread", "step", thread, "--agent", agent)
    assert ok.code == 0, ok.err
    shown = show(cli_proc, thread)
    assert shown["status"] == "idle" and "failure" not in shown
    assert "failure" not in cli_proc("thread", "list").json()[0]


def test_busy_not_active_and_deferred_are_not_failures(
    any_store: str, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    defer = scenario(
        {"planner": [{"exit": 75, "stderr": "error: a person answers"}]}, inprocess=False
    )
    r = cli_proc("thread", "step", thread, "--agent", defer)
    assert r.code == 6, r.err
    shown = show(cli_proc, thread)
    assert shown["status"] == "waiting" and "failure" not in shown
    usage = cli_proc("thread", "step", thread, "--timeout", "0")
    assert usage.code == 2 and "failure" not in show(cli_proc, thread)


def test_next_and_the_worker_record_failures(
    any_store: str, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    agent = failing_then_ok(scenario, 3)
    r = cli_proc("thread", "step", "--next", "--agent", agent)
    assert r.code == 5, r.err
    assert show(cli_proc, thread)["failure"]["attempts"] == 1
    w = cli_proc("worker", "--max-steps", "1", "--idle-exit", "10", "--agent", agent)
    assert w.code == 0, w.err
    lines = w.jsonl()
    assert [line.get("exit") for line in lines] == [5, 5, None]  # cooled down, then stepped
    assert show(cli_proc, thread)["status"] == "idle"  # the third attempt landed
    assert "failure" not in show(cli_proc, thread)


def test_a_failed_background_run_leaves_the_failure_in_the_thread(
    any_store: str, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    agent = scenario({"planner": [FAILS]}, inprocess=False)
    r = cli_proc("thread", "step", thread, "--background", "-c", "3", "--agent", agent)
    assert r.code == 0, r.err
    deadline = time.monotonic() + 30
    while show(cli_proc, thread)["status"] == "running":
        assert time.monotonic() < deadline, "the background run never ended"
        time.sleep(0.05)
    shown = show(cli_proc, thread)
    assert shown["status"] == "failing"
    assert (shown["failure"]["error"], shown["failure"]["code"]) == (ERROR, 5)
    log = Path(r.json()["log"]).read_text(encoding="utf-8")
    assert f"error: {ERROR}" in log


def test_a_failure_before_the_agent_runs_is_recorded_too(
    any_store: str, cli_proc: Any, new_thread: Any
) -> None:
    """No agent configured: the step fails with 1 before it spawns anything."""
    thread = new_thread()
    r = cli_proc("thread", "step", thread)
    assert r.code == 1
    failure = show(cli_proc, thread)["failure"]
    assert failure["code"] == 1 and "role" not in failure and "agent" not in failure
    assert failure["error"] == (
        "no agent configured: pass --agent or set defaultAgent in config.yaml"
    )
