"""uwf-mock plays uwf 0.8's mock scenarios (``steps: [{role, output}, …]``, ``--mock-data``)
in the thread's order, and a run that suspends (``$SUSPEND``) counts as a visit in either form
of scenario, so that ``thread resume`` plays the entry after it (docs/agents.md, "uwf-mock").
Through the real CLI, on both backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from support import DEV, PLAN, REJECT


def ok(result: Any) -> Any:
    assert result.code == 0, result.err
    return result.json()


def write(path: Path, doc: Any) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def role(status: str) -> dict[str, Any]:
    """A version-1 role of uwf 0.8's e2e files: one ``$status`` const."""
    return {
        "description": "Works",
        "goal": "Work",
        "capabilities": [],
        "procedure": "Do it",
        "output": f"Set $status to {status}",
        "frontmatter": {
            "oneOf": [{"properties": {"$status": {"const": status}}, "required": ["$status"]}]
        },
    }


#: uwf 0.8's linear e2e workflow as its file is named (``.workflow.yaml``).
LINEAR = {
    "version": 1,
    "name": "linear",
    "description": "planner -> worker -> $END",
    "roles": {"planner": role("ready"), "worker": role("done")},
    "graph": {
        "$START": {
            "new": {"role": "planner", "prompt": "Plan the task"},
            "resume": {"role": "planner", "prompt": "Continue the work."},
        },
        "planner": {"ready": {"role": "worker", "prompt": "Do the work"}},
        "worker": {"done": {"role": "$END", "prompt": "Done"}},
    },
}
#: uwf 0.8's suspend e2e workflow: a planner that may ask for more.
SUSPENDING = {
    "version": 1,
    "name": "suspending",
    "description": "Planner can suspend for more info or finish when ready",
    "roles": {
        "planner": {
            **role("ready"),
            "frontmatter": {
                "type": "object",
                "required": ["$status"],
                "properties": {"$status": {"const": "ready"}},
            },
        }
    },
    "graph": {
        "$START": {
            "new": {"role": "planner", "prompt": "Analyze the task"},
            "resume": {"role": "planner", "prompt": "Continue the work."},
        },
        "planner": {"ready": {"role": "$END", "prompt": "Done"}},
    },
}
SUSPEND = "---\n$status: \"$SUSPEND\"\nreason: 'Need more info: missing requirements'\n---\n"
READY = "---\n$status: ready\n---\nReady to proceed."
DONE = "---\n$status: done\n---\nDone."


def steps_scenario(path: Path, *steps: tuple[str, str]) -> str:
    """A scenario of uwf 0.8 and the agent command line that plays it by its 0.8 option."""
    write(path, {"steps": [{"role": r, "output": o} for r, o in steps]})
    return f"uwf-mock --mock-data {path}"


def started(cli: Any, path: Path, workflow: dict[str, Any], *steps: tuple[str, str]) -> Any:
    """Store ``workflow`` (as ``<name>.workflow.yaml``, uwf 0.8's file name), start a thread
    of it and write a scenario of ``steps``: the thread and the agent command line."""
    ok(cli("workflow", "put", write(path / f"{workflow['name']}.workflow.yaml", workflow)))
    agent = steps_scenario(path / f"{workflow['name']}.mock.yaml", *steps)
    return ok(cli("thread", "start", workflow["name"], "-p", "Go"))["thread"], agent


def recorded(cli: Any, thread: str) -> list[tuple[str, str, str]]:
    """(role, $status, edgePrompt) of every recorded step, oldest first."""
    out = []
    for step in ok(cli("thread", "steps", thread))["steps"][1:]:
        node = ok(cli("cas", "get", step["hash"]))["payload"]
        output = ok(cli("cas", "get", node["output"]))["payload"]
        status = output.get("$status", output.get("status"))
        out.append((node["role"], status, node["edgePrompt"]))
    return out


def test_a_uwf_08_scenario_suspends_then_answers_after_resume(
    any_store: str, cli: Any, cli_proc: Any, tmp_path: Path
) -> None:
    thread, agent = started(cli, tmp_path, SUSPENDING, ("planner", SUSPEND), ("planner", READY))
    waited = cli_proc("thread", "step", thread, "--agent", agent)
    assert waited.code == 6, waited.err
    assert ok(cli("thread", "show", thread))["waiting"]["reason"] == (
        "$SUSPEND: Need more info: missing requirements"
    )
    resumed = cli_proc("thread", "resume", thread, "-p", "Here they are", "--agent", agent)
    assert resumed.code == 0, resumed.err
    assert json.loads(resumed.out)["status"] == "completed"
    [(name, status, prompt)] = recorded(cli, thread)
    assert (name, status) == ("planner", "ready")
    assert prompt.startswith("Analyze the task\n\n## Resumed\n\nYou suspended this step: Need")
    assert prompt.endswith("A person resumed it and wrote:\n\nHere they are")


