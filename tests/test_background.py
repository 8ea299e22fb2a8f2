"""Background runs (`thread step --background`) and `thread stop`, through the real CLI.

A background run is a detached process holding the thread's step lock for its whole life
(docs/architecture.md, "Background runs"). These tests start it from a real shell on a
pseudo-terminal that then exits, stop it and look for what it left in the process table,
kill it with SIGKILL and clean up after it; the engine's loop is also driven in-process on the
memory backend, where nothing but the backend interface is shared.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support import APPROVE, DEV, EXAMPLES, PLAN, Result
from test_step_engine import APPROVE as APPROVE_OUT
from test_step_engine import DEV as DEV_OUT
from test_step_engine import PLAN as PLAN_OUT
from test_step_engine import scripted
from uwf.adapters.process import Finished
from uwf.backend.memory import MemoryBackend
from uwf.engine.step import StepResult, background
from uwf.engine.threads import lifecycle as threads
from uwf.engine.workflows import stored as workflows
from uwf.util.ulid import ThreadId

SLOW = 30  # seconds an agent sleeps when a test means to stop it


def wait_for(condition: Callable[[], Any], what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def alive(pid: int) -> bool:
    """Whether ``pid`` is in the process table as anything but a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def show(cli: Any, thread: str) -> dict[str, Any]:
    result = cli("thread", "show", thread)
    assert result.code == 0, result.err
    return dict(result.json())


def launch(cli_proc: Any, thread: str, agent: str, *extra: str) -> dict[str, Any]:
    result = cli_proc("thread", "step", thread, "--background", "--agent", agent, *extra)
    assert result.code == 0, result.err
    out = json.loads(result.out)
    assert set(out) == {"thread", "pid", "log"} and out["thread"] == thread
    return dict(out)


def ended(root: Path, thread: str) -> str:
    """The last line of the thread's run log once the run has ended."""

    def last() -> str | None:
        lines = (root / "runs" / f"{thread}.log").read_text().splitlines()
        return lines[-1] if " ended: " in lines[-1] else None

    return str(wait_for(last, "the run's last log line"))


# -- a run that outlives its shell ------------------------------------------------------------


def in_shell(command: str) -> str:
    """Run ``command`` in bash on a pseudo-terminal (its controlling terminal), let the shell
    exit, hang the terminal up, and return what the shell printed."""
    bash = shutil.which("bash")
    assert bash is not None
    pid, fd = pty.fork()
    if pid == 0:  # the child: exec at once (nothing else may run in a forked test process)
        os.execv(bash, [bash, "-c", command])
    screen = b""
    while select.select([fd], [], [], 30)[0]:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the shell exited and the terminal hung up
            break
        if not chunk:
            break
        screen += chunk
    os.close(fd)
    os.waitpid(pid, 0)
    return screen.decode(errors="replace")


def test_a_run_outlives_its_shell_and_steps_the_thread_to_its_end(
    cli: Any, new_thread: Any, scenario: Any, root: Path
) -> None:
    thread = new_thread()
    agent = scenario(
        {
            "planner": [{"output": PLAN, "sleep": 1.0, "stderr": "planning"}],
            "developer": [DEV],
            "reviewer": [APPROVE],
        },
        inprocess=False,
    )
    screen = in_shell(f"uwf thread step {thread} --background -c 10 --agent '{agent}'")
    started = json.loads(screen.strip().splitlines()[-1])
    pid = started["pid"]
    assert started == {"thread": thread, "pid": pid, "log": str(root / "runs" / f"{thread}.log")}

    # the shell is gone; the run goes on, "running" between and during steps
    assert alive(pid)
    shown = show(cli, thread)
    assert shown["status"] == "running" and shown["background"]["pid"] == pid
    assert shown["background"]["log"] == started["log"]
    listed = cli("thread", "list").json()
    assert [(t["thread"], t["status"]) for t in listed] == [(thread, "running")]

    last = ended(root, thread)
    assert last.endswith(f"run of thread {thread} ended: the thread is completed (3 steps ran)")
    wait_for(lambda: not alive(pid), "the run to exit")
    shown = show(cli, thread)
    assert (shown["status"], shown["steps"], "background" in shown) == ("completed", 3, False)
    log = Path(started["log"]).read_text().splitlines()
    assert log[0].endswith(f"background run of thread {thread} started: pid {pid}, up to 10 steps")
    assert log[1] == "uwf-mock: planning"
    steps = [json.loads(line) for line in log if line.startswith("{")]
    assert [(s["role"], s["status"]) for s in steps] == [
        ("planner", "active"),
        ("developer", "active"),
        ("reviewer", "completed"),
    ]


