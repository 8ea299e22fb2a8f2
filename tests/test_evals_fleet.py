"""``uwf eval run --fleet`` and ``--local-workers N`` on both backends: the runs' threads are
stepped by real ``uwf worker`` processes, and each run ends, is judged and recorded as the
in-process path does it — completed, max_rounds, failed, waiting, timeout (docs/evals.md,
"Runs on a fleet")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import BIN, EXAMPLES, given
from test_evals import BUILTINS, evalrun, judged
from uwf.backend import open_backend
from uwf.engine.evals.fleet import FleetOptions
from uwf.engine.evals.run import run_tasks
from uwf.util.errors import UwfError

pytestmark = pytest.mark.usefixtures("any_store")  # the filesystem and PostgreSQL

SUITE = EXAMPLES / "evals"
TASKS = [str(SUITE / "tasks" / "fix-add"), str(SUITE / "tasks" / "fix-max")]
SHARED = ("--allow-outside", str(SUITE))  # the tasks share a workflow and a judge


@pytest.fixture
def task(tmp_path: Path, cli: Any) -> Any:
    """A solve-issue task folder with this spec (merged into a default)."""
    assert cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
    counter = iter(range(100))

    def make(fixture: dict[str, str] | None = None, **spec: Any) -> Path:
        folder = tmp_path / "tasks" / f"task{next(counter)}"
        folder.mkdir(parents=True)
        for name, text in (fixture or {}).items():
            (folder / "fixture").mkdir(exist_ok=True)
            (folder / "fixture" / name).write_text(text)
        body = {"workflow": "solve-issue", "prompt": "Fix it.", "judges": BUILTINS, **spec}
        (folder / "task.yaml").write_text(yaml.safe_dump(body, sort_keys=False))
        return folder

    return make


def same_run(run: dict[str, Any]) -> dict[str, Any]:
    """What two runs of one deterministic agent share: all but ids, times and the agent
    command line (each judge's data too, less the cost judge's times)."""
    verdicts = []
    for j in run["judges"]:
        data = j["data"]
        if j["name"] == "cost":
            data = {k: v for k, v in data.items() if k not in ("durationMs", "wallMs")}
        verdicts.append({**j, "data": data})
    kept = ("task", "taskFile", "workflow", "workflowName", "start", "agents", "models")
    return {
        **{k: run[k] for k in kept},
        "outcome": run["outcome"],
        "error": run.get("error"),
        "judges": verdicts,
        "score": run["score"],
    }


def test_two_workers_run_two_tasks_twice_as_the_in_process_path_does(
    cli_proc: Any, cli: Any, agent_script: Any, tmp_path: Path
) -> None:
    """examples/evals' two tasks, twice each, stepped by two local workers: the same lines,
    nodes and scores as in-process, and both workers stepped runs."""
    parents = tmp_path / "parents"
    fixer = agent_script(
        f"open({str(parents)!r}, 'a').write(f'{{os.getppid()}}\\n')\n"
        "time.sleep(0.5)\n"
        f"os.execvp('uwf-cmd', ['uwf-cmd', '--', 'sh', {str(SUITE / 'agents' / 'fixer.sh')!r}]"
        " + sys.argv[1:])\n"
    )
    here = cli_proc("eval", "run", *TASKS, *SHARED, "--count", "2", "--agent", fixer)
    assert here.code == 0, here.err
    parents.unlink()
    fleet = cli_proc(
        "eval", "run", *TASKS, *SHARED, "--count", "2", "--agent", fixer, "--local-workers", "2"
    )
    assert fleet.code == 0, fleet.err
    assert fleet.err == ""

    def shape(lines: list[dict[str, Any]]) -> list[Any]:
        return sorted(
            (x["task"], x["outcome"], x["score"], sorted(x["judges"].items()), sorted(x))
            for x in lines
        )

    assert len(fleet.jsonl()) == 4 and len({x["batch"] for x in fleet.jsonl()}) == 1
    assert shape(fleet.jsonl()) == shape(here.jsonl())
    assert {x["judges"]["tests"] for x in fleet.jsonl()} == {1}
    nodes = [
        sorted((same_run(evalrun(cli, x["run"])) for x in r.jsonl()), key=repr)
        for r in (here, fleet)
    ]
    assert nodes[0] == nodes[1]
    assert all(evalrun(cli, x["run"])["agent"] == fixer for x in fleet.jsonl())
    workers = set(parents.read_text().split())
    assert len(workers) == 2 and str(os.getpid()) not in workers
    assert cli("thread", "list").json() == []  # every run's thread ended
    found = cli("eval", "diff", here.jsonl()[0]["batch"], fleet.jsonl()[0]["batch"]).json()
    assert [t["score"]["delta"] for t in found["tasks"]] == [0, 0]


def test_max_steps_is_counted_by_the_workers_as_in_process(
    cli_proc: Any, cli: Any, task: Any, scenario: Any
) -> None:
    folder = task(limits={"maxSteps": 2})
    agent = scenario()
    [here] = cli_proc("eval", "run", folder, "--agent", agent).jsonl()
    result = cli_proc("eval", "run", folder, "--agent", agent, "--local-workers", "2")
    assert result.code == 0, result.err
    [line] = result.jsonl()
    assert line["outcome"] == "max_rounds" and line["judges"] == here["judges"]
    run = evalrun(cli, line["run"])
    assert judged(run)["outcome"]["data"] == {"outcome": "max_rounds", "steps": 2}
    assert same_run(run) == same_run(evalrun(cli, here["run"]))
    assert cli("thread", "show", line["thread"]).json()["status"] == "max_rounds"


def test_a_failed_step_ends_its_run_failed_and_scored(
    cli_proc: Any, cli: Any, task: Any, scenario: Any, agent_script: Any
) -> None:
    """The first failure a worker records ends the run (no retry is waited for), with the
    error the in-process path records; the other task's run goes on to the end."""
    failing, fine = task(fixture={"fail.txt": "x"}), task()
    mock = scenario(inprocess=False).split()
    agent = agent_script(
        "if os.path.exists('fail.txt'):\n    sys.exit('error: rate limited')\n"
        f"os.execvp({mock[0]!r}, {mock!r} + sys.argv[1:])\n"
    )
    [here] = cli_proc("eval", "run", failing, "--agent", agent).jsonl()
    result = cli_proc(
        "eval",
        "run",
        failing,
        fine,
        "--agent",
        agent,
        "--local-workers",
        "2",
        "--wait-timeout",
        "60",
    )
    assert result.code == 0, result.err
    by_task = {x["task"]: x for x in result.jsonl()}
    line = by_task[failing.name]
    assert (line["outcome"], line["score"]) == ("failed", 0)
    assert by_task[fine.name]["outcome"] == "completed"
    run = evalrun(cli, line["run"])
    assert run["error"] == (
        f"agent command failed ({sys.executable}) with exit code 1: error: rate limited"
    )
    assert same_run(run) == same_run(evalrun(cli, here["run"]))
    assert cli("thread", "show", line["thread"]).json()["status"] == "killed"


