"""Fan-out and join (docs/format.md, "Fan-out and join"), through the real CLI with uwf-mock,
on both backends: an edge starts one child thread per item, the parent waits for them, the
next role joins their results, and workers step the children concurrently while the parent
resumes exactly once."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import EXAMPLES, given, reap, spawn_uwf

pytestmark = pytest.mark.usefixtures("any_store")  # the filesystem and PostgreSQL

SCENARIO = yaml.safe_load((EXAMPLES / "plan-parallel.mock.yaml").read_text())["roles"]
PLANNER = SCENARIO["planner"][0]
TASKS = ["Validate the signup form", "Validate the login form", "Validate the password reset form"]


@pytest.fixture
def parallel(cli: Any) -> Any:
    """Register examples/dev-task.yaml and examples/plan-parallel.yaml; a function that starts
    a plan-parallel thread and returns its id."""
    for name in ("dev-task", "plan-parallel"):
        assert cli("workflow", "put", str(EXAMPLES / f"{name}.yaml")).code == 0

    def start(prompt: str = "Add validation to the forms") -> str:
        result = cli("thread", "start", "plan-parallel", "-p", prompt)
        assert result.code == 0, result.err
        return str(result.json()["thread"])

    return start


def payload(cli: Any, h: str) -> Any:
    return cli("cas", "get", h).json()["payload"]


def test_the_planner_step_starts_one_child_per_item_and_the_parent_waits(
    cli: Any, parallel: Any, scenario: Any
) -> None:
    parent = parallel()
    agent = scenario(SCENARIO, inprocess=True)
    r = cli("thread", "step", parent, "--agent", agent)
    assert r.code == 0, r.err
    line = r.json()
    children = line["children"]
    assert (line["role"], line["status"], len(children)) == ("planner", "active", 3)
    listed = {t["thread"]: t for t in cli("thread", "list").json()}
    assert [listed[c]["task"] for c in children] == TASKS
    assert {listed[c]["status"] for c in children} == {"idle"}
    assert listed[parent]["status"] == "waiting"
    assert listed[parent]["waiting"]["reason"] == "children"
    assert listed[parent]["waiting"]["role"] == "reviewer"
    dev_task = cli("workflow", "show", "dev-task").json()["hash"]
    assert {listed[c]["workflow"] for c in children} == {dev_task}

    waits = cli("thread", "step", parent, "--agent", agent)
    assert (waits.code, waits.out) == (6, "")
    assert waits.err == (
        f"error: thread {parent} waits for its children: 3 of 3 still active "
        f"({', '.join(children)})\n"
    )
    assert cli("thread", "show", parent).json()["steps"] == 1  # nothing ran


def test_the_join_gets_every_childs_result_and_records_their_heads(
    cli: Any, parallel: Any, scenario: Any
) -> None:
    parent = parallel()
    agent = scenario(SCENARIO, inprocess=True)
    children = cli("thread", "step", parent, "--agent", agent).json()["children"]
    finals = []
    for child in children:
        r = cli("thread", "step", child, "--agent", agent)
        assert (r.code, r.json()["status"]) == (0, "completed"), r.err
        finals.append(r.json()["head"])
    joined = cli("thread", "step", parent, "--agent", agent)
    assert joined.code == 0, joined.err
    assert (joined.json()["role"], joined.json()["status"]) == ("reviewer", "completed")
    step = payload(cli, joined.json()["head"])
    assert step["children"] == finals  # item order
    assert step["edgePrompt"] == (
        "Review the results of the tasks of this plan: Validate each form on the server and "
        "show the errors next to its fields.\n"
        + "".join(f"- {task} -> completed: Validation added with tests.\n" for task in TASKS)
    )
    node = cli("cas", "get", joined.json()["head"]).json()
    titles = {s["hash"]: s["title"] for s in cli("cas", "schema", "list").json()}
    assert titles[node["type"]] == "StepNode (join)"
    assert cli("cas", "verify").json()["ok"] is True
    read = cli("thread", "read", parent).out  # the join names the steps it joined
    listed = "".join(f"- `{head}` `{task}`\n" for head, task in zip(finals, TASKS, strict=True))
    assert (
        "**Joined children** (their last steps: `uwf step read <hash>`):\n" + listed.rstrip("\n")
    ) in read


def test_three_workers_step_the_children_concurrently_and_resume_the_parent_once(
    cli: Any, parallel: Any, scenario: Any, tmp_path: Path
) -> None:
    roles = dict(SCENARIO)
    roles["developer"] = [{**SCENARIO["developer"][0], "sleep": 1.5}]
    agent = scenario(roles, inprocess=True)
    parent = parallel()
    workers = [spawn_uwf("worker", *given([parent]), "--agent", agent) for _ in range(3)]
    lines: list[dict[str, Any]] = []
    try:
        for proc in workers:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            lines += [yaml.safe_load(line) for line in out.splitlines() if line.strip()]
    finally:
        for proc in workers:
            reap(proc)
    assert all("error" not in line for line in lines), lines
    mine = [line for line in lines if line["thread"] == parent]
    # each worker's lines are in its order, not the fleet's
    assert sorted(line["role"] for line in mine) == ["planner", "reviewer"]  # resumed once
    assert [line["status"] for line in mine if line["role"] == "reviewer"] == ["completed"]
    devs = [line for line in lines if line["role"] == "developer"]
    assert len(devs) == 3
    # measured overlap: each child's step ran from (its StepNode's put - ms) to the put
    spans = []
    for line in devs:
        end = cli("cas", "get", line["head"], "--timestamp").json()["timestamp"]
        spans.append((end - line["ms"], end))
    assert max(s for s, _ in spans) < min(e for _, e in spans), spans  # all three at once
    history = [h for h in cli("thread", "list", "--status", "completed").json()]
    assert len(history) == 4
    assert cli("cas", "verify").json()["ok"] is True
    collected = cli("cas", "gc", "--grace", "0")
    assert collected.code == 0, collected.err
    for line in devs:  # the parent's chain keeps its children's
        assert cli("cas", "has", line["head"]).json() == {"exists": True}
    assert cli("cas", "verify").json()["ok"] is True


def test_too_many_items_fail_the_step_and_leave_the_head(
    cli: Any, parallel: Any, scenario: Any, tmp_path: Path
) -> None:
    path = tmp_path / "plan-parallel.yaml"
    path.write_text((EXAMPLES / "plan-parallel.yaml").read_text().replace("max: 20", "max: 2"))
    assert cli("workflow", "put", str(path)).code == 0
    parent = parallel()
    r = cli("thread", "step", parent, "--agent", scenario(SCENARIO, inprocess=True))
    assert r.code == 5
    assert r.err == (
        'error: post-step moderator evaluate failed: fan-out field "subtasks" has 3 items, '
        "more than max 2 (head not moved)\n"
    )
    assert cli("thread", "show", parent).json()["steps"] == 0
    assert len(cli("thread", "list").json()) == 1  # no child


def test_a_failing_child_keeps_the_parent_waiting_a_killed_one_is_a_result(
    cli: Any, parallel: Any, scenario: Any
) -> None:
    roles = dict(SCENARIO)
    roles["developer"] = [{"exit": 1, "stderr": "error: the build is broken"}]
    agent = scenario(roles, inprocess=True)
    parent = parallel()
    first, *rest = cli("thread", "step", parent, "--agent", agent).json()["children"]
    failed = cli("thread", "step", first, "--agent", agent)
    assert failed.code == 5
    assert cli("thread", "show", first).json()["status"] == "failing"
    ok = scenario(SCENARIO, inprocess=True)
    for child in rest:
        assert cli("thread", "step", child, "--agent", ok).code == 0
    waits = cli("thread", "step", parent, "--agent", ok)
    assert waits.code == 6
    assert f"waits for its children: 1 of 3 still active ({first})" in waits.err
    assert cli("thread", "kill", first).code == 0
    joined = cli("thread", "step", parent, "--agent", ok)
    assert joined.code == 0, joined.err
    assert (
        "- Validate the signup form -> killed: \n"
        in payload(cli, joined.json()["head"])["edgePrompt"]
    )


def test_a_fork_of_the_fan_out_step_starts_its_own_children_when_stepped(
    cli: Any, parallel: Any, scenario: Any
) -> None:
    agent = scenario(SCENARIO, inprocess=True)
    parent = parallel()
    line = cli("thread", "step", parent, "--agent", agent).json()
    fork = cli("thread", "fork", line["head"]).json()["thread"]
    assert len(cli("thread", "list").json()) == 5  # the fork started nothing
    r = cli("thread", "step", fork, "--agent", agent)
    assert r.code == 0, r.err
    assert (r.json()["role"], r.json()["head"], len(r.json()["children"])) == (
        None,
        line["head"],
        3,
    )
    assert not set(r.json()["children"]) & set(line["children"])
    assert cli("thread", "show", fork).json()["status"] == "waiting"


def test_thread_answer_writes_the_join(cli: Any, parallel: Any, scenario: Any) -> None:
    agent = scenario(SCENARIO, inprocess=True)
    parent = parallel()
    children = cli("thread", "step", parent, "--agent", agent).json()["children"]
    finals = [cli("thread", "step", c, "--agent", agent).json()["head"] for c in children]
    r = cli("thread", "answer", parent, "--set", "status=approved", "--set", "comments=fine")
    assert r.code == 0, r.err
    assert payload(cli, r.json()["head"])["children"] == finals


def test_an_agent_that_leaves_out_the_children_is_refused(
    cli: Any, parallel: Any, scenario: Any, agent_script: Any
) -> None:
    agent = scenario(SCENARIO, inprocess=True)
    parent = parallel()
    children = cli("thread", "step", parent, "--agent", agent).json()["children"]
    for child in children:
        cli("thread", "step", child, "--agent", agent)
    scenario_file = agent.split()[-1]
    plain = agent_script(  # uwf-mock, told of no children: a plain StepNode
        "import subprocess\n"
        "env = dict(os.environ); env.pop('UWF_CHILDREN')\n"
        f"argv = ['uwf-mock', '--scenario', {scenario_file!r}, *sys.argv[1:]]\n"
        "sys.exit(subprocess.run(argv, env=env, stdin=subprocess.DEVNULL).returncode)\n"
    )
    step = cli("thread", "step", parent, "--agent", plain)
    assert step.code == 5
    assert "children are none, expected [" in step.err
    assert cli("thread", "show", parent).json()["steps"] == 1


@pytest.mark.parametrize(
    ("edge", "problem"),
    [
        (
            {"role": "$END", "prompt": "x", "fanOut": {"field": "subtasks"}},
            "graph.planner._.fanOut: a fan-out must route to a role, not $END "
            "(the role joins the children)",
        ),
        (
            {"role": "reviewer", "prompt": "x", "fanOut": {"workflow": "w", "field": "nope"}},
            'graph.planner._.fanOut.field: "nope" is not a field of the role\'s output '
            "(its fields: plan, status, subtasks)",
        ),
        (
            {
                "role": "reviewer",
                "prompt": "x",
                "fanOut": {"workflow": "w", "field": "subtasks", "task": "{{#a}}"},
            },
            "graph.planner._.fanOut.task: task template does not parse:",
        ),
        (
            {
                "role": "reviewer",
                "prompt": "x",
                "fanOut": {"workflow": "w", "field": "subtasks", "max": 1001},
            },
            "graph.planner._.fanOut.max:",
        ),
        (
            {
                "role": "reviewer",
                "prompt": "x",
                "fanOut": {"workflow": "w", "field": "subtasks", "each": 1},
            },
            "graph.planner._.fanOut.each: unknown key",
        ),
        (
            {"role": "reviewer", "prompt": "x", "fanOut": {"field": "subtasks", "workflow": "-x"}},
            'graph.planner._.fanOut.workflow: "-x" is not a valid workflow name',
        ),
        (  # the children would run this workflow again: recursion is asked for by name
            {"role": "reviewer", "prompt": "x", "fanOut": {"field": "subtasks"}},
            "graph.planner._.fanOut.workflow: missing (expected the name of the workflow each "
            "child runs; this workflow's own name makes a recursive fan-out)",
        ),
    ],
)
def test_workflow_check_refuses_a_bad_fan_out(
    cli: Any, tmp_path: Path, edge: dict[str, Any], problem: str
) -> None:
    document = yaml.safe_load((EXAMPLES / "plan-parallel.yaml").read_text())
    document["graph"]["planner"]["_"] = edge
    path = tmp_path / "plan-parallel.yaml"
    path.write_text(yaml.safe_dump(document))
    r = cli("workflow", "check", str(path))
    assert r.code == 1
    assert any(line.startswith(problem) for line in r.json()[0]["problems"]), r.out


def test_a_version_1_file_cannot_fan_out(cli: Any, tmp_path: Path) -> None:
    """docs/format.md, "Fan-out and join": fan-out is written in uwf 0.5's format only; a
    version-1 edge with ``fanOut`` is refused with one line saying so, not as an unknown key."""
    document = {
        "version": 1,
        "roles": {"planner": {"frontmatter": {"type": "object"}}, "dev": {"frontmatter": {}}},
        "graph": {
            "$START": {"new": {"role": "planner", "prompt": "Plan."}},
            "planner": {
                "_": {
                    "role": "dev",
                    "prompt": "Do.",
                    "fanOut": {"field": "subtasks", "workflow": "w"},
                }
            },
            "dev": {"_": {"role": "$END"}},
        },
    }
    path = tmp_path / "wf.yaml"
    path.write_text(yaml.safe_dump(document))
    r = cli("workflow", "check", str(path))
    assert r.code == 1
    assert r.json()[0]["problems"] == [
        "graph.planner._.fanOut: fan-out is not supported in a version-1 file (uwf 0.8's format "
        "has no fanOut); write this workflow without `version: 1`, in uwf 0.5's format, to fan "
        "out"
    ]
    del document["version"]  # the same graph as a uwf 0.5 file is not refused for its fanOut
    path.write_text(yaml.safe_dump(document))
    problems = cli("workflow", "check", str(path)).json()[0]["problems"]
    assert not any(line.startswith("graph.planner._.fanOut") for line in problems), problems


def test_children_are_threads_listed_shown_and_killed_with_their_parent(
    cli: Any, parallel: Any, scenario: Any
) -> None:
    agent = scenario(SCENARIO, inprocess=True)
    parent = parallel()
    first, second, third = cli("thread", "step", parent, "--agent", agent).json()["children"]
    assert cli("thread", "step", first, "--agent", agent).json()["status"] == "completed"
    shown = cli("thread", "show", parent).json()
    assert shown["children"] == [
        {"thread": first, "status": "completed"},
        {"thread": second, "status": "idle"},
        {"thread": third, "status": "idle"},
    ]
    listed = cli("thread", "list", "--parent", parent).json()
    assert sorted(t["thread"] for t in listed) == sorted([first, second, third])
    assert cli("thread", "list", "--parent", first).json() == []
    killed = cli("thread", "kill", parent)
    assert killed.json() == {"thread": parent, "killed": True}
    statuses = {t["thread"]: t["status"] for t in cli("thread", "list", "--all").json()}
    assert statuses == {parent: "killed", first: "completed", second: "killed", third: "killed"}


def test_a_worker_killed_mid_fan_out_and_a_database_restart_lose_nothing(
    cli: Any, parallel: Any, scenario: Any, any_store: str, request: pytest.FixtureRequest
) -> None:
    roles = dict(SCENARIO)
    roles["developer"] = [{**SCENARIO["developer"][0], "sleep": 3}]
    agent = scenario(roles)
    parent = parallel()
    children = cli("thread", "step", parent, "--agent", agent).json()["children"]
    worker = spawn_uwf("worker", "--agent", agent)
    try:
        deadline = time.monotonic() + 60
        while not any(
            t["status"] == "running" for t in cli("thread", "list", "--parent", parent).json()
        ):
            assert time.monotonic() < deadline, "the worker never took a child"
            time.sleep(0.05)
        worker.send_signal(signal.SIGKILL)  # mid-step: its child's head must not move
        worker.wait(timeout=30)
    finally:
        reap(worker)
    if any_store == "pg":
        request.getfixturevalue("pg_server").restart()
    assert {t["status"] for t in cli("thread", "list", "--parent", parent).json()} <= {
        "idle",
        "running",  # the killed agent's group may still be letting go of the lock
    }
    fast = scenario(SCENARIO)
    done = cli_run("worker", *given([parent]), "--agent", fast)
    assert done.returncode == 0, done.stderr
    statuses = {t["thread"]: t["status"] for t in cli("thread", "list", "--all").json()}
    assert statuses == {parent: "completed", **{c: "completed" for c in children}}
    steps = cli("thread", "steps", parent).json()["steps"]
    assert [s.get("role") for s in steps[1:]] == ["planner", "reviewer"]
    assert cli("cas", "verify").json()["ok"] is True


def cli_run(*args: str) -> subprocess.CompletedProcess[str]:
    proc = spawn_uwf(*args)
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        reap(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_a_joining_role_that_defers_keeps_its_children(
    cli: Any, parallel: Any, scenario: Any
) -> None:
    roles = {**SCENARIO, "reviewer": [{"exit": 75, "stderr": "error: a person reviews"}]}
    agent = scenario(roles, inprocess=True)
    parent = parallel()
    children = cli("thread", "step", parent, "--agent", agent).json()["children"]
    finals = [cli("thread", "step", c, "--agent", agent).json()["head"] for c in children]
    deferred = cli("thread", "step", parent, "--agent", agent)
    assert deferred.code == 6
    assert f"error: thread {parent} waits for reviewer: the agent deferred" in deferred.err
    nothing = cli("thread", "step", "--next", "--agent", agent)  # a person's turn, not a worker's
    assert nothing.code == 3
    assert len(cli("thread", "list", "--all").json()) == 4  # no second fan-out
    r = cli("thread", "answer", parent, "--set", "status=approved", "--set", "comments=ok")
    assert r.code == 0, r.err
    assert payload(cli, r.json()["head"])["children"] == finals


def test_an_unregistered_child_workflow_fails_the_step_before_the_head_moves(
    cli: Any, scenario: Any
) -> None:
    assert cli("workflow", "put", str(EXAMPLES / "plan-parallel.yaml")).code == 0  # no dev-task
    parent = cli("thread", "start", "plan-parallel", "-p", "x").json()["thread"]
    r = cli("thread", "step", parent, "--agent", scenario(SCENARIO, inprocess=True))
    assert r.code == 5
    assert r.err == (
        'error: post-step moderator evaluate failed: fan-out workflow not found: "dev-task" '
        "(register it with uwf workflow put) (head not moved)\n"
    )
    assert cli("thread", "show", parent).json()["steps"] == 0


def test_a_fork_onto_another_version_keeps_the_join(
    cli: Any, parallel: Any, scenario: Any, tmp_path: Path
) -> None:
    agent = scenario(SCENARIO, inprocess=True)
    parent = parallel()
    children = cli("thread", "step", parent, "--agent", agent).json()["children"]
    finals = [cli("thread", "step", c, "--agent", agent).json()["head"] for c in children]
    joined = cli("thread", "step", parent, "--agent", agent).json()["head"]
    path = tmp_path / "plan-parallel.yaml"
    text = (EXAMPLES / "plan-parallel.yaml").read_text()
    path.write_text(text.replace("review them together.", "review them as one."))
    version = cli("workflow", "put", str(path)).json()["hash"]
    forked = cli("thread", "fork", joined, "--workflow", version)
    assert forked.code == 0, forked.err
    head = forked.json()["head"]
    assert payload(cli, head)["children"] == finals
    assert cli("cas", "verify").json()["ok"] is True
