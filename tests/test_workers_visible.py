"""Workers you can see (docs/scale-out.md, "Seeing the workers"): real `uwf worker` processes
register and beat in the store; `uwf worker list` shows each one's host, pid, state, current
thread and role and steps done; a worker killed with SIGKILL becomes lost after 3 missed
heartbeats; `thread show` names the worker stepping a thread; SIGTERM drains the step in
flight within --drain-timeout. On the filesystem and on PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from fleetkit import show
from support import BIN, ONE_REJECTION, reap, spawn_uwf
from uwf.backend import open_backend
from uwf.backend.workers import KEEP_MS, WorkerRecord
from uwf.util.ulid import new_thread_id, now_ms

pytestmark = pytest.mark.usefixtures("any_store")  # the filesystem and PostgreSQL

HOST = os.uname().nodename


def gated_agent(tmp_path: Path) -> tuple[str, Path, Path]:
    """uwf-mock behind a gate: it writes "<thread> <role>" to a marker as it starts, then
    waits until the test creates the gate file. Returns (agent, marker, gate)."""
    import yaml

    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({"roles": ONE_REJECTION}))
    marker, gate = tmp_path / "started", tmp_path / "go"
    script = tmp_path / "gated.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"echo \"$1 $2\" >> '{marker}'\n"
        f"while [ ! -e '{gate}' ]; do sleep 0.02; done\n"
        f"exec '{BIN / 'uwf-mock'}' --scenario '{scenario}' \"$@\"\n"
    )
    script.chmod(0o755)
    return str(script), marker, gate


def wait_for(predicate: Any, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)
    return value


def workers(cli_proc: Any) -> list[dict[str, Any]]:
    r = cli_proc("worker", "list")
    assert r.code == 0, r.err
    return list(r.json())


def only(cli_proc: Any) -> dict[str, Any]:
    listed = workers(cli_proc)
    assert len(listed) == 1, listed
    return listed[0]


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        reap(proc)
    return out, err


def test_list_shows_a_worker_mid_step_then_its_steps_and_its_stop(
    cli_proc: Any, new_thread: Any, tmp_path: Path
) -> None:
    thread = new_thread()
    agent, marker, gate = gated_agent(tmp_path)
    assert workers(cli_proc) == []
    proc = spawn_uwf("worker", "--agent", agent, "--heartbeat", "0.2", "--max-steps", "3")
    try:
        wait_for(marker.exists)
        running = wait_for(lambda: [w for w in workers(cli_proc) if "role" in w])[0]
        assert set(running) == {
            "id", "host", "pid", "state", "started", "heartbeat", "steps", "failed", "thread",
            "role",
        }  # fmt: skip
        assert (running["host"], running["pid"], running["state"]) == (HOST, proc.pid, "running")
        assert (running["thread"], running["role"], running["steps"]) == (thread, "planner", 0)
        assert running["started"] <= running["heartbeat"] <= now_ms()
        shown = show(cli_proc, thread)
        assert shown["status"] == "running"
        assert shown["worker"]["id"] == running["id"]
        assert (shown["worker"]["pid"], shown["worker"]["host"]) == (proc.pid, HOST)
        shown_table = cli_proc("thread", "show", thread, "--format", "table").out.splitlines()
        worker_row = ["worker", running["id"], "(pid", str(proc.pid), "on", f"{HOST})"]
        assert worker_row in [row.split() for row in shown_table]
        table = cli_proc("worker", "list", "--format", "table")
        header, row = table.out.splitlines()
        assert header.split() == [
            "WORKER", "HOST", "PID", "STATE", "THREAD", "ROLE", "STEPS", "FAILED", "AGE",
            "HEARTBEAT",
        ]  # fmt: skip
        assert row.split()[:8] == [running["id"], HOST, str(proc.pid), "running", thread,
                                   "planner", "0", "0"]  # fmt: skip
        gate.touch()
        out, err = finish(proc)
    finally:
        reap(proc)
    assert proc.returncode == 0, err
    assert [line["role"] for line in map(_json, out.splitlines())] == [
        "planner",
        "developer",
        "reviewer",
    ]
    stopped = only(cli_proc)
    assert (stopped["id"], stopped["state"], stopped["steps"], stopped["failed"]) == (
        running["id"],
        "stopped",
        3,
        0,
    )
    assert "thread" not in stopped and stopped["stopped"] >= stopped["heartbeat"] - 1
    assert "worker" not in show(cli_proc, thread)


def _json(line: str) -> Any:
    import json

    return json.loads(line)


def test_a_worker_killed_with_sigkill_becomes_lost(cli_proc: Any, tmp_path: Path) -> None:
    proc = spawn_uwf("worker", "--heartbeat", "0.2")  # nothing to step: idle
    try:
        idle = wait_for(lambda: workers(cli_proc))[0]
        assert (idle["state"], idle["pid"], idle["steps"]) == ("idle", proc.pid, 0)
        wait_for(lambda: only(cli_proc)["heartbeat"] > idle["heartbeat"])  # it beats
        proc.kill()
        proc.wait(timeout=30)
        killed_at = now_ms()
        lost = wait_for(lambda: (w := only(cli_proc))["state"] == "lost" and w, timeout=10)
    finally:
        reap(proc)
    assert lost["id"] == idle["id"] and "stopped" not in lost
    assert killed_at - lost["heartbeat"] < 1000  # its last beat was before the kill
    assert now_ms() - lost["heartbeat"] > 3 * 200  # lost after 3 missed heartbeats


def test_records_older_than_a_day_are_pruned_when_a_worker_starts(cli_proc: Any) -> None:
    long_ago = now_ms() - KEEP_MS - 60_000
    old = WorkerRecord(new_thread_id(long_ago), "gone", 1, long_ago, long_ago, 10_000, 7, 0)
    with open_backend() as backend:
        backend.workers.beat(old)
        assert [r.id for r in backend.workers.records()] == [old.id]
    assert workers(cli_proc) == []  # listings leave out what the next start prunes
    r = cli_proc("worker", "--idle-exit", "0")
    assert r.code == 0, r.err
    with open_backend() as backend:
        kept = backend.workers.records()
    assert len(kept) == 1 and kept[0].id != old.id and kept[0].stopped is not None


def test_sigterm_drain_lets_the_step_in_flight_land(
    cli_proc: Any, new_thread: Any, tmp_path: Path
) -> None:
    thread = new_thread()
    agent, marker, gate = gated_agent(tmp_path)
    proc = spawn_uwf("worker", "--agent", agent, "--drain-timeout", "30")
    try:
        wait_for(marker.exists)
        proc.send_signal(signal.SIGTERM)
        assert proc.stderr is not None
        noticed = ""  # the worker noticed (it polls twice a second) while the agent still waits
        while "worker: SIGTERM: letting the step" not in noticed:
            line = proc.stderr.readline()
            assert line, noticed
            noticed += line
        assert proc.poll() is None
        gate.touch()
        out, err = finish(proc)
        err = noticed + err
    finally:
        reap(proc)
    assert proc.returncode == 0, err
    [line] = map(_json, out.splitlines())  # the step landed, and no other one started
    assert (line["thread"], line["role"]) == (thread, "planner")
    assert err.splitlines()[-3:] == [
        f"worker: SIGTERM: letting the step of thread {thread} finish (up to 30s, --drain-timeout)",
        "worker: SIGTERM: the step in flight ended; stopped",
        "worker: 1 steps, 0 failed",
    ]
    assert show(cli_proc, thread)["head"] == line["head"]
    assert only(cli_proc)["state"] == "stopped"


def test_sigterm_drain_stops_a_step_that_outlives_it_and_the_head_stays(
    cli_proc: Any, new_thread: Any, tmp_path: Path
) -> None:
    thread = new_thread()
    before = show(cli_proc, thread)["head"]
    agent, marker, _gate = gated_agent(tmp_path)  # the gate never opens
    proc = spawn_uwf("worker", "--agent", agent, "--drain-timeout", "1")
    try:
        wait_for(marker.exists)
        began = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, err = finish(proc)
        took = time.monotonic() - began
    finally:
        reap(proc)
    assert proc.returncode == 0, err
    assert took >= 1
    [line] = map(_json, out.splitlines())
    assert line == {
        "thread": thread,
        "error": f"thread {thread}: the step outlived --drain-timeout (1s) after SIGTERM: its "
        "agent was stopped and the step was not recorded",
        "exit": 1,
        "ms": line["ms"],
    }
    assert err.splitlines()[-2:] == [
        "worker: SIGTERM: stopped after --drain-timeout; the step in flight was not recorded",
        "worker: 0 steps, 1 failed",
    ]
    after = show(cli_proc, thread)
    assert (after["head"], after["status"]) == (before, "idle")
    assert "failure" not in after and "worker" not in after  # nothing recorded, lock released
    with open_backend() as backend:
        assert backend.locks.running() == set()


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--heartbeat", "0"], 1, "--heartbeat must be a number of seconds above 0, at most "
         "3600, got: 0.0"),
        (["--drain-timeout", "-1"], 1, "--drain-timeout must be a number of seconds from 0 to "
         "3600, got: -1.0"),
        (["--max-steps", "2", "list"], 2, "`uwf worker list` takes none of the options of "
         "`uwf worker`"),
    ],
)  # fmt: skip
def test_worker_usage_errors(cli_proc: Any, args: list[str], code: int, message: str) -> None:
    r = cli_proc("worker", *args)
    assert (r.code, r.err) == (code, f"error: {message}\n")