def test_a_roles_scenario_counts_a_suspended_visit_too(
    any_store: str, cli: Any, cli_proc: Any, solve_issue: str, scenario: Any
) -> None:
    """Before, the planner's visit stayed the first after a suspension, and resuming played
    the $SUSPEND answer again."""
    ask = "---\nstatus: $SUSPEND\nreason: which repository?\n---\n"
    agent = scenario({"planner": [ask, PLAN], "developer": [DEV], "reviewer": [REJECT]})
    thread = ok(cli("thread", "start", "solve-issue", "-p", "Fix it"))["thread"]
    assert cli_proc("thread", "step", thread, "--agent", agent).code == 6
    resumed = cli_proc("thread", "resume", thread, "-p", "uwf", "--agent", agent)
    assert resumed.code == 0, resumed.err
    assert [r[0] for r in recorded(cli, thread)] == ["planner"]
    head = ok(cli("thread", "show", thread))["head"]
    detail = ok(cli("cas", "get", ok(cli("cas", "get", head))["payload"]["detail"]))["payload"]
    assert detail["visit"] == 2  # the suspended run was the first
    assert cli_proc("thread", "step", thread, "--agent", agent).code == 0
    assert [r[0] for r in recorded(cli, thread)] == ["planner", "developer"]


def test_a_uwf_08_scenario_plays_in_the_threads_order(
    any_store: str, cli: Any, cli_proc: Any, tmp_path: Path
) -> None:
    thread, agent = started(cli, tmp_path, LINEAR, ("planner", READY), ("worker", DONE))
    result = cli_proc("thread", "step", thread, "-c", "3", "--agent", agent)
    assert result.code == 0, result.err
    assert [json.loads(line)["status"] for line in result.out.splitlines()] == [
        "active",
        "completed",
    ]
    assert recorded(cli, thread) == [
        ("planner", "ready", "Plan the task"),
        ("worker", "done", "Do the work"),
    ]


def test_a_uwf_08_scenario_that_the_thread_leaves_fails_the_step(
    cli: Any, cli_proc: Any, tmp_path: Path
) -> None:
    thread, agent = started(cli, tmp_path, LINEAR, ("planner", READY), ("planner", DONE))
    path = tmp_path / "linear.mock.yaml"
    assert cli_proc("thread", "step", thread, "--agent", agent).code == 0
    head = ok(cli("thread", "show", thread))["head"]
    mismatch = cli_proc("thread", "step", thread, "--agent", agent)
    assert mismatch.code == 5
    assert mismatch.err.splitlines()[-1].endswith(
        f"error: scenario {path}: step 2 is scripted for planner, but the workflow routed the "
        "thread to worker"
    )
    assert ok(cli("thread", "show", thread))["head"] == head
    short = steps_scenario(tmp_path / "short.mock.yaml", ("planner", READY))
    past = cli_proc("thread", "step", thread, "--agent", short)
    assert past.code == 5
    assert past.err.splitlines()[-1].endswith(
        f"error: scenario {tmp_path / 'short.mock.yaml'} has no step 2 (it scripts 1); the "
        "thread runs worker next"
    )
    (tmp_path / "empty.mock.yaml").write_text("steps: []\n")
    empty = cli_proc(
        "thread", "step", thread, "--agent", f"uwf-mock --mock-data {tmp_path / 'empty.mock.yaml'}"
    )
    assert empty.code == 5
    assert empty.err.splitlines()[-1].endswith(
        f"error: scenario {tmp_path / 'empty.mock.yaml'}: 'steps' must be a non-empty list of "
        "{role, output}"
    )


def test_a_uwf_08_scenario_goes_on_in_a_resumed_thread(
    cli: Any, cli_proc: Any, tmp_path: Path
) -> None:
    """Resuming an ended thread starts a new one that continues its chain: the scenario's
    next step answers there (uwf 0.8's completed-resume e2e)."""
    thread, agent = started(cli, tmp_path, SUSPENDING, ("planner", READY), ("planner", READY))
    assert ok(cli_proc("thread", "step", thread, "--agent", agent))["status"] == "completed"
    resumed = ok(cli_proc("thread", "resume", thread, "-p", "Revise it", "--agent", agent))
    assert (resumed["status"], resumed["resumedFrom"]) == ("completed", thread)
    assert [r[:2] for r in recorded(cli, resumed["thread"])] == [("planner", "ready")] * 2
    head = ok(cli("cas", "get", resumed["head"]))["payload"]
    assert ok(cli("cas", "get", head["detail"]))["payload"]["visit"] == 2


# -- in uwf's process: python:uwf-mock and uwf.testing.ScriptedAgent play them the same --------


def detail_visits(cli: Any, thread: str) -> list[int]:
    """The visit each recorded step's detail says it played, oldest first."""
    steps = ok(cli("thread", "steps", thread))["steps"][1:]
    nodes = [ok(cli("cas", "get", step["hash"]))["payload"] for step in steps]
    return [ok(cli("cas", "get", node["detail"]))["payload"]["visit"] for node in nodes]