# -- busy, stop, and what stop leaves in the process table ---------------------------------------

GROUP_AGENT = f"""
import subprocess
child = subprocess.Popen(["sleep", "{SLOW * 10}"])  # in the agent's process group
with open(sys.argv[1] + ".tmp", "w") as fh:
    fh.write(f"{{os.getpid()}} {{child.pid}}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep({SLOW})
"""


def test_stop_ends_the_run_and_its_agents_group_and_keeps_the_thread(
    any_store: str,
    cli: Any,
    cli_proc: Any,
    new_thread: Any,
    agent_script: Any,
    tmp_path: Path,
    root: Path,
) -> None:
    thread = new_thread()
    pids_file = tmp_path / "pids"
    agent = agent_script(GROUP_AGENT) + f" {pids_file}"
    head = show(cli, thread)["head"]
    run_pid = launch(cli_proc, thread, agent)["pid"]
    pids = wait_for(lambda: pids_file.exists() and pids_file.read_text(), "the agent's pids")
    agent_pid, child_pid = map(int, pids.split())

    busy = f"thread {thread} is busy: a background run (pid {run_pid} on {os.uname().nodename}) "
    busy += f"is stepping it; `uwf thread stop {thread}` ends it"
    for args in (["--background"], []):
        refused = cli_proc("thread", "step", thread, "--agent", "uwf-mock", *args)
        assert (refused.code, refused.err_line) == (4, f"error: {busy}")

    stopped = cli_proc("thread", "stop", thread)
    assert (stopped.code, stopped.out, stopped.err) == (
        0,
        json.dumps({"thread": thread, "stopped": True}, separators=(",", ":")) + "\n",
        "",
    )
    # stopped means stopped: the run's process is gone and its log ends, at once
    assert not alive(run_pid)
    last = (root / "runs" / f"{thread}.log").read_text().splitlines()[-1]
    assert last.endswith("ended: stopped by `uwf thread stop`")
    for pid in (agent_pid, child_pid):  # no orphan: its agent, the agent's child
        wait_for(lambda pid=pid: not alive(pid), f"pid {pid} to be gone", timeout=10)
    shown = show(cli, thread)
    assert (shown["status"], shown["head"], shown["done"]) == ("idle", head, False)

    again = cli_proc("thread", "stop", thread)
    assert (again.code, again.json()) == (0, {"thread": thread, "stopped": False})
    assert again.err == f"warning: thread {thread} is not currently running\n"


