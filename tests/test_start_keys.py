"""Idempotent starts (docs/format.md, "Start keys"): `thread start --key K` records K for the
workflow's name; a second start with the same key returns the thread the first one created
instead of a new one — also when many start at once, on both backends, and after the thread
finished.

Every test drives the real CLI in subprocesses, on the filesystem and on PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fleetkit import put_other_flow
from support import reap, spawn_uwf


def test_a_second_start_with_the_same_key_returns_the_first_thread(
    any_store: str, cli_proc: Any, solve_issue: str
) -> None:
    first = cli_proc("thread", "start", "solve-issue", "-p", "Fix it", "--key", "ci-run-42")
    assert first.code == 0, first.err
    thread = first.json()["thread"]
    assert first.json() == {
        "workflow": solve_issue,
        "thread": thread,
        "key": "ci-run-42",
        "existing": False,
    }
    again = cli_proc("thread", "start", "solve-issue", "-p", "Fix it", "--key", "ci-run-42")
    assert again.code == 0, again.err
    assert again.json() == {**first.json(), "existing": True}
    by_hash = cli_proc("thread", "start", solve_issue, "-p", "Fix it", "--key", "ci-run-42")
    assert by_hash.json()["thread"] == thread  # the key belongs to the workflow's name
    other = cli_proc("thread", "start", "solve-issue", "-p", "Fix it", "--key", "ci-run-43")
    assert other.json()["thread"] != thread and other.json()["existing"] is False
    plain = cli_proc("thread", "start", "solve-issue", "-p", "Fix it")
    assert plain.code == 0 and set(plain.json()) == {"workflow", "thread"}
    listed = cli_proc("thread", "list").json()
    assert len(listed) == 3

    assert cli_proc("thread", "kill", thread).code == 0
    after = cli_proc("thread", "start", "solve-issue", "-p", "Fix it", "--key", "ci-run-42")
    assert after.json() == {**first.json(), "existing": True}  # finished: still that thread
    assert len(cli_proc("thread", "list").json()) == 2


def test_twenty_concurrent_starts_with_one_key_give_one_thread(
    any_store: str, cli_proc: Any, solve_issue: str
) -> None:
    procs = [
        spawn_uwf("thread", "start", "solve-issue", "-p", "Once", "--key", "the-key")
        for _ in range(20)
    ]
    outs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            outs.append(out)
    finally:
        for proc in procs:
            reap(proc)

    printed = [json.loads(out) for out in outs]
    threads = {p["thread"] for p in printed}
    assert len(threads) == 1
    assert sorted(p["existing"] for p in printed) == [False] + [True] * 19
    assert [t["thread"] for t in cli_proc("thread", "list").json()] == list(threads)


def test_keys_are_per_workflow_and_checked(
    any_store: str, cli_proc: Any, solve_issue: str, tmp_path: Path
) -> None:
    put_other_flow(cli_proc, tmp_path)
    one = cli_proc("thread", "start", "solve-issue", "-p", "x", "--key", "k").json()
    two = cli_proc("thread", "start", "other-flow", "-p", "x", "--key", "k").json()
    assert one["thread"] != two["thread"] and not two["existing"]
    for bad in ("", "a\nb", "x" * 201):
        r = cli_proc("thread", "start", "solve-issue", "-p", "x", "--key", bad)
        assert (r.code, r.err_line) == (
            2,
            "error: --key must be 1 to 200 characters, with no control characters",
        )
    assert len(cli_proc("thread", "list").json()) == 2