def test_a_run_waiting_for_a_person_ends_waiting(
    cli_proc: Any, cli: Any, task: Any, agent_script: Any
) -> None:
    deferring = agent_script("print('error: a person must answer', file=sys.stderr)\nsys.exit(75)")
    result = cli_proc("eval", "run", task(), "--agent", deferring, "--local-workers", "1")
    assert result.code == 0, result.err
    [line] = result.jsonl()
    assert line["outcome"] == "waiting" and line["score"] == 0
    thread = line["thread"]
    assert evalrun(cli, line["run"])["error"] == (
        f"thread {thread} waits for planner: the agent deferred the step (a person must "
        f"answer); answer it with uwf thread answer {thread}, or step it again later"
    )
    assert cli("thread", "show", thread).json()["status"] == "killed"


def test_timeout_minutes_kills_the_thread_a_worker_steps(
    cli_proc: Any, cli: Any, task: Any, agent_script: Any, tmp_path: Path
) -> None:
    marker = tmp_path / "agent-ran"
    sleeper = agent_script(f"open({str(marker)!r}, 'w').write('x')\ntime.sleep(60)")
    folder = task(limits={"timeoutMinutes": 0.05})
    result = cli_proc("eval", "run", folder, "--agent", sleeper, "--local-workers", "1")
    assert result.code == 0, result.err
    [line] = result.jsonl()
    assert (line["outcome"], line["score"]) == ("timeout", 0)
    run = evalrun(cli, line["run"])
    assert run["error"] == "passed limits.timeoutMinutes (0.05)" and run["durationMs"] < 20_000
    assert marker.exists()  # the worker's agent was running when the run ended
    assert cli("thread", "show", line["thread"]).json()["status"] == "killed"
    with open_backend() as backend:
        assert backend.locks.running() == set()


