"""Failed attempts kept with the next step (docs/format.md, "Previous attempts"): the thread
state's failure record of a head lands in the detail of the step that finally leaves it, as
``previousAttempts``, and `thread read` and `step read` show it. uwf 0.8 kept its failed
StepNodes there; here a failed attempt writes none, so the detail keeps their record. Both
backends: the record comes from the thread table."""

from __future__ import annotations

from typing import Any

import pytest

from support import APPROVE, DEV, PLAN, REJECT
from uwf.model import attempts
from uwf.util.errors import InvalidInput

pytestmark = pytest.mark.usefixtures("any_store")  # the filesystem and PostgreSQL

FLAKY = {"exit": 1, "stderr": "error: the model is overloaded"}


def detail_of(cli: Any, step: str) -> tuple[str, dict[str, Any]]:
    """(the detail schema's title, the detail payload) of a step."""
    detail = cli("cas", "get", step).json()["payload"]["detail"]
    node = cli("cas", "get", detail).json()
    titles = {s["hash"]: s["title"] for s in cli("cas", "schema", "list").json()}
    return titles[node["type"]], node["payload"]


def test_a_step_after_failed_attempts_keeps_them_in_its_detail(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    agent = scenario(
        {
            "planner": [
                {"attempts": [FLAKY, {**FLAKY, "stderr": "error: still overloaded"}, PLAN]}
            ],
            "developer": [DEV],
        },
        inprocess=False,
    )
    for _ in range(2):
        assert cli_proc("thread", "step", thread, "--agent", agent).code == 5
    failure = cli("thread", "show", thread).json()["failure"]
    landed = cli_proc("thread", "step", thread, "--agent", agent)
    assert landed.code == 0, landed.err
    step = landed.json()["head"]
    title, detail = detail_of(cli, step)
    assert title == "MockDetail (previous attempts)"
    assert detail["previousAttempts"] == {
        "attempts": 2,
        "since": failure["since"],
        "at": failure["at"],
        "error": "agent command failed (uwf-mock) with exit code 1: error: still overloaded",
        "code": 5,
        "role": "planner",
        "agent": "uwf-mock",
        "host": failure["host"],
    }
    assert cli("step", "show", step, "--format", "json").json()["previousAttempts"]["attempts"] == 2
    shown = attempts.line(detail["previousAttempts"])
    assert shown.startswith("**Previous attempts:** 2 failed by uwf-mock on ")
    assert shown.endswith(
        "the last: `exit 5: agent command failed (uwf-mock) with exit code 1: error: still "
        "overloaded`"
    )
    read = cli("thread", "read", thread).out
    assert "**Agent:** uwf-mock" in read and f"\n\n{shown}\n\n**Edge prompt:**" in read
    assert f"**Agent:** uwf-mock\n{shown}\n\n**Output:**" in cli("step", "read", step).out
    assert cli("cas", "verify").json()["ok"] is True

    nothing = cli_proc("thread", "step", thread, "--agent", agent)  # no failure at this head
    assert nothing.code == 0, nothing.err
    title, detail = detail_of(cli, nothing.json()["head"])
    assert (title, "previousAttempts" in detail) == ("MockDetail", False)
    assert "**Previous attempts:**" not in cli("step", "read", nothing.json()["head"]).out


def test_an_answer_after_failures_keeps_them_and_a_retry_forgets_them(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    answered = new_thread("Answered by a person")
    broken = scenario({"planner": [FLAKY]})
    assert cli_proc("thread", "step", answered, "--agent", broken).code == 5
    answer = cli_proc(
        "thread",
        "answer",
        answered,
        "--status",
        "_",
        "--set",
        "plan=by hand",
        "--set",
        'steps=["one"]',
        "-m",
        "Planned by hand.",
    )
    assert answer.code == 0, answer.err
    title, detail = detail_of(cli, answer.json()["head"])
    assert title == "HumanDetail (previous attempts)"
    assert detail["previousAttempts"]["attempts"] == 1
    assert detail["via"] == "thread answer"

    retried = new_thread("Retried")
    assert cli_proc("thread", "step", retried, "--agent", broken).code == 5
    assert cli("thread", "retry", retried).code == 0  # ends the record: nothing is kept
    step = cli_proc("thread", "step", retried, "--agent", scenario({"planner": [PLAN]}))
    assert step.code == 0, step.err
    assert "previousAttempts" not in detail_of(cli, step.json()["head"])[1]


def test_a_worker_keeps_the_failures_of_other_workers(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any, root: Any
) -> None:
    """The record counts every process's attempts: the step a worker lands keeps them all."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text("retry: {backoff: 0}\n")
    thread = new_thread()
    agent = scenario(
        {
            "planner": [{"attempts": [FLAKY, FLAKY, PLAN]}],
            "developer": [DEV],
            "reviewer": [REJECT, APPROVE],
        }
    )
    assert cli_proc("thread", "step", thread, "--agent", agent).code == 5  # by hand
    worked = cli_proc("worker", "--max-steps", "2", "--idle-exit", "5", "--agent", agent)
    assert worked.code == 0, worked.err
    lines = worked.jsonl()
    assert [line.get("exit") for line in lines][:1] == [5]  # the worker's own failed attempt
    planner = cli("thread", "steps", thread).json()["steps"][1]
    assert planner["role"] == "planner"
    assert detail_of(cli, planner["hash"])[1]["previousAttempts"]["attempts"] == 2


def test_the_record_an_agent_is_given_is_checked() -> None:
    good = {"attempts": 1, "since": 5, "at": 5, "error": "x", "code": 5}
    assert attempts.from_env(None) is None and attempts.from_env("") is None
    import json

    assert attempts.from_env(json.dumps(good)) == good
    for bad in ("[1]", "{", json.dumps({**good, "attempts": 0}), json.dumps({**good, "x": 1})):
        with pytest.raises(InvalidInput) as info:
            attempts.from_env(bad)
        assert info.value.message.startswith("UWF_PREVIOUS_ATTEMPTS is not ")
    with pytest.raises(InvalidInput):
        attempts.from_env(json.dumps({**good, "error": "e" * 10_000}))  # beyond its bound
