"""Stopping a worker the ways it is stopped in production (docs/scale-out.md, "Where to run
workers"): the systemd unit uwf ships (examples/systemd/uwf-worker.service), checked by
`systemd-analyze verify` and run as systemd would stop it for each KillMode, and
`timeout N uwf worker`. The step in flight lands when the worker alone is signalled; when the
agent is signalled with it (KillMode=control-group) the step is lost, but it is a shutdown:
no failed attempt is counted. Both backends: the failure record is the thread table's."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import BIN, DEV, PLAN, REPO, reap
from uwf.engine.step.fleet import SIGNAL_ECHO

UNIT = REPO / "examples" / "systemd" / "uwf-worker.service"
SCALE_OUT = REPO / "docs" / "scale-out.md"
SYSTEMD_ANALYZE = Path("/usr/bin/systemd-analyze")
DEFAULT_DRAIN = 10.0  # `uwf worker --drain-timeout`'s default


def unit() -> dict[str, dict[str, str]]:
    """The unit file's sections and their keys (the last value of a key that repeats)."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] = {}
    for line in UNIT.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
            continue
        key, _, value = line.partition("=")
        current[key.strip()] = value.strip()
    return sections


def seconds(value: str) -> float:
    found = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|sec|min)?", value)
    assert found, value
    return float(found.group(1)) * (60 if found.group(2) == "min" else 1)


def worker_args(service: dict[str, str]) -> list[str]:
    """ExecStart's arguments after the uwf program."""
    program, *args = shlex.split(service["ExecStart"])
    assert Path(program).name == "uwf", program
    return args


def drain_timeout(args: list[str]) -> float:
    return float(args[args.index("--drain-timeout") + 1]) if "--drain-timeout" in args else 10.0


def test_the_unit_file_is_valid_and_lets_the_drain_finish(tmp_path: Path) -> None:
    service = unit()["Service"]
    args = worker_args(service)
    assert args[0] == "worker"
    assert service["KillMode"] == "mixed"  # SIGTERM to the worker alone: it drains
    assert service["KillSignal"] == "SIGTERM"
    assert seconds(service["TimeoutStopSec"]) >= drain_timeout(args) + 3  # then SIGKILL
    assert service["Restart"] in ("always", "on-failure")
    assert unit()["Install"]["WantedBy"] == "multi-user.target"

    assert SYSTEMD_ANALYZE.exists(), "systemd-analyze (Debian's systemd package) checks the unit"
    copy = tmp_path / "uwf-worker.service"  # its program must exist where it is verified
    copy.write_text(UNIT.read_text().replace("/usr/local/bin/uwf", str(BIN / "uwf")))
    verified = subprocess.run(
        [str(SYSTEMD_ANALYZE), "verify", str(copy)], capture_output=True, text=True, timeout=60
    )
    assert verified.returncode == 0, verified.stderr
    about_it = [line for line in verified.stderr.splitlines() if str(copy) in line]
    assert about_it == [], about_it  # no key ignored, no value refused, nothing unsafe

    docs = SCALE_OUT.read_text()  # the documentation shows the file as it is shipped
    block = docs.split("  ```ini\n", 1)[1].split("  ```\n", 1)[0]
    assert "\n".join(line.removeprefix("  ") for line in block.splitlines()) + "\n" == (
        UNIT.read_text()
    )


# -- stopping a worker with a step in flight ------------------------------------------------------


def descendants(pid: int) -> list[int]:
    """The processes below ``pid`` (children, theirs…), from /proc."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        kids = [p for p, pp in parents.items() if pp == parent]
        found += kids
        frontier += kids
    return found


def agent_of(worker: int, timeout: float = 30) -> int:
    """The pid of the worker's agent (uwf-mock), once it runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid in descendants(worker):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            # the program itself, its group made: a child between vfork and exec still shows
            # the worker's command line, which names uwf-mock in its --agent
            program = [Path(os.fsdecode(a)).name for a in cmdline.split(b"\0")[:2]]
            if "uwf-mock" in program and _leads_its_group(pid):
                return pid
        time.sleep(0.05)
    raise AssertionError("the worker's agent never started")


