"""What the listings and `thread read` say of a thread that is not simply idle (issue 37's
new-user trial): a fan-out parent is not a thread waiting for a person, and `thread read` of
a waiting, failing, failed or fanned-out thread says so at the top. Both backends: the state
lives in the thread table."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from support import EXAMPLES, PLAN

pytestmark = pytest.mark.usefixtures("any_store")  # the filesystem and PostgreSQL

FANOUT = yaml.safe_load((EXAMPLES / "plan-parallel.mock.yaml").read_text())["roles"]
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"


def table_status(cli: Any, thread: str) -> str:
    """The STATUS cell of ``thread``'s row in ``thread list --format table``."""
    listed = cli("thread", "list", "--format", "table")
    assert listed.code == 0, listed.err
    header, *rows = listed.out.splitlines()
    columns = [m.start() for m in re.finditer(r"\S+", header)]
    row = next(r for r in rows if r.startswith(thread))
    return row[columns[2] : columns[3]].strip()


def show_status(cli: Any, thread: str) -> str:
    shown = cli("thread", "show", thread, "--format", "table")
    assert shown.code == 0, shown.err
    line = next(x for x in shown.out.splitlines() if x.startswith("status"))
    return line.removeprefix("status").strip()


def state(cli: Any, thread: str) -> str | None:
    """The ``**State:**`` line of ``thread read`` (None when it has none)."""
    read = cli("thread", "read", thread)
    assert read.code == 0, read.err
    title, _, rest = read.out.partition("\n\n**Workflow:** ")
    assert title == f"# Thread `{thread}`"
    found = re.search(r"\n\n\*\*State:\*\* (.*)\n\n## Task\n", rest)
    return found.group(1) if found else None


def test_a_fan_out_parent_is_shown_apart_from_a_thread_waiting_for_a_person(
    cli: Any, new_thread: Any, scenario: Any
) -> None:
    for name in ("dev-task", "plan-parallel"):
        assert cli("workflow", "put", str(EXAMPLES / f"{name}.yaml")).code == 0
    parent = cli("thread", "start", "plan-parallel", "-p", "Three forms").json()["thread"]
    agent = scenario(FANOUT)
    children = cli("thread", "step", parent, "--agent", agent).json()["children"]
    person = new_thread("Waits for a person")
    assert cli("thread", "step", person, "-c", "2", "--agent", scenario()).code == 0
    deferring = scenario({"reviewer": [{"exit": 75, "stderr": "error: no terminal"}]})
    assert cli("thread", "step", person, "--agent", deferring).code == 6

    listed = {t["thread"]: t for t in cli("thread", "list").json()}
    assert listed[parent]["status"] == listed[person]["status"] == "waiting"  # the contract
    assert listed[parent]["fanOut"] == {"children": 3, "active": 3}
    assert "fanOut" not in listed[person]
    assert table_status(cli, parent) == "fanned out (3 children, 3 active)"
    assert table_status(cli, person) == "waiting (reviewer)"
    assert show_status(cli, parent) == "fanned out (3 children, 3 active)"
    assert show_status(cli, person) == "waiting (reviewer)"
    assert re.fullmatch(
        f"fanned out since {STAMP}: 3 child threads, 3 still active; reviewer joins them "
        f"\\(`uwf thread list --parent {parent}`\\)",
        state(cli, parent) or "",
    )
    assert re.fullmatch(
        f"waiting for reviewer since {STAMP}: `no terminal` \\(`uwf thread resume {person} "
        f"-p …` runs it again with your text, `uwf thread answer {person}` writes its step\\)",
        state(cli, person) or "",
    )

    assert cli("thread", "step", children[0], "--agent", agent).code == 0
    assert table_status(cli, parent) == "fanned out (3 children, 2 active)"
    for child in children[1:]:
        assert cli("thread", "step", child, "--agent", agent).code == 0
    assert table_status(cli, parent) == "fanned out (3 children, all ended)"
    assert (state(cli, parent) or "").endswith(
        f"3 child threads, all ended: it joins at its next step; reviewer joins them "
        f"(`uwf thread list --parent {parent}`)"
    )
    assert cli("thread", "step", parent, "--agent", agent).code == 0  # the join: $END
    assert show_status(cli, parent) == "completed"
    assert state(cli, parent) is None  # an ended thread reads as before


def test_failing_and_failed_threads_say_so_at_the_top_of_thread_read(
    cli: Any, new_thread: Any, scenario: Any, tmp_path: Any
) -> None:
    failing = new_thread("Fails")
    assert state(cli, failing) is None  # idle: the task section as v0.5.0 printed it
    broken = scenario(
        {"planner": [{"exit": 1, "stderr": "error: rate `limited`"}]}, inprocess=False
    )
    assert cli("thread", "step", failing, "--agent", broken).code == 5
    said = state(cli, failing) or ""
    assert re.fullmatch(
        f"failing: 1 failed attempt of planner since {STAMP}, the last: `` exit 5: agent "
        r"command failed \(uwf-mock\) with exit code 1: error: rate `limited` ``; next "
        f"attempt after {STAMP}",
        said,
    ), said

    (tmp_path / "root").mkdir(exist_ok=True)
    config = tmp_path / "root" / "config.yaml"
    config.write_text("retry: {attempts: 2, backoff: 0}\n")
    assert cli("thread", "step", failing, "--agent", broken).code == 5
    said = state(cli, failing) or ""
    assert said.startswith("failed: 2 failed attempts of planner since ")
    assert said.endswith(f"(`uwf thread retry {failing}` steps it again)")
    assert table_status(cli, failing) == "failed"

    landed = new_thread("Lands")
    assert (
        cli(
            "thread", "step", landed, "--agent", scenario({"planner": [PLAN]}, inprocess=False)
        ).code
        == 0
    )
    assert state(cli, landed) is None