def test_a_run_killed_with_sigkill_is_stale_and_stop_cleans_up_after_it(
    any_store: str, cli: Any, cli_proc: Any, new_thread: Any, scenario: Any, root: Path
) -> None:
    thread = new_thread()
    slow = scenario({"planner": [{"output": PLAN, "sleep": SLOW}]})
    run_pid = launch(cli_proc, thread, slow)["pid"]
    os.kill(run_pid, signal.SIGKILL)
    wait_for(lambda: show(cli, thread)["status"] == "idle", "the dead run to be seen as stale")
    assert "background" not in show(cli, thread)
    # its log still ends with why, written by its epitaph
    epitaph = (
        f"ended: its process (pid {run_pid}) died before it could end the run (SIGKILL, the "
        "OOM killer or a crash)"
    )
    wait_for(lambda: ended(root, thread).endswith(epitaph), "the run's last line", timeout=10)
    assert re.fullmatch(
        rf"uwf: \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{{3}}Z background run of thread {thread} "
        + re.escape(epitaph),
        ended(root, thread),
    )

    stopped = cli_proc("thread", "stop", thread)
    assert (stopped.code, stopped.json()) == (0, {"thread": thread, "stopped": False})
    assert stopped.err == (
        f"warning: thread {thread} is not currently running: its background run "
        f"(pid {run_pid}) died; its record was removed\n"
    )
    if any_store == "fs":
        assert (root / "locks" / f"{thread}.lock").read_bytes() == b""
    again = cli_proc("thread", "stop", thread)  # the record is gone, wherever it was kept
    assert again.err == f"warning: thread {thread} is not currently running\n"

    quick = scenario()
    launch(cli_proc, thread, quick, "-c", "1")  # the thread is free for a new run
    assert ended(root, thread).endswith("ended: 1 step ran (--count 1)")


def test_a_failing_step_ends_the_run_with_its_reason(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any, root: Path
) -> None:
    thread = new_thread()
    failing = scenario(
        {"planner": [PLAN], "developer": [{"exit": 1, "stderr": "error: out of tokens"}]},
        inprocess=False,
    )
    launch(cli_proc, thread, failing, "-c", "5")
    last = ended(root, thread)
    reason = "agent command failed (uwf-mock) with exit code 1: error: out of tokens"
    assert last.endswith(f"ended: failed: {reason}")
    log = (root / "runs" / f"{thread}.log").read_text().splitlines()
    assert log[-2] == f"error: {reason}"
    assert show(cli, thread)["steps"] == 1  # the planner's step landed; the head stayed there


def test_kill_during_a_run_ends_it(
    cli_proc: Any, new_thread: Any, agent_script: Any, tmp_path: Path, root: Path
) -> None:
    thread = new_thread()
    pids_file = tmp_path / "pids"
    run_pid = launch(cli_proc, thread, agent_script(GROUP_AGENT) + f" {pids_file}")["pid"]
    pids = wait_for(lambda: pids_file.exists() and pids_file.read_text(), "the agent's pids")
    assert cli_proc("thread", "kill", thread).code == 0  # returns once the run let go
    for pid in (run_pid, *map(int, pids.split())):
        wait_for(lambda pid=pid: not alive(pid), f"pid {pid} to be gone", timeout=10)
    assert ended(root, thread).endswith(
        f"ended: thread {thread} ended (killed) while its step ran; the agent was stopped"
    )


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--dry-run"], 2, "--background cannot be combined with --dry-run or --wait"),
        (["--wait"], 2, "--background cannot be combined with --dry-run or --wait"),
        (["-c", "0"], 2, "--count must be a positive integer, got: 0"),
        (["--timeout", "0"], 2, "--timeout must be a positive number of seconds, got: 0.0"),
    ],
)
def test_background_refusals(
    cli: Any, new_thread: Any, args: list[str], code: int, message: str, root: Path
) -> None:
    result: Result = cli("thread", "step", new_thread(), "--background", *args)
    assert (result.code, result.err_line) == (code, f"error: {message}")
    assert not (root / "runs").exists()


def test_background_and_stop_of_a_finished_thread(cli: Any, new_thread: Any) -> None:
    thread = new_thread()
    assert cli("thread", "kill", thread).code == 0
    not_active = f"error: thread not active: {thread} (status: killed)"
    result = cli("thread", "step", thread, "--background")
    assert (result.code, result.err_line) == (3, not_active)
    result = cli("thread", "stop", thread)
    assert (result.code, result.err_line, result.out) == (1, not_active, "")


# -- the loop, in-process on the memory backend ------------------------------------------------