def _leads_its_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except ProcessLookupError:
        return False


def slow_agent(scenario: Any, seconds: float) -> str:
    return str(
        scenario(
            {"planner": [{"output": PLAN, "sleep": seconds}], "developer": [DEV]}, inprocess=False
        )
    )


def start_worker(args: list[str], agent: str) -> subprocess.Popen[str]:
    """``uwf worker`` in a session of its own, as a service's main process."""
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    return subprocess.Popen(
        [str(BIN / "uwf"), *args, "--max-steps", "1", "--agent", agent],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )


def stop_like_systemd(proc: subprocess.Popen[str], kill_mode: str, sig: int, grace: float) -> None:
    """What ``systemctl stop`` does (systemd.kill(5)): ``sig`` to the main process alone
    (``mixed``) or to every process of the unit (``control-group``), then after ``grace``
    seconds SIGKILL to every process left."""
    group = [proc.pid, *descendants(proc.pid)]
    for pid in group if kill_mode == "control-group" else [proc.pid]:
        os.kill(pid, sig)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        for pid in [proc.pid, *descendants(proc.pid)]:
            os.kill(pid, signal.SIGKILL)


def finish(proc: subprocess.Popen[str]) -> tuple[list[Any], str]:
    out, err = proc.communicate(timeout=60)
    return [yaml.safe_load(line) for line in out.splitlines() if line.strip()], err


@pytest.mark.usefixtures("any_store")
def test_stopping_the_service_lets_the_step_in_flight_land(
    cli: Any, new_thread: Any, scenario: Any
) -> None:
    """The unit as shipped (KillMode=mixed): the worker drains and the step lands."""
    service = unit()["Service"]
    thread = new_thread()
    proc = start_worker(worker_args(service), slow_agent(scenario, 2.5))
    try:
        agent_of(proc.pid)
        stop_like_systemd(
            proc,
            service["KillMode"],
            getattr(signal, service["KillSignal"]),
            seconds(service["TimeoutStopSec"]),
        )
        lines, err = finish(proc)
    finally:
        reap(proc)
    assert proc.returncode == 0, err
    assert [(line["thread"], line["role"], line["status"]) for line in lines] == [
        (thread, "planner", "active")
    ]
    assert "worker: SIGTERM: the step in flight ended; stopped" in err
    shown = cli("thread", "show", thread).json()
    assert shown["head"] == lines[0]["head"] and "failure" not in shown


@pytest.mark.usefixtures("any_store")
@pytest.mark.parametrize("agent_first", [False, True], ids=["together", "agent-first"])
def test_an_agent_killed_with_its_worker_counts_no_failed_attempt(
    cli: Any, new_thread: Any, scenario: Any, agent_first: bool
) -> None:
    """KillMode=control-group: SIGTERM reaches the agent with the worker (or a moment before
    it); the step cannot land, but the thread records no failure: it was a shutdown."""
    thread = new_thread()
    before = cli("thread", "show", thread).json()["head"]
    proc = start_worker(worker_args(unit()["Service"]), slow_agent(scenario, 20))
    try:
        agent = agent_of(proc.pid)
        if agent_first:
            os.killpg(agent, signal.SIGTERM)
            time.sleep(0.3)
            os.kill(proc.pid, signal.SIGTERM)
        else:
            stop_like_systemd(proc, "control-group", signal.SIGTERM, 30)
        lines, err = finish(proc)
    finally:
        reap(proc)
    assert proc.returncode == 0, err
    assert lines == [
        {
            "thread": thread,
            "error": f"thread {thread}: its agent was stopped by the worker's shutdown "
            "(SIGTERM reached its process group too): the step was not recorded and counts "
            "as no failed attempt",
            "exit": 1,
            "ms": lines[0]["ms"],
        }
    ]
    assert err.splitlines()[-2:] == [
        "worker: SIGTERM: the agent was stopped with the worker; the step in flight was not "
        "recorded",
        "worker: 0 steps, 1 failed",
    ]
    shown = cli("thread", "show", thread).json()
    assert (shown["head"], shown["status"]) == (before, "idle")
    assert "failure" not in shown


