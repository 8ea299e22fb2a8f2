"""Python agents run in uwf's own process (docs/api.md, "Python agents").

The same contract as a process agent: the same StepNode (``uwf-mock`` in-process lands the
very nodes its process does), no process started, the worker and ``thread step`` run them,
and timeout, stop and kill — cooperative, since Python cannot kill a thread — fail the step
exactly as for a process, the head never moving for a late answer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

import uwf
from support import EXAMPLES
from uwf.model.agentcall import AgentCall
from uwf.testing import Clock, ScriptedAgent, answer

SCENARIO = EXAMPLES / "solve-issue.mock.yaml"
ROLES = ("planner", "developer", "reviewer", "developer", "reviewer")


def write_config(root: Path, **extra: Any) -> None:
    """Two aliases of uwf-mock on the example scenario: a process and a Python agent."""
    import yaml

    args = ["--scenario", str(SCENARIO)]
    config = {
        "agents": {
            "proc": {"command": "uwf-mock", "args": args},
            "inproc": {"python": "uwf-mock", "args": args},
        },
        "defaultAgent": "inproc",
        **extra,
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")


@pytest.fixture
def no_process(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Any process started from now on fails the test (it is recorded, then refused)."""
    started: list[Any] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        started.append(args)
        raise AssertionError(f"a process was started: {args}")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    return started


def test_uwf_mock_in_process_lands_the_very_steps_of_its_process(
    any_store: str, root: Path, cli: Any, cli_proc: Any, solve_issue: str, monkeypatch: Any
) -> None:
    # no automatic packing: after enough steps it packs in a process of its own, which is
    # the store's upkeep, not the step's (docs/architecture.md, "Automatic packing")
    write_config(root, autoPack=False)
    thread = cli("thread", "start", "solve-issue", "-p", "Fix the login bug").json()["thread"]
    twin = cli("thread", "fork", thread, "--at", "0").json()["thread"]
    by_process = cli_proc("thread", "step", thread, "-c", "5", "--agent", "proc")
    assert by_process.code == 0, by_process.err

    started: list[Any] = []
    real = subprocess.Popen

    def spy(*args: Any, **kwargs: Any) -> Any:
        started.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", spy)
    in_process = cli("thread", "step", twin, "-c", "5", "--agent", "inproc")
    assert in_process.code == 0, in_process.err
    assert started == []  # no agent process, no watchdog: nothing was started

    heads = [line["head"] for line in by_process.jsonl()]
    assert [line["role"] for line in in_process.jsonl()] == list(ROLES)
    assert [line["head"] for line in in_process.jsonl()] == heads  # the same StepNodes
    steps = cli("thread", "steps", twin).json()["steps"][1:]
    assert {s["agent"] for s in steps} == {"uwf-mock"}
    assert [s["hash"] for s in steps] == [
        s["hash"] for s in cli("thread", "steps", thread).json()["steps"][1:]
    ]
    assert cli("thread", "show", twin).json()["status"] == "completed"


def test_the_worker_steps_threads_with_in_process_agents(
    root: Path, cli: Any, solve_issue: str, no_process: list[Any]
) -> None:
    write_config(root)
    threads = [
        cli("thread", "start", "solve-issue", "-p", f"Task {n}").json()["thread"] for n in range(2)
    ]
    worked = cli("worker", "--max-steps", "10", "--idle-exit", "0", "--heartbeat", "60")
    assert worked.code == 0, worked.err
    lines = worked.jsonl()
    assert len(lines) == 10 and all("error" not in line for line in lines)
    assert {line["thread"] for line in lines} == set(threads)
    assert {cli("thread", "show", t).json()["status"] for t in threads} == {"completed"}
    assert no_process == []


def test_a_worker_process_runs_in_process_agents_too(
    root: Path, cli: Any, cli_proc: Any, solve_issue: str
) -> None:
    write_config(root)
    thread = cli("thread", "start", "solve-issue", "-p", "Fix it").json()["thread"]
    worked = cli_proc("worker", "--max-steps", "5", "--idle-exit", "0")
    assert worked.code == 0, worked.err
    assert [line["role"] for line in worked.jsonl()] == list(ROLES)
    log = "".join(p.read_text() for p in (root / "logs").glob("*.jsonl"))
    assert log.count("running in-process agent command=python:uwf-mock") == 5
    assert "spawning agent" not in log
    assert cli("thread", "show", thread).json()["status"] == "completed"


# -- outcomes, as a process's exit codes --------------------------------------------------------


def deferring(call: AgentCall, /) -> str:
    raise uwf.Deferred("a person must answer")


def crashing(call: AgentCall, /) -> str:
    assert call.stderr is not None
    call.stderr.write("thinking…\n")
    raise ValueError("boom")


def refusing(call: AgentCall, /) -> str:
    raise uwf.InvalidInput("no such file: plan.md")


def exiting(call: AgentCall, /) -> str:
    sys.exit(3)