@pytest.fixture
def memory(tmp_path: Path) -> tuple[MemoryBackend, ThreadId]:
    backend = MemoryBackend(tmp_path)
    workflows.put_workflow(backend, EXAMPLES / "solve-issue.yaml")
    return backend, ThreadId(threads.start(backend, "solve-issue", "Fix it")["thread"])


def run(backend: MemoryBackend, thread: str, count: int, **kw: Any) -> tuple[Any, list[Any]]:
    answers: list[Any] = []
    outputs: dict[str, list[Any]] = {
        "planner": [PLAN_OUT],
        "developer": [DEV_OUT],
        "reviewer": [APPROVE_OUT],
    }
    fake = scripted(backend, outputs)
    out = background.run(
        backend,
        thread,
        count=count,
        agent="fake",
        timeout=None,
        ready=answers.append,
        on_result=kw.get("on_result", lambda r: None),
        runner=fake,
    )
    return out, answers


def test_the_loop_holds_the_lock_as_a_background_run_and_stops_on_request(
    memory: tuple[MemoryBackend, ThreadId],
) -> None:
    backend, thread = memory
    seen: list[Any] = []

    def landed(result: StepResult) -> None:
        seen.append((result.role, backend.locks.holder(thread)))
        assert backend.locks.request_stop(thread) is not None  # as `thread stop` would

    out, answers = run(backend, thread, 10, on_result=landed)
    assert answers == [{"ok": True}]
    assert out == background.Ended(background.STOPPED, 0)
    [(role, holder)] = seen
    assert role == "planner" and holder.log == str(background.log_path(backend, thread))
    assert backend.locks.holder(thread) is None and backend.threads.head(thread) is not None


def test_the_loop_ends_at_count_at_the_end_and_when_refused(
    memory: tuple[MemoryBackend, ThreadId],
) -> None:
    backend, thread = memory
    assert run(backend, thread, 2)[0] == background.Ended("2 steps ran (--count 2)", 0)
    assert run(backend, thread, 5)[0] == background.Ended("the thread is completed (1 step ran)", 0)
    out, answers = run(backend, thread, 1)
    message = f"thread not active: {thread} (status: completed)"
    assert answers == [{"error": message, "code": 3}]
    assert out == background.Ended(f"failed: {message}", 3, message)

    other = ThreadId(threads.start(backend, "solve-issue", "Again")["thread"])
    with backend.locks.step(other, wait=False):
        out, answers = run(backend, other, 1)
    assert answers == [{"error": f"thread {other} is busy", "code": 4}]


def test_stop_without_a_signal_reaches_the_run_through_the_backend(
    memory: tuple[MemoryBackend, ThreadId],
) -> None:
    """A run on another machine gets no signal: the stop request in the backend ends it (here
    a memory backend, whose holders have no host, so `stop` sends none)."""
    backend, thread = memory
    head = backend.threads.head(thread)
    polled = threading.Event()

    def agent_until_stopped(plan: Any, env: Any, should_stop: Callable[[], bool]) -> Finished:
        while not should_stop():
            polled.set()
            time.sleep(0.01)
        return Finished(-15, "", "", stopped=True)

    ended: list[Any] = []
    runner = threading.Thread(
        target=lambda: ended.append(
            background.run(
                backend,
                thread,
                count=5,
                agent="fake",
                timeout=None,
                ready=lambda answer: None,
                on_result=lambda result: None,
                runner=agent_until_stopped,
            )
        )
    )
    runner.start()
    assert polled.wait(10)
    assert background.stop(backend, thread, wait=10) == ({"thread": thread, "stopped": True}, "")
    runner.join(10)
    assert ended == [background.Ended(background.STOPPED, 0)]
    assert backend.threads.head(thread) == head and backend.locks.holder(thread) is None
    assert background.stop(backend, thread) == (
        {"thread": thread, "stopped": False},
        f"thread {thread} is not currently running",
    )
