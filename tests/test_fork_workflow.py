"""``thread fork <step> --workflow <version>``: go on from a step under another workflow version.

The remedy docs/errors.md gives for a workflow that wedges a thread — fix the workflow and
fork — needs the fork to run the fixed version: the chain is copied onto a new StartNode of
that version (docs/format.md, "Forking onto another workflow"), after checking that every role
it ran exists there and that its outputs fit the roles' schemas there.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import EXAMPLES, ONE_REJECTION

TASK = "Fix the login bug"
BASE = yaml.safe_load((EXAMPLES / "solve-issue.yaml").read_text())
TESTER = {
    "description": "Runs the tests.",
    "goal": "You run the tests.",
    "capabilities": ["shell"],
    "procedure": "Run them.",
    "output": "passed or failed.",
    "meta": {
        "type": "object",
        "properties": {"status": {"type": "string", "enum": ["_"]}, "report": {"type": "string"}},
        "required": ["status", "report"],
    },
}


def variant(tmp_path: Path, name: str, change: Any) -> Path:
    """solve-issue.yaml changed by ``change(definition)``, written to ``<name>/``."""
    definition = copy.deepcopy(BASE)
    change(definition)
    path = tmp_path / name / "solve-issue.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(definition, sort_keys=False))
    return path


def with_tester(d: dict[str, Any]) -> None:
    """developer -> tester -> reviewer."""
    d["roles"]["tester"] = TESTER
    d["graph"]["developer"] = {"_": {"role": "tester", "prompt": "Test: {{summary}}"}}
    d["graph"]["tester"] = {"_": {"role": "reviewer", "prompt": "Review: {{report}}"}}


def refused(cli: Any, root: Path, snapshot: Any, step: str, version: str) -> str:
    """The error of ``thread fork <step> --workflow <version>``, which must write nothing."""
    before = snapshot(root)
    r = cli("thread", "fork", step, "--workflow", version)
    assert r.code == 1 and r.out == ""
    assert snapshot(root) == before  # nothing written
    return str(r.err)


@pytest.fixture
def ran_two(cli: Any, new_thread: Any, scenario: Any) -> tuple[str, list[dict[str, Any]]]:
    """A solve-issue thread (v1) after planner and developer: (thread, its steps)."""
    thread = new_thread(TASK)
    r = cli("thread", "step", thread, "-c", "2", "--agent", scenario())
    assert r.code == 0, r.err
    return thread, cli("thread", "steps", thread).json()["steps"]


def test_fork_onto_a_fixed_version_copies_the_chain_and_runs_it(
    cli: Any, cli_proc: Any, tmp_path: Path, ran_two: Any, scenario: Any, snapshot: Any, root: Path
) -> None:
    thread, steps = ran_two
    v1 = steps[0]["workflow"]
    v2 = cli("workflow", "put", str(variant(tmp_path, "v2", with_tester))).json()["hash"]
    developer = steps[2]["hash"]

    r = cli_proc("thread", "fork", developer, "--workflow", "solve-issue")  # the registered v2
    assert r.code == 0, r.err
    out = r.json()
    assert set(out) == {"thread", "forkedFrom", "workflow", "head"}
    assert (out["forkedFrom"], out["workflow"]) == ({"step": developer}, v2)
    fork = out["thread"]
    shown = cli("thread", "show", fork).json()
    assert shown.pop("cost")["calls"] == 0  # uwf-mock records no model calls
    assert shown == {
        "workflow": v2,
        "thread": fork,
        "head": out["head"],
        "done": False,
        "status": "idle",
        "steps": 2,
        "cwd": str(Path.cwd()),  # a fork of a node: where it ran
    }
    copied = cli("thread", "steps", fork).json()["steps"]
    assert copied[0]["workflow"] == v2 and copied[0]["prompt"] == TASK
    assert copied[0]["hash"] != steps[0]["hash"]  # a new StartNode
    for old, new in zip(steps[1:], copied[1:], strict=True):
        assert new["hash"] != old["hash"]
        for key in ("role", "output", "detail", "agent"):
            assert new[key] == old[key], key  # same roles, outputs and details
    assert copied[-1]["hash"] == out["head"]
    assert cli("thread", "steps", thread).json()["steps"] == steps  # the original is untouched

    roles = {**ONE_REJECTION, "tester": ["---\nstatus: _\nreport: all green\n---\nGreen."]}
    ran = cli("thread", "step", fork, "-c", "10", "--agent", scenario(roles))
    assert ran.code == 0, ran.err
    assert [x["role"] for x in ran.jsonl()] == [
        "tester",
        "reviewer",  # rejects
        "developer",
        "tester",
        "reviewer",  # approves
    ]
    assert ran.jsonl()[-1]["status"] == "completed"
    assert cli("cas", "verify").code == 0
    assert cli("thread", "show", thread).json()["workflow"] == v1


def test_a_role_the_chain_ran_must_exist_in_the_new_version(
    cli: Any, tmp_path: Path, ran_two: Any, snapshot: Any, root: Path
) -> None:
    def rename(d: dict[str, Any]) -> None:
        d["roles"]["architect"] = d["roles"].pop("planner")
        d["graph"]["architect"] = d["graph"].pop("planner")
        d["graph"]["$START"]["_"]["role"] = "architect"

    _, steps = ran_two
    v3 = cli("workflow", "put", str(variant(tmp_path, "v3", rename))).json()["hash"]
    assert refused(cli, root, snapshot, steps[2]["hash"], v3) == (
        f"error: cannot fork onto workflow solve-issue ({v3}): it has no role planner "
        "(the forked chain ran it)\n"
    )


def test_outputs_are_checked_against_the_new_schemas_before_anything_is_written(
    cli: Any, tmp_path: Path, ran_two: Any, snapshot: Any, root: Path
) -> None:
    def require_tests(d: dict[str, Any]) -> None:
        meta = d["roles"]["developer"]["meta"]
        meta["properties"]["tests"] = {"type": "integer"}
        meta["required"].append("tests")

    def allow_tests(d: dict[str, Any]) -> None:
        d["roles"]["developer"]["meta"]["properties"]["tests"] = {"type": "integer"}

    _, steps = ran_two
    strict = cli("workflow", "put", str(variant(tmp_path, "strict", require_tests))).json()["hash"]
    assert refused(cli, root, snapshot, steps[2]["hash"], strict) == (
        f"error: cannot fork onto workflow solve-issue ({strict}): the output of step "
        f"{steps[2]['hash']} (developer) does not match the role's schema there: "
        "tests: missing (expected an integer)\n"
    )

    loose = cli("workflow", "put", str(variant(tmp_path, "loose", allow_tests))).json()["hash"]
    fork = cli("thread", "fork", steps[2]["hash"], "--workflow", loose).json()["thread"]
    copied = cli("thread", "steps", fork).json()["steps"]
    assert copied[1]["output"] == steps[1]["output"]  # planner's schema did not change
    assert copied[2]["output"] == steps[2]["output"]  # same payload ...
    developer = cli("cas", "get", copied[2]["hash"]).json()["payload"]
    output = cli("cas", "get", developer["output"]).json()
    roles = cli("cas", "get", loose).json()["payload"]["roles"]
    assert output["type"] == roles["developer"]["meta"]  # ... typed by the new schema
    assert cli("cas", "verify").code == 0


def test_fork_onto_the_same_version_is_a_plain_fork(cli: Any, ran_two: Any) -> None:
    _, steps = ran_two
    step = steps[1]["hash"]
    out = cli("thread", "fork", step, "--workflow", steps[0]["workflow"]).json()
    assert out["head"] == step and out["workflow"] == steps[0]["workflow"]
    assert cli("thread", "show", out["thread"]).json()["head"] == step


def test_fork_of_a_start_node_onto_another_version(cli: Any, tmp_path: Path, ran_two: Any) -> None:
    _, steps = ran_two
    v2 = cli("workflow", "put", str(variant(tmp_path, "v2", with_tester))).json()["hash"]
    out = cli("thread", "fork", steps[0]["hash"], "--workflow", v2).json()
    start = cli("cas", "get", out["head"]).json()["payload"]
    assert start == {"workflow": v2, "prompt": TASK}
    plan = cli("thread", "step", out["thread"], "--dry-run", "--agent", "x").json()
    assert plan["role"] == "planner"


def test_unknown_workflow(cli: Any, ran_two: Any) -> None:
    _, steps = ran_two
    r = cli("thread", "fork", steps[1]["hash"], "--workflow", "nope")
    assert (r.code, r.err) == (1, "error: workflow not found: nope\n")
