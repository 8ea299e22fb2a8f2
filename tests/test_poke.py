"""`uwf thread poke` (docs/format.md, "Poking a thread"): uwf 0.8's nudge, fitted to a store
whose nodes never change. A waiting thread runs the role it waits for again, a fan-out
parent checks its children again, a failing thread runs its step before its back-off ends,
and an idle thread does its last step again with a person's text, the new step following
the old one. Under the step lock, with the loop contract's exit codes, on both backends."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from support import APPROVE, DEV, EXAMPLES, PLAN, REJECT

pytestmark = pytest.mark.usefixtures("any_store")  # the filesystem and PostgreSQL

SUSPEND = "---\nstatus: $SUSPEND\nreason: which database?\n---\nI need to know."


def edge_prompt(cli: Any, step: str) -> str:
    return str(cli("cas", "get", step).json()["payload"]["edgePrompt"])


def roles_of(cli: Any, thread: str) -> list[str]:
    return [s["role"] for s in cli("thread", "steps", thread).json()["steps"][1:]]


def test_an_idle_thread_does_its_last_step_again_and_the_chain_keeps_both(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    agent = scenario({"planner": [PLAN], "developer": [DEV, DEV], "reviewer": [APPROVE]})
    assert cli("thread", "step", thread, "-c", "2", "--agent", agent).code == 0
    first = cli("thread", "show", thread).json()["head"]

    bare = cli_proc("thread", "poke", thread, "--agent", agent)
    assert (bare.code, bare.out) == (2, "")
    assert bare.err == (
        f"error: thread {thread} is idle: poke does its last step (developer, {first}) again "
        "and needs -p TEXT saying what to change; `uwf thread step` runs its next step\n"
    )
    poked = cli_proc("thread", "poke", thread, "-p", "Keep it smaller.", "--agent", agent)
    assert poked.code == 0, poked.err
    line = poked.json()
    assert (line["role"], line["status"], line["poked"], line["redid"]) == (
        "developer",
        "active",
        "idle",
        first,
    )
    assert roles_of(cli, thread) == ["planner", "developer", "developer"]
    node = cli("cas", "get", line["head"]).json()["payload"]
    assert node["prev"] == first  # it follows the step it does again: nothing is replaced
    prompt = edge_prompt(cli, line["head"])
    assert prompt.startswith(edge_prompt(cli, first).rstrip() + "\n\n## Poked\n\n")
    assert prompt.endswith(
        f"your last answer to it is step 2 ({first}), and this one follows it.\n"
        "A person poked it and wrote:\n\nKeep it smaller."
    )
    assert cli("thread", "step", thread, "--agent", agent).json()["role"] == "reviewer"


def test_a_poke_that_fails_leaves_the_thread_as_it_was(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    assert (
        cli(
            "thread", "step", thread, "--agent", scenario({"planner": [PLAN]}, inprocess=False)
        ).code
        == 0
    )
    before = cli("thread", "show", thread).json()
    broken = scenario({"planner": [{"exit": 1, "stderr": "error: out of tokens"}]}, inprocess=False)
    failed = cli_proc("thread", "poke", thread, "-p", "Again.", "--agent", broken)
    assert failed.code == 5
    assert failed.err.splitlines()[-1].startswith("error: agent command failed (uwf-mock)")
    after = cli("thread", "show", thread).json()
    assert after == before  # same head, and no failure recorded: not the thread's own attempt
    assert "failure" not in after

    fresh = new_thread("Not started")
    none = cli_proc("thread", "poke", fresh, "-p", "x", "--agent", broken)
    assert (none.code, none.err) == (
        1,
        f"error: thread {fresh} has no step to poke: it has not run one yet; "
        f"`uwf thread step {fresh}` runs its first step\n",
    )
    assert cli("thread", "kill", thread).code == 0
    ended = cli_proc("thread", "poke", thread, "-p", "x")
    assert (ended.code, ended.err_line) == (
        3,
        f"error: thread not active: {thread} (status: killed)",
    )


def test_a_waiting_thread_runs_the_role_it_waits_for_again(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    agent = scenario(
        {
            "planner": [PLAN],
            "developer": [DEV],
            "reviewer": [{"attempts": [SUSPEND, SUSPEND, APPROVE]}],
        }
    )
    assert cli("thread", "step", thread, "-c", "2", "--agent", agent).code == 0
    waits = cli_proc("thread", "step", thread, "--agent", agent)
    assert waits.code == 6
    shown = cli("thread", "show", thread).json()
    assert shown["waiting"]["reason"] == "$SUSPEND: which database?"

    again = cli_proc("thread", "poke", thread, "--agent", agent)  # a nudge: no text needed
    assert (again.code, again.out) == (6, "")  # suspended once more: it still waits
    assert cli("thread", "show", thread).json()["waiting"]["since"] == shown["waiting"]["since"]
    landed = cli_proc("thread", "poke", thread, "-p", "The staging one.", "--agent", agent)
    assert landed.code == 0, landed.err
    line = landed.json()
    assert (line["role"], line["status"], line["poked"]) == ("reviewer", "completed", "waiting")
    assert "redid" not in line
    assert edge_prompt(cli, line["head"]).endswith(
        "\n\n## Poked\n\nYou suspended this step (which database?); it runs again now: go on "
        "if you can.\nA person poked it and wrote:\n\nThe staging one."
    )


def test_a_fan_out_parent_checks_its_children_again(cli: Any, cli_proc: Any, scenario: Any) -> None:
    for name in ("dev-task", "plan-parallel"):
        assert cli("workflow", "put", str(EXAMPLES / f"{name}.yaml")).code == 0
    agent = scenario(yaml.safe_load((EXAMPLES / "plan-parallel.mock.yaml").read_text())["roles"])
    parent = cli("thread", "start", "plan-parallel", "-p", "Forms").json()["thread"]
    children = cli("thread", "step", parent, "--agent", agent).json()["children"]
    early = cli_proc("thread", "poke", parent, "--agent", agent)
    assert (early.code, early.out) == (6, "")
    assert early.err == (
        f"error: thread {parent} waits for its children: 3 of 3 still active "
        f"({', '.join(children)})\n"
    )
    for child in children:
        assert cli("thread", "step", child, "--agent", agent).code == 0
    joined = cli_proc("thread", "poke", parent, "--agent", agent)
    assert joined.code == 0, joined.err
    line = joined.json()
    assert (line["role"], line["status"], line["poked"]) == ("reviewer", "completed", "fanned-out")


def test_a_failing_thread_runs_now_and_a_failed_one_is_refused(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any, root: Any
) -> None:
    thread = new_thread()
    agent = scenario({"planner": [{"attempts": [{"exit": 1, "stderr": "error: flaky"}, PLAN]}]})
    assert cli("thread", "step", thread, "--agent", agent).code == 5
    assert cli("thread", "show", thread).json()["status"] == "failing"
    poked = cli_proc("thread", "poke", thread, "--agent", agent)
    assert poked.code == 0, poked.err
    line = poked.json()
    assert (line["role"], line["poked"]) == ("planner", "failing")
    assert edge_prompt(cli, line["head"]).endswith(
        "## Poked\n\nThe last attempt at this step failed (1 so far); it runs again now.\n"
        "A person poked it."
    )
    assert "failure" not in cli("thread", "show", thread).json()  # a landed step ends it

    (root / "config.yaml").write_text("retry: {attempts: 1}\n")
    dead = new_thread("Dead letter")
    broken = scenario({"planner": [{"exit": 1, "stderr": "error: broken"}]})
    assert cli("thread", "step", dead, "--agent", broken).code == 5
    refused = cli_proc("thread", "poke", dead, "--agent", broken)
    assert refused.code == 3
    assert refused.err_line.startswith(f"error: thread {dead} failed after 1 attempts")


def test_a_busy_thread_is_refused_and_a_moved_one_runs_nothing(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    from uwf.backend import open_backend
    from uwf.engine.step import step
    from uwf.util.errors import Conflict
    from uwf.util.ulid import ThreadId

    thread = new_thread()
    agent = scenario({"planner": [PLAN], "developer": [DEV], "reviewer": [REJECT]})
    assert cli("thread", "step", thread, "--agent", agent).code == 0
    with open_backend() as backend:
        with backend.locks.step(ThreadId(thread), wait=True):
            busy = cli_proc("thread", "poke", thread, "-p", "x", "--agent", agent)
        assert (busy.code, busy.err) == (4, f"error: thread {thread} is busy\n")
        head = backend.threads.head(ThreadId(thread))
        assert cli("thread", "step", thread, "--agent", agent).code == 0
        with pytest.raises(Conflict) as moved:
            step(backend, thread, expected=head)  # what poke read is no longer the head
        assert moved.value.message.endswith(f"(from {head}); nothing was run")
    assert roles_of(cli, thread) == ["planner", "developer"]
