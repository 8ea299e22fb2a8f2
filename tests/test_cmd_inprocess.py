"""`python: uwf-cmd`: uwf-cmd run in uwf's own process (docs/agents.md, uwf-cmd; docs/api.md,
"Python agents"), one interpreter fewer per step.

The same contract as the `uwf-cmd` process: the same arguments, the command run with the
same environment (credentials and secrets left out), prompt and directory, the same StepNode,
output, turns and detail (all but the measured duration); the command is still a process
of its own — its own group, killed when the step stops wanting the answer (a timeout, `thread
kill`) while uwf runs on.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import DEV, PLAN, wait_dead
from uwf.backend import open_backend

RECORDER = """\
import json, os, sys
given = sys.stdin.read()
keys = ("UWF_THREAD", "UWF_ROLE", "UWF_EDGE_PROMPT", "WORKFLOW_STORAGE_ROOT", "TEAM_TOKEN",
        "SHOWN", "UWF_ARTIFACTS_DIR")
record = {{"argv": sys.argv[1:], "stdin": given, "cwd": os.getcwd(),
          "env": {{k: os.environ.get(k) for k in keys}}, "names": sorted(os.environ)}}
with open({log!r}, "a") as f:
    f.write(json.dumps(record) + "\\n")
sys.stderr.write("working on " + os.environ["UWF_ROLE"] + "\\n")
print({outputs!r}[os.environ["UWF_ROLE"]])
"""


def write_recorder(tmp_path: Path) -> tuple[Path, list[str]]:
    log = tmp_path / "calls.jsonl"
    script = tmp_path / "recorder.py"
    script.write_text(RECORDER.format(log=str(log), outputs={"planner": PLAN, "developer": DEV}))
    return log, ["--", sys.executable, str(script), "{role}"]


def write_config(root: Path, args: list[str]) -> None:
    """Two aliases of uwf-cmd on one command, a process and a Python agent; a secret."""
    agents = {"proc": {"command": "uwf-cmd", "args": args}, "inproc": {"python": "uwf-cmd"}}
    agents["inproc"]["args"] = args
    config = {"agents": agents, "secrets": ["TEAM_TOKEN"], "autoPack": False}
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")


def without_durations(detail: dict[str, Any]) -> dict[str, Any]:
    """A detail without what it measured: the duration of its step and of the chain."""
    total = {k: v for k, v in detail["total"].items() if k != "durationMs"}
    return {**{k: v for k, v in detail.items() if k != "durationMs"}, "total": total}


def test_uwf_cmd_in_process_runs_the_command_as_its_process_does(
    any_store: str,
    root: Path,
    cli: Any,
    cli_proc: Any,
    solve_issue: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log, args = write_recorder(tmp_path)
    write_config(root, args)
    monkeypatch.setenv("TEAM_TOKEN", "s3cr3t-team-token-value")  # listed under secrets:
    monkeypatch.setenv("SHOWN", "plain")
    thread = cli("thread", "start", "solve-issue", "-p", "Fix the login bug").json()["thread"]
    twin = cli("thread", "fork", thread, "--at", "0").json()["thread"]
    by_process = cli_proc("thread", "step", thread, "-c", "2", "--agent", "proc")
    assert by_process.code == 0, by_process.err
    proc_calls = [json.loads(line) for line in log.read_text().splitlines()]
    log.unlink()

    started: list[list[str]] = []
    real = subprocess.Popen

    def spy(argv: Any, *rest: Any, **kwargs: Any) -> Any:
        started.append(list(argv))
        return real(argv, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", spy)
    in_process = cli("thread", "step", twin, "-c", "2", "--agent", "inproc")
    assert in_process.code == 0, in_process.err
    commands = [a for a in started if a[:2] == [sys.executable, args[2]]]
    assert len(commands) == 2  # the command, once a step: no uwf-cmd process
    assert not [a for a in started if any("uwf-cmd" in word for word in a)]
    assert [json.loads(line)["role"] for line in in_process.out.splitlines()] == [
        "planner",
        "developer",
    ]
    # its stderr is the agent's, shown live under the alias's command
    assert "python:uwf-cmd: working on planner\n" in in_process.err
    assert "uwf-cmd: working on planner\n" in by_process.err

    # the command got the same arguments, prompt, directory and environment (the secret left
    # out both ways, the same variables set); only the thread and its artifacts directory
    # are the twin's
    in_calls = [json.loads(line) for line in log.read_text().splitlines()]
    for ran in (*proc_calls, *in_calls):
        assert ran["env"]["TEAM_TOKEN"] is None and ran["env"]["SHOWN"] == "plain"
        assert ran["env"]["UWF_ARTIFACTS_DIR"]
    for ran in in_calls:
        assert ran["env"]["UWF_THREAD"] == twin
        ran["env"]["UWF_THREAD"] = thread
        ran["env"]["UWF_ARTIFACTS_DIR"] = None
        ran["stdin"] = ran["stdin"].replace(twin, thread)
    for ran in proc_calls:
        ran["env"]["UWF_ARTIFACTS_DIR"] = None
    assert in_calls == proc_calls  # the very same variables too ("names")

    # the same StepNodes: the same output, turns, agent and detail, all but the durations
    # the detail measured (which make their hashes differ); the same hashes for the rest
    with open_backend(os.environ.get("UWF_STORE") or str(root)) as backend:
        nodes = backend.nodes

        def landed(t: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
            found = []
            for step in cli("thread", "steps", t).json()["steps"][1:]:
                payload = dict(nodes.require(step["hash"]).payload)
                detail = nodes.require(payload.pop("detail"))
                payload.pop("prev")
                found.append((payload, {"type": detail.type, **without_durations(detail.payload)}))
            return found

        assert landed(twin) == landed(thread)
        assert [p["agent"] for p, _ in landed(twin)] == ["uwf-cmd", "uwf-cmd"]


def sleeper(tmp_path: Path) -> tuple[Path, Path]:
    """A command that starts a child, writes both pids to a file and sleeps a minute."""
    pidfile = tmp_path / "command.pid"
    script = tmp_path / "slow.py"
    script.write_text(
        "import os, subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pidfile) + '.tmp'!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        f"os.rename({str(pidfile) + '.tmp'!r}, {str(pidfile)!r})\n"
        "time.sleep(60)\n"
    )
    return pidfile, script


def test_agent_flag_runs_uwf_cmd_in_process_and_a_timeout_kills_the_command_at_once(
    root: Path, cli: Any, new_thread: Any, tmp_path: Path
) -> None:
    """``--agent "python:uwf-cmd -- <command…>"``; at the step's timeout the command's group
    is killed while uwf runs on (here: the test's own process), not when uwf exits."""
    pidfile, script = sleeper(tmp_path)
    thread = new_thread()
    agent = shlex.join(["python:uwf-cmd", "--", sys.executable, str(script)])
    began = time.monotonic()
    r = cli("thread", "step", thread, "--agent", agent, "--timeout", "2")
    assert r.code == 5, r.err
    assert r.err.splitlines()[-1] == (
        "error: agent timed out after 2s (python:uwf-cmd); it was told to stop and whatever it "
        "answers now is ignored"
    )
    assert cli("thread", "steps", thread).json()["steps"][1:] == []
    assert pidfile.exists()
    for pid in map(int, pidfile.read_text().split()):  # the command and what it started
        wait_dead(pid, timeout=5)
    assert time.monotonic() - began < 15


def test_thread_kill_kills_the_command_of_an_in_process_uwf_cmd(
    root: Path, cli: Any, cli_proc: Any, new_thread: Any, tmp_path: Path
) -> None:
    """``thread kill`` (another process) ends the step: the command's group is killed at
    once, while the stepping process runs on."""
    import threading

    pidfile, script = sleeper(tmp_path)
    thread = new_thread()
    agent = shlex.join(["python:uwf-cmd", "--", sys.executable, str(script)])
    stepped: list[Any] = []
    stepping = threading.Thread(
        target=lambda: stepped.append(cli("thread", "step", thread, "--agent", agent))
    )
    stepping.start()
    deadline = time.monotonic() + 30
    while not pidfile.exists() or len(pidfile.read_text().split()) < 2:
        assert time.monotonic() < deadline, "the command did not start"
        time.sleep(0.02)
    killed = cli_proc("thread", "kill", thread)
    assert killed.code == 0, killed.err
    for pid in map(int, pidfile.read_text().split()):  # the command and what it started
        wait_dead(pid, timeout=5)
    stepping.join(30)
    [r] = stepped
    assert r.code != 0 and r.err.splitlines()[-1] == (
        f"error: thread {thread} ended (killed) while its step ran; the agent was stopped"
    )


def test_the_command_dies_with_uwf_killed_by_sigkill(new_thread: Any, tmp_path: Path) -> None:
    """uwf killed with SIGKILL mid-step (nothing of it runs on to stop anything): the
    command and what it started die too (its group, through uwf's watchdog)."""
    import signal

    from support import BIN

    pidfile, script = sleeper(tmp_path)
    thread = new_thread()
    agent = shlex.join(["python:uwf-cmd", "--", sys.executable, str(script)])
    uwf = subprocess.Popen(
        [str(BIN / "uwf"), "thread", "step", thread, "--agent", agent],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not pidfile.exists():
            assert time.monotonic() < deadline and uwf.poll() is None, "the command did not start"
            time.sleep(0.02)
        uwf.send_signal(signal.SIGKILL)
        assert uwf.wait(10) == -signal.SIGKILL
        for pid in map(int, pidfile.read_text().split()):  # the command and what it started
            wait_dead(pid, timeout=10)
    finally:
        if uwf.poll() is None:
            uwf.kill()
            uwf.wait(10)


def test_python_uwf_cmd_without_a_command_is_the_usage_error_of_the_process(
    cli: Any, new_thread: Any
) -> None:
    thread = new_thread()
    r = cli("thread", "step", thread, "--agent", "python:uwf-cmd --")
    assert r.code == 5, r.err
    assert r.err.splitlines()[-1] == (
        "error: Python agent failed (python:uwf-cmd) with exit code 2: error: no command to "
        "run; usage: uwf-cmd -- <command> [args…] <thread-id> <role>"
    )


def test_uwfs_own_python_agents_are_found_as_their_entry_points_name_them() -> None:
    """``python: uwf-cmd`` (uwf-mock, uwf-builtin) is found without reading every installed
    package's metadata (``OWN``): the very callables pyproject's entry points name."""
    import tomllib
    from importlib.metadata import entry_points

    from uwf.engine.step import inproc

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    declared = pyproject["project"]["entry-points"][inproc.ENTRY_POINTS]
    assert declared == inproc.OWN
    installed = {e.name: e.value for e in entry_points(group=inproc.ENTRY_POINTS)}
    assert {name: installed[name] for name in inproc.OWN} == inproc.OWN
    for name, ref in inproc.OWN.items():
        module, _, attribute = ref.partition(":")
        assert inproc.resolve(name) is getattr(__import__(module, fromlist=["_"]), attribute)


def test_a_failing_command_fails_the_step_quoting_its_stderr_as_the_process_does(
    cli: Any, root: Path, new_thread: Any, tmp_path: Path
) -> None:
    script = tmp_path / "fail.py"
    script.write_text(
        "import sys\nprint('partial output')\nprint('noise', file=sys.stderr)\n"
        "print('boom: disk on fire', file=sys.stderr)\nsys.exit(3)\n"
    )
    thread = new_thread()
    said = f"error: command failed ({sys.executable}) with exit code 3: noise boom: disk on fire"
    for agent, failed in (
        ("uwf-cmd", "agent command failed"),
        ("python:uwf-cmd", "Python agent failed"),
    ):
        r = cli(
            "thread",
            "step",
            thread,
            "--agent",
            shlex.join([agent, "--", sys.executable, str(script)]),
        )
        assert r.code == 5, r.err
        assert f"{agent}: noise\n{agent}: boom: disk on fire\n" in r.err  # shown live
        assert r.err.splitlines()[-1] == f"error: {failed} ({agent}) with exit code 1: {said}"
        assert cli("thread", "steps", thread).json()["steps"][1:] == []