def test_fleet_waits_for_outside_workers_and_wait_timeout_guards_it(
    cli_proc: Any, cli: Any, task: Any, scenario: Any
) -> None:
    """--fleet steps nothing: the runs end when outside `uwf worker`s step them; without
    any, --wait-timeout ends them as timeout."""
    folder = task()
    alone = cli_proc("eval", "run", folder, "--fleet", "--wait-timeout", "0.5")
    assert alone.code == 0, alone.err
    [line] = alone.jsonl()
    assert line["outcome"] == "timeout"
    run = evalrun(cli, line["run"])
    assert run["error"] == "passed --wait-timeout (0.5 s)" and run["agent"] is None
    assert cli("thread", "show", line["thread"]).json()["steps"] == 0

    eval_run = subprocess.Popen(
        [str(BIN / "uwf"), "eval", "run", folder, folder, "--fleet", "--wait-timeout", "120"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while len(started := cli("thread", "list").json()) < 2:  # both threads started: the fleet
        assert time.monotonic() < deadline and eval_run.poll() is None
        time.sleep(0.05)
    runs = given([t["thread"] for t in started])
    workers = [
        subprocess.Popen([str(BIN / "uwf"), "worker", *runs, "--agent", scenario()])
        for _ in range(2)
    ]
    out, err = eval_run.communicate(timeout=120)
    for worker in workers:
        assert worker.wait(timeout=60) == 0
    assert eval_run.returncode == 0, err
    lines = [json.loads(x) for x in out.splitlines()]
    assert [x["outcome"] for x in lines] == ["completed", "completed"]
    assert [x["score"] for x in lines] == [1, 1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--fleet", "--agent", "uwf-mock"],
            "--agent with --fleet needs --local-workers: a "
            "fleet's workers step with their own agents (uwf worker --agent, or config.yaml)",
        ),
        (["--local-workers", "0"], "--local-workers must be between 1 and 64, got: 0"),
        (["--local-workers", "65"], "--local-workers must be between 1 and 64, got: 65"),
        (["--wait-timeout", "5"], "--wait-timeout needs --fleet or --local-workers"),
        (
            ["--fleet", "--wait-timeout", "0"],
            "--wait-timeout must be a positive number of seconds, got: 0",
        ),
    ],
)
def test_fleet_usage_errors(
    cli_proc: Any, cli: Any, task: Any, args: list[str], message: str
) -> None:
    result = cli_proc("eval", "run", task(), *args)
    assert (result.code, result.out, result.err) == (2, "", f"error: {message}\n")
    assert cli("thread", "list").json() == []


def test_workers_that_stop_early_fail_the_eval_and_leave_no_thread(
    task: Any, tmp_path: Path
) -> None:
    """Local workers that exit before the runs end (here: a command that fails at once):
    an error naming their exit codes and last line; the runs' threads are killed and their
    directories removed."""
    folder = task()
    failing = (sys.executable, "-c", "import sys; sys.exit('error: cannot reach the store')")
    with open_backend() as backend:
        with pytest.raises(UwfError) as raised:
            run_tasks(
                backend,
                [str(folder)],
                count=2,
                fleet=FleetOptions(local_workers=2, worker=failing),
            )
        assert raised.value.message == (
            "every local worker exited before the runs ended (exit 1, 1): "
            "error: cannot reach the store"
        )
        assert backend.threads.active() == []
        assert [e.status for e in backend.threads.history()] == ["killed", "killed"]


def test_worker_thread_steps_only_those_threads_and_stops_when_they_end(
    cli_proc: Any, cli: Any, new_thread: Any, scenario: Any
) -> None:
    mine, other = new_thread("mine"), new_thread("other")
    r = cli_proc("worker", "--thread", mine, "--agent", scenario())
    assert r.code == 0, r.err
    assert {x["thread"] for x in r.jsonl()} == {mine} and len(r.jsonl()) == 5
    assert r.err.splitlines() == [
        "worker: every thread it was given has ended: stopping",
        "worker: 5 steps, 0 failed",
    ]
    assert cli("thread", "show", other).json()["steps"] == 0
    bad = cli_proc("worker", "--thread", "nope")
    assert (bad.code, bad.err) == (
        1,
        'error: invalid thread id: "nope" (expected a 26-character ULID)\n',
    )


def test_family_covers_the_threads_given_and_their_fan_outs_children() -> None:
    from uwf.backend.base import ActiveThread, ThreadInfo
    from uwf.engine.step.fleet import family
    from uwf.util.base32 import NodeHash
    from uwf.util.ulid import ThreadId, new_thread_id

    a, b, child, grandchild, stranger = (ThreadId(new_thread_id()) for _ in range(5))
    head = NodeHash("0" * 13)
    records = [
        ActiveThread(a, head),
        ActiveThread(b, head),
        ActiveThread(child, head, ThreadInfo(parent=a)),
        ActiveThread(grandchild, head, ThreadInfo(parent=child)),
        ActiveThread(stranger, head, ThreadInfo(parent=b)),
    ]
    assert family(records, frozenset({a})) == {a, child, grandchild}
    assert family(records, frozenset({child, b})) == {child, grandchild, b, stranger}


def test_a_fan_out_run_is_stepped_with_its_children(
    cli_proc: Any, cli: Any, task: Any, scenario: Any
) -> None:
    """examples/plan-parallel.yaml: the local workers step the children the run's fan-out
    starts (uwf worker --thread covers them), and the parent's join ends the run."""
    for name in ("dev-task", "plan-parallel"):
        assert cli("workflow", "put", str(EXAMPLES / f"{name}.yaml")).code == 0
    roles = yaml.safe_load((EXAMPLES / "plan-parallel.mock.yaml").read_text())["roles"]
    folder = task(workflow="plan-parallel")
    result = cli_proc("eval", "run", folder, "--agent", scenario(roles), "--local-workers", "3")
    assert result.code == 0, result.err
    [line] = result.jsonl()
    assert (line["outcome"], line["score"]) == ("completed", 1)
    assert cli("thread", "list").json() == []  # the children ended too