@pytest.mark.usefixtures("any_store")
def test_an_agent_killed_while_its_worker_runs_on_is_a_failure(
    cli: Any, new_thread: Any, scenario: Any, root: Path
) -> None:
    """No SIGTERM for the worker: an agent that dies of a signal failed its step."""
    thread = new_thread()
    (root / "config.yaml").write_text("retry: {backoff: 600}\n")  # no second attempt here
    proc = start_worker(["worker", "--idle-exit", "1"], slow_agent(scenario, 20))
    try:
        os.killpg(agent_of(proc.pid), signal.SIGTERM)
        lines, err = finish(proc)
    finally:
        reap(proc)
    assert proc.returncode == 0, err
    assert lines[0]["exit"] == 5
    # killed by the signal, or stopped by it in time to say so (the agent kit exits 143)
    assert re.match(
        r"agent command failed \(uwf-mock\) with exit code (-15|143)\b", lines[0]["error"]
    )
    failure = cli("thread", "show", thread).json()["failure"]
    assert (failure["attempts"], failure["code"]) == (1, 5)


def test_a_sigterm_sent_twice_is_one_request_and_a_later_one_stops_at_once(
    cli: Any, new_thread: Any, scenario: Any
) -> None:
    """`timeout` (and some supervisors) send SIGTERM to the worker, then to its process group:
    a second one within a second is the same request, and the drain goes on; one sent later
    is a person insisting, and stops the agent at once (nothing recorded either way)."""
    thread = new_thread()
    proc = start_worker(["worker"], slow_agent(scenario, 2.5))
    try:
        agent_of(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)
        time.sleep(0.2)  # after the handler ran: two deliveries, not one coalesced
        os.kill(proc.pid, signal.SIGTERM)
        lines, err = finish(proc)
    finally:
        reap(proc)
    assert proc.returncode == 0, err
    assert [(line["thread"], line["role"]) for line in lines] == [(thread, "planner")]
    assert "failure" not in cli("thread", "show", thread).json()

    other = new_thread("Insisted")
    proc = start_worker(["worker", "--thread", other], slow_agent(scenario, 20))
    try:
        agent_of(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)
        # the echo window is real time by design (signals are): nothing to poll but the clock
        time.sleep(SIGNAL_ECHO + 0.5)
        os.kill(proc.pid, signal.SIGTERM)
        lines, err = finish(proc)
    finally:
        reap(proc)
    assert lines == [] and "worker: interrupted (SIGTERM): stopped; the step in flight was" in err
    shown = cli("thread", "show", other).json()
    assert (shown["steps"], "failure" in shown) == (0, False)


def test_timeout_around_a_worker_lets_the_step_land(
    cli: Any, new_thread: Any, scenario: Any
) -> None:
    """`timeout` signals the worker and then its process group: one request, one drain."""
    thread = new_thread()
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")
    proc = subprocess.Popen(
        [
            "timeout",
            "-s",
            "TERM",
            "1.5",
            str(BIN / "uwf"),
            "worker",
            "--max-steps",
            "1",
            "--agent",
            slow_agent(scenario, 3.5),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        lines, err = finish(proc)
    finally:
        reap(proc)
    assert proc.returncode == 124, err  # timeout's own code: it timed out
    assert [(line["thread"], line["role"]) for line in lines] == [(thread, "planner")], err
    assert "worker: SIGTERM: the step in flight ended; stopped" in err
    shown = cli("thread", "show", thread).json()
    assert shown["head"] == lines[0]["head"] and "failure" not in shown
