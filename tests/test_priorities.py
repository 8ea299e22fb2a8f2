"""Priorities (docs/format.md, "Priorities"): `thread start --priority N` and `thread priority`
set how soon `--next` and workers take a thread — the highest first, oldest first within one,
each thread gaining a level every `priorityAging` seconds since it was created so that none
waits forever.

Every test drives the real CLI, on the filesystem and on PostgreSQL: in subprocesses, but for
aging, which runs in-process on a clock the test moves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from uwf.testing import Clock


def start(cli_proc: Any, task: str, *priority: str) -> str:
    r = cli_proc("thread", "start", "solve-issue", "-p", task, *priority)
    assert r.code == 0, r.err
    return str(r.json()["thread"])


def next_thread(cli_proc: Any, agent: str) -> str:
    r = cli_proc("thread", "step", "--next", "--agent", agent)
    assert r.code == 0, r.err
    return str(r.json()["thread"])


def test_next_takes_the_highest_priority_first(
    any_store: str, cli_proc: Any, solve_issue: str, scenario: Any
) -> None:
    agent = scenario()
    low = start(cli_proc, "Low", "--priority", "-1")
    normal = start(cli_proc, "Normal")
    urgent = start(cli_proc, "Urgent", "--priority", "5")
    assert next_thread(cli_proc, agent) == urgent  # the newest, but the most urgent
    shown = cli_proc("thread", "show", urgent).json()
    assert shown["priority"] == 5
    assert "priority" not in cli_proc("thread", "show", normal).json()  # 0 is not printed
    listed = {t["thread"]: t.get("priority") for t in cli_proc("thread", "list").json()}
    assert listed == {low: -1, normal: None, urgent: 5}

    lowered = cli_proc("thread", "priority", urgent, "--", "-10")
    assert lowered.code == 0, lowered.err
    assert lowered.json() == {"thread": urgent, "priority": -10, "previous": 5}
    assert next_thread(cli_proc, agent) == normal
    assert cli_proc("thread", "priority", normal, "--", "-5").code == 0
    assert next_thread(cli_proc, agent) == low  # -1 > -5 > -10
    assert cli_proc("thread", "priority", urgent, "3").json()["previous"] == -10
    assert next_thread(cli_proc, agent) == urgent


def test_an_old_thread_gains_a_level_every_aging_period(
    any_store: str, root: Path, cli: Any, solve_issue: str, scenario: Any
) -> None:
    """In-process, on a clock the test moves (uwf.testing.Clock): three aging periods pass
    without waiting for them."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(yaml.safe_dump({"priorityAging": 1}), encoding="utf-8")
    agent = scenario()
    with Clock() as clock:
        waiting = start(cli, "Waited long")
        clock.advance(3.2)  # three levels: 0 + 3 > 2
        newer = start(cli, "Urgent, but new", "--priority", "2")
        assert next_thread(cli, agent) == waiting
        assert cli("thread", "priority", newer, "9").code == 0
        assert next_thread(cli, agent) == newer  # 9 > 0 + 3


def test_priorities_are_checked(any_store: str, cli_proc: Any, solve_issue: str) -> None:
    bad = cli_proc("thread", "start", "solve-issue", "-p", "x", "--priority", "2000000")
    assert (bad.code, bad.err_line) == (
        2,
        "error: --priority must be an integer from -1000000 to 1000000, got: 2000000",
    )
    assert cli_proc("thread", "list").json() == []
    thread = start(cli_proc, "x")
    assert cli_proc("thread", "kill", thread).code == 0
    gone = cli_proc("thread", "priority", thread, "1")
    assert (gone.code, gone.err_line) == (1, f"error: thread not active: {thread} (status: killed)")