def not_a_hash(call: AgentCall, /) -> Any:
    return {"status": "_"}


@pytest.fixture
def store(root: Path, solve_issue: str) -> Any:
    with uwf.open_store() as opened:
        yield opened


def test_a_python_agent_defers_as_a_process_that_exits_75(store: Any) -> None:
    thread = store.start("solve-issue", "Fix it").thread
    with pytest.raises(uwf.Deferred) as err:
        store.step(thread, agent=deferring)
    assert err.value.loop_code == 6 and "the agent deferred the step (a person must answer)" in (
        err.value.message
    )
    state = store.show(thread)
    assert state.status == "waiting" and state.waiting == uwf.Waiting(
        "planner", state.waiting.since, "a person must answer"
    )


@pytest.mark.parametrize(
    ("agent", "said"),
    [
        (crashing, "exit code 70: error: internal error: ValueError: boom"),
        (refusing, "exit code 1: error: no such file: plan.md"),
        (exiting, "exit code 3"),
        (
            not_a_hash,
            "exit code 1: error: a Python agent returns the hash of the StepNode it wrote, got "
            "dict; a function that returns its output is an agent with @uwf.agent (docs/api.md)",
        ),
    ],
)
def test_a_failing_python_agent_fails_the_step_as_a_process_would(
    store: Any, agent: Any, said: str, capfd: pytest.CaptureFixture[str]
) -> None:
    thread = store.start("solve-issue", "Fix it").thread
    head = store.show(thread).head
    with pytest.raises(uwf.AgentFailed) as err:
        store.step(thread, agent=agent)
    name = f"python:{__name__}:{agent.__name__}"
    assert err.value.message == f"Python agent failed ({name}) with {said}"
    assert uwf.exit_code(err.value, loop=True) == 5
    state = store.show(thread)
    assert state.head == head and state.status == "failing"
    assert state.failure is not None and (state.failure.code, state.failure.agent) == (5, name)
    if agent is crashing:  # its stderr is shown live, named, as a process agent's is
        assert f"{name}: thinking…\n" in capfd.readouterr().err


def test_a_function_agent_is_checked_against_the_role_schema(store: Any) -> None:
    @uwf.agent
    def half_a_plan(ctx: uwf.AgentContext) -> dict[str, Any]:
        return {"status": "_", "plan": "do it"}

    thread = store.start("solve-issue", "Fix it").thread
    with pytest.raises(uwf.AgentFailed) as err:
        store.step(thread, agent=half_a_plan)
    assert err.value.message.endswith(
        "error: agent output does not satisfy the role schema (steps: missing (expected a list "
        "of strings))"
    )

    @uwf.agent(label="pauser")
    def suspending(ctx: uwf.AgentContext) -> dict[str, Any]:
        return {"status": "$SUSPEND", "reason": "which database?"}

    with pytest.raises(uwf.Deferred):
        store.step(thread, agent=suspending)
    waiting = store.show(thread).waiting
    assert waiting is not None and waiting.reason == "$SUSPEND: which database?"


# -- timeout, kill: cooperative ------------------------------------------------------------------


def test_a_python_agent_that_ignores_its_timeout_is_left_behind_and_its_answer_ignored(
    store: Any,
) -> None:
    thread = store.start("solve-issue", "Fix it").thread
    head = store.show(thread).head
    began, release = threading.Event(), threading.Event()
    late: list[str] = []
    script = ScriptedAgent({"planner": [answer("Planned.", status="_", plan="p", steps=["a"])]})

    def stubborn(call: AgentCall, /) -> str:
        began.set()
        release.wait(30)  # never looks at call.should_stop()
        late.append(script(call))  # a valid StepNode, written after the step gave up
        return late[-1]

    failed: list[BaseException] = []
    with Clock() as clock:

        def step() -> None:
            try:
                store.step(thread, agent=stubborn, timeout=60)
            except BaseException as exc:  # the test reads it below
                failed.append(exc)

        stepping = threading.Thread(target=step)
        stepping.start()
        assert began.wait(10)
        clock.advance(61)  # an hour of the agent's thinking would be the same: no real wait
        stepping.join(10)
    assert not stepping.is_alive()
    [error] = failed
    assert isinstance(error, uwf.AgentFailed) and error.message == (
        f"agent timed out after 60s (python:{__name__}:{stubborn.__qualname__}); it was told "
        "to stop and "
        "whatever it answers now is ignored"
    )
    state = store.show(thread)
    assert state.head == head and state.failure is not None and state.failure.code == 5

    release.set()  # the agent answers at last: its StepNode is written, the head stays
    deadline = threading.Event()
    for _ in range(200):
        if late:
            break
        deadline.wait(0.05)
    assert late and store.backend.nodes.has(late[0]) and store.show(thread).head == head
    assert store.run(thread, agent=ScriptedAgent(ONE_ROLE_EACH)).outcome == "done"