def test_in_uwfs_process_a_uwf_08_scenario_counts_a_suspended_step_too(
    cli: Any, cli_proc: Any, tmp_path: Path, root: Path
) -> None:
    """``python:uwf-mock --mock-data FILE`` runs in uwf's process and keeps the thread's order
    as the command does: the run that suspended was step 1, so the worker's is step 3."""
    thread, agent = started(
        cli, tmp_path, LINEAR, ("planner", SUSPEND), ("planner", READY), ("worker", DONE)
    )
    agent = f"python:{agent}"
    assert cli_proc("thread", "step", thread, "--agent", agent).code == 6
    marks = json.loads((root / "cache" / "mock-suspends.json").read_text())
    assert marks == {f"{thread}:*:1": 1}
    resumed = cli_proc("thread", "resume", thread, "-p", "Here they are", "--agent", agent)
    assert resumed.code == 0, resumed.err
    done = cli_proc("thread", "step", thread, "--agent", agent)
    assert done.code == 0, done.err
    assert json.loads(done.out)["status"] == "completed"
    assert [r[:2] for r in recorded(cli, thread)] == [("planner", "ready"), ("worker", "done")]
    assert detail_visits(cli, thread) == [2, 3]


def test_in_uwfs_process_a_roles_scenario_counts_a_suspended_visit_too(
    cli: Any, cli_proc: Any, solve_issue: str, scenario: Any
) -> None:
    ask = "---\nstatus: $SUSPEND\nreason: which repository?\n---\n"
    agent = "python:" + scenario(
        {"planner": [ask, PLAN], "developer": [DEV], "reviewer": [REJECT]}, inprocess=False
    )
    thread = ok(cli("thread", "start", "solve-issue", "-p", "Fix it"))["thread"]
    assert cli_proc("thread", "step", thread, "--agent", agent).code == 6
    resumed = cli_proc("thread", "resume", thread, "-p", "uwf", "--agent", agent)
    assert resumed.code == 0, resumed.err
    assert detail_visits(cli, thread) == [2]


def test_a_scripted_agent_plays_steps_and_counts_the_visits_that_suspended(
    root: Path, tmp_path: Path
) -> None:
    """``ScriptedAgent(steps=…)`` is uwf 0.8's form in memory; a suspension counts as a visit
    in either form, also one given as an output mapping (which never reaches an extract)."""
    import pytest

    import uwf
    from uwf.testing import ScriptedAgent

    with uwf.open_store(root) as store:
        store.put_workflow(write(tmp_path / "linear.workflow.yaml", LINEAR))
        thread = store.start("linear", "Go").thread
        script = ScriptedAgent(steps=[("planner", SUSPEND), ("planner", READY), ("worker", DONE)])
        waits = store.run(thread, agent=script)
        assert waits.outcome == "waiting" and waits.waiting is not None
        assert waits.waiting.reason == "$SUSPEND: Need more info: missing requirements"
        store.resume(thread, "Here they are", agent=script)
        assert store.run(thread, agent=script).outcome == "done"
        steps = store.steps(thread).steps
        assert [(s.role, s.agent) for s in steps] == [
            ("planner", "scripted"),
            ("worker", "scripted"),
        ]
        payloads = [store.backend.nodes.get(s.detail) for s in steps if s.detail]
        assert [p.payload["visit"] for p in payloads if p is not None] == [2, 3]

        again = store.start("linear", "Go").thread
        asks = {"$status": "$SUSPEND", "reason": "which one?"}
        by_role = ScriptedAgent(
            {"planner": [{"output": asks}, {"output": {"$status": "ready"}}], "worker": [DONE]}
        )
        waits = store.run(again, agent=by_role)
        assert waits.waiting is not None and waits.waiting.reason == "$SUSPEND: which one?"
        store.resume(again, "that one", agent=by_role)
        assert store.run(again, agent=by_role).outcome == "done"
        assert [s.output["$status"] for s in store.steps(again).steps] == ["ready", "done"]

    with pytest.raises(TypeError, match="by roles or by steps"):
        ScriptedAgent()
    with pytest.raises(TypeError, match="by roles or by steps"):
        ScriptedAgent({"planner": [READY]}, steps=[("planner", READY)])


def test_uwf_mock_help_shows_both_forms_as_yaml_one_can_copy() -> None:
    """Each example of ``uwf-mock --help`` is a scenario as written (an escaped newline in a
    help text printed a broken line once)."""
    import subprocess

    from support import BIN

    text = subprocess.run(
        [str(BIN / "uwf-mock"), "--help"], capture_output=True, text=True, check=True
    ).stdout
    blocks = [block for block in text.split("\n\n") if block.startswith(("  roles:", "  steps:"))]
    roles, steps = (yaml.safe_load(block) for block in blocks)
    assert roles["roles"]["planner"] == ["---\nstatus: _\nplan: do it\n---\nThe plan."]
    assert steps == {
        "steps": [
            {"role": "planner", "output": "---\n$status: ready\n---\nThe plan."},
            {"role": "worker", "output": "---\n$status: done\n---\nDone."},
        ]
    }