ONE_ROLE_EACH = {
    "planner": [{"output": {"status": "_", "plan": "p", "steps": ["a"]}}],
    "developer": [{"output": {"status": "_", "filesChanged": ["a.py"], "summary": "s"}}],
    "reviewer": [{"output": {"status": "approved", "comments": "ok"}}],
}


def test_thread_kill_stops_a_cooperative_python_agent(store: Any) -> None:
    thread = store.start("solve-issue", "Fix it").thread
    began, saw = threading.Event(), threading.Event()

    def patient(call: AgentCall, /) -> str:
        began.set()
        while call.sleep(0.05):  # False once the step no longer wants the answer
            pass
        saw.set()
        raise uwf.UwfError("stopped, as asked")

    failed: list[BaseException] = []

    def step() -> None:
        try:
            store.step(thread, agent=patient)
        except BaseException as exc:  # the test reads it below
            failed.append(exc)

    stepping = threading.Thread(target=step)
    stepping.start()
    assert began.wait(10)
    store.kill(thread)  # returns once the step let go of the thread
    stepping.join(10)
    assert saw.wait(10)
    [error] = failed
    assert isinstance(error, uwf.NotActive) and error.message == (
        f"thread {thread} ended (killed) while its step ran; the agent was stopped"
    )
    assert store.show(thread).status == "killed"


# -- naming agents -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "said"),
    [
        (
            "python:nowhere.at.all:agent",
            "cannot load the Python agent nowhere.at.all:agent: ModuleNotFoundError: No module "
            "named 'nowhere'",
        ),
        (
            "python:no-such-agent",
            "no Python agent named no-such-agent: expected package.module:function, or the "
            "name of an entry point of the uwf.agents group",
        ),
        ("python:os:sep", "the Python agent os:sep is not callable"),
    ],
)
def test_a_python_agent_that_cannot_be_loaded_is_a_configuration_error(
    cli: Any, new_thread: Any, agent: str, said: str
) -> None:
    thread = new_thread()
    r = cli("thread", "step", thread, "--agent", agent)
    assert (r.code, r.err_line) == (1, f"error: {said}")


def test_a_python_agent_gets_the_step_environment_and_changes_none_of_uwf(
    root: Path, store: Any
) -> None:
    (root / ".env").write_text("FROM_DOTENV=dotenv-value\n", encoding="utf-8")
    seen: dict[str, Any] = {}

    @uwf.agent
    def look(ctx: uwf.AgentContext) -> dict[str, Any]:
        seen.update(
            dotenv=ctx.env.get("FROM_DOTENV"),
            prompt=ctx.env.get("UWF_EDGE_PROMPT"),
            cwd=ctx.cwd,
            artifacts=ctx.artifacts_dir,
        )
        return {"status": "_", "plan": "p", "steps": ["a"]}

    work = root.parent / "elsewhere"
    work.mkdir()
    thread = store.start("solve-issue", "Fix it", cwd=work).thread
    store.step(thread, agent=look)
    assert seen["dotenv"] == "dotenv-value" and "FROM_DOTENV" not in os.environ
    landed = store.backend.nodes.require(store.steps(thread).steps[0].hash)
    assert seen["prompt"] == landed.payload["edgePrompt"] != ""
    assert seen["cwd"] == work and Path.cwd() != work  # the step's, never the process's
    assert seen["artifacts"] is not None and not seen["artifacts"].exists()  # removed after


def test_the_clock_skips_a_retry_back_off(root: Path, store: Any) -> None:
    """A step that failed backs off for an hour (its retry policy); moving uwf's clock past
    it makes the thread a candidate again, with no waiting."""
    (root / "config.yaml").write_text("retry: {backoff: 3600, maxBackoff: 3600}\n")
    thread = store.start("solve-issue", "Fix it").thread
    flaky = ScriptedAgent(
        {
            **ONE_ROLE_EACH,
            "planner": [
                {
                    "attempts": [
                        {"exit": 1, "stderr": "error: rate limited"},
                        ONE_ROLE_EACH["planner"][0],
                    ]
                }
            ],
        }
    )
    with Clock() as clock:
        with pytest.raises(uwf.AgentFailed):
            store.step_next(agent=flaky)
        failure = store.show(thread).failure
        assert failure is not None and failure.retry_at == clock.now_ms() + 3_600_000
        assert store.step_next(agent=flaky) is None  # backing off
        clock.advance(3601)
        landed = store.step_next(agent=flaky)
    assert landed is not None and landed.role == "planner"
    assert store.show(thread).failure is None


def test_json_lines_of_an_in_process_step_say_what_a_process_step_says(
    root: Path, cli: Any, new_thread: Any
) -> None:
    write_config(root)
    thread = new_thread()
    r = cli("thread", "step", thread)
    assert r.code == 0, r.err
    line = json.loads(r.out)
    assert set(line) == {"workflow", "thread", "head", "role", "done", "status"}
    plan = cli("thread", "step", thread, "--dry-run").json()
    assert plan["agent"][:3] == ["python:uwf-mock", "--scenario", str(SCENARIO)]
