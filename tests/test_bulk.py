"""Bulk actions (docs/scale-out.md, "Bulk actions"): `thread kill`, `thread stop`, `thread
retry` and `thread rerun` on the threads named and those the filters of `thread list` match,
one JSON line per thread, errors for one thread not stopping the others, a `--dry-run` that
prints the same lines and changes nothing, and a refusal when nothing selects a thread.

Every test but the last drives the real CLI in subprocesses, on the filesystem and on
PostgreSQL; the last kills a fan-out's parent and children in-process, on the memory backend.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import pytest

from fleetkit import configure, put_other_flow, show
from support import DEV, PLAN, Result, store_state


def lines(result: Result, code: int = 0) -> list[dict[str, Any]]:
    assert result.code == code, result.err
    return [json.loads(line) for line in result.out.splitlines()]


def as_planned(line: dict[str, Any]) -> dict[str, Any]:
    """A real run's line as its dry run prints it: no ``result``, ``dryRun``."""
    return {**{k: v for k, v in line.items() if k != "result"}, "dryRun": True}


def dry_then_real(cli_proc: Any, *args: str, code: int = 0) -> tuple[list[Any], Result]:
    """Run ``args`` with --dry-run, check it changed nothing, run it for real and check that
    both printed the same threads in the same order, with the same skips and errors; return
    the real run's lines and result."""
    before = store_state()
    planned = lines(cli_proc(*args, "--dry-run"), code)
    assert store_state() == before  # the dry run changed nothing
    real = cli_proc(*args)
    done = lines(real, code)
    assert [as_planned(line) for line in done] == planned
    return done, real


def start(cli_proc: Any, prompt: str, workflow: str = "solve-issue") -> str:
    r = cli_proc("thread", "start", workflow, "-p", prompt)
    assert r.code == 0, r.err
    return str(r.json()["thread"])


@pytest.mark.parametrize("command", ["kill", "stop", "retry", "rerun"])
def test_a_bulk_command_with_no_thread_and_no_filter_is_refused(
    any_store: str, cli_proc: Any, new_thread: Any, command: str
) -> None:
    thread = new_thread()
    before = store_state()
    refused = cli_proc("thread", command)
    assert (refused.code, refused.err_line, refused.out) == (
        2,
        f"error: thread {command} needs thread ids or a filter (--status, --workflow, "
        "--after, --before, --parent); --status active selects every active thread",
        "",
    )
    assert cli_proc("thread", command, "--dry-run").err_line == refused.err_line
    assert store_state() == before
    assert show(cli_proc, thread)["status"] == "idle"


APPROVED = "---\nstatus: approved\ncomments: ok\n---\nOK."


def test_kill_by_status_dry_run_matches_the_real_run(
    any_store: str, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    first, second, third = new_thread("one"), new_thread("two"), new_thread("three")
    ends = scenario({"planner": [PLAN], "developer": [DEV], "reviewer": [APPROVED]})
    assert cli_proc("thread", "step", first, "-c", "4", "--agent", ends).code == 0  # completed

    done, _ = dry_then_real(cli_proc, "thread", "kill", "--status", "active")
    assert [(d["thread"], d["status"]) for d in done] == [(third, "idle"), (second, "idle")]
    assert [d["result"] for d in done] == [
        {"thread": third, "killed": True},
        {"thread": second, "killed": True},
    ]
    assert all(d["action"] == "kill" and "workflow" in d for d in done)
    assert [show(cli_proc, t)["status"] for t in (first, second, third)] == [
        "completed",
        "killed",
        "killed",
    ]
    again = cli_proc("thread", "kill", "--status", "active")  # nothing left: no line, exit 0
    assert (again.code, again.out) == (0, "")


def test_ids_and_filters_together_and_a_thread_named_that_cannot_be_killed(
    any_store: str, cli_proc: Any, new_thread: Any, tmp_path: Path
) -> None:
    put_other_flow(cli_proc, tmp_path)
    mine = new_thread("mine")
    theirs = [start(cli_proc, f"theirs {i}", "other-flow") for i in range(3)]
    ended = new_thread("ended")
    assert cli_proc("thread", "kill", ended).json() == {"thread": ended, "killed": True}
    ghost = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    listed = cli_proc("thread", "list", "--workflow", "other-flow").json()  # the same filter
    assert [t["thread"] for t in listed] == theirs[::-1]

    args = ("thread", "kill", mine, theirs[0], ended, ghost, mine, "--workflow", "other-flow")
    done, real = dry_then_real(cli_proc, *args, code=1)
    # the threads named, in order and once, then the filter's matches not named, newest first
    assert [(d["thread"], d.get("status")) for d in done] == [
        (mine, "idle"),
        (theirs[0], "idle"),
        (ended, "killed"),
        (ghost, None),
        (theirs[2], "idle"),
        (theirs[1], "idle"),
    ]
    assert [d.get("error") for d in done] == [
        None,
        None,
        f"thread not active: {ended} (status: killed)",
        f"thread not found: {ghost}",
        None,
        None,
    ]
    assert [d["exit"] for d in done if "error" in d] == [1, 1]
    assert real.err_line == 'error: thread kill: 2 of 6 threads failed (see the lines with "error")'
    dry = cli_proc(*args, "--dry-run")  # all done by now: the named ones are errors still
    assert dry.code == 1
    assert dry.err_line.startswith("error: thread kill: 4 of 4 threads would fail")
    assert all(show(cli_proc, t)["status"] == "killed" for t in [mine, *theirs])


def test_retry_by_status_and_workflow_skips_what_a_filter_matched_in_vain(
    any_store: str, root: Path, cli_proc: Any, new_thread: Any, agent_script: Any, tmp_path: Path
) -> None:
    configure(root, retry={"attempts": 1, "backoff": 0})
    put_other_flow(cli_proc, tmp_path)
    fails = agent_script("print('error: rate limited', file=sys.stderr)\nsys.exit(1)\n")
    failed = [new_thread(f"fails {i}") for i in range(2)]
    other = start(cli_proc, "fails elsewhere", "other-flow")
    for thread in [*failed, other]:
        assert cli_proc("thread", "step", thread, "--agent", fails).code == 5
    healthy = new_thread("never failed")

    done, _ = dry_then_real(cli_proc, "thread", "retry", "--workflow", "solve-issue")
    assert [(d["thread"], d["status"]) for d in done] == [
        (healthy, "idle"),
        (failed[1], "failed"),
        (failed[0], "failed"),
    ]
    assert done[0]["skipped"] == f"thread {healthy} has no failed attempts to retry"
    assert [d["result"]["retried"] for d in done[1:]] == [True, True]
    assert [d["result"]["failure"]["exhausted"] for d in done[1:]] == [True, True]
    assert [show(cli_proc, t)["status"] for t in [*failed, other]] == ["idle", "idle", "failed"]

    done, _ = dry_then_real(cli_proc, "thread", "retry", "--status", "failed,failing")
    assert [(d["thread"], d["result"]["thread"]) for d in done] == [(other, other)]
    assert show(cli_proc, other)["status"] == "idle"


def test_rerun_by_time_range_reruns_each_last_step_in_a_new_thread(
    any_store: str, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    planner = scenario({"planner": [PLAN] * 10})
    threads = [new_thread(f"task {i}") for i in range(4)]
    for thread in threads[:3]:
        assert cli_proc("thread", "step", thread, "--agent", planner).code == 0
    created = {t["thread"]: t["createdAt"] for t in cli_proc("thread", "list").json()}

    def iso(thread: str) -> str:
        moment = dt.datetime.fromtimestamp(created[thread] / 1000, dt.UTC)
        return moment.isoformat(timespec="milliseconds")

    heads = {t: show(cli_proc, t)["head"] for t in threads}
    args = ("thread", "rerun", "--after", iso(threads[0]), "--agent", planner)
    done, _ = dry_then_real(cli_proc, *args)
    assert [d["thread"] for d in done] == threads[:0:-1]  # newer than the first, newest first
    assert done[0]["skipped"] == f"thread {threads[3]} has no step to re-run"
    for line in done[1:]:
        result = line["result"]
        assert result["rerunOf"] == heads[line["thread"]] and result["role"] == "planner"
        assert result["thread"] not in threads and show(cli_proc, result["thread"])["steps"] == 1
    assert {t: show(cli_proc, t)["head"] for t in threads} == heads  # the originals untouched

    window = ("--after", iso(threads[0]), "--before", iso(threads[3]))
    planned = lines(cli_proc("thread", "kill", *window, "--dry-run"))
    assert [p["thread"] for p in planned] == [threads[2], threads[1]]

    single = cli_proc("thread", "rerun", threads[0], "--agent", planner)  # a thread alone
    assert single.code == 0, single.err
    assert single.json()["rerunOf"] == heads[threads[0]]
    mixed = cli_proc("thread", "rerun", heads[threads[0]], threads[1])
    assert (mixed.code, mixed.err_line) == (
        2,
        "error: a bulk thread rerun takes thread ids, not step hashes: re-run one step "
        "alone (uwf thread rerun STEP)",
    )


def test_stop_ends_background_runs_and_skips_threads_without_one(
    any_store: str, cli_proc: Any, new_thread: Any, agent_script: Any
) -> None:
    slow = agent_script("time.sleep(60)")
    idle, *running = [new_thread(f"task {i}") for i in range(3)]
    for thread in running:
        r = cli_proc("thread", "step", thread, "--background", "--agent", slow)
        assert r.code == 0, r.err
    deadline = time.monotonic() + 30
    while {show(cli_proc, t)["status"] for t in running} != {"running"}:
        assert time.monotonic() < deadline
        time.sleep(0.1)

    done, _ = dry_then_real(cli_proc, "thread", "stop", "--status", "active")
    assert [(d["thread"], d["status"]) for d in done] == [
        (running[1], "running"),
        (running[0], "running"),
        (idle, "idle"),
    ]
    assert [d.get("result") for d in done[:2]] == [
        {"thread": running[1], "stopped": True},
        {"thread": running[0], "stopped": True},
    ]
    assert done[2]["skipped"] == f"thread {idle} is not currently running"
    assert [show(cli_proc, t)["status"] for t in [idle, *running]] == ["idle"] * 3
    # a thread named with no background run is skipped too: `thread stop` of it exits 0
    named, _ = dry_then_real(cli_proc, "thread", "stop", idle, running[0])
    assert [d["skipped"] for d in named] == [
        f"thread {idle} is not currently running",
        f"thread {running[0]} is not currently running",
    ]


def test_killing_a_parent_first_reports_its_children_killed_by_the_same_command(
    tmp_path: Path,
) -> None:
    """In-process on the memory backend: a parent named before its fan-out's children kills
    them with it (``thread kill`` kills children first); their own lines then say killed,
    as the dry run said they would be, not "not active"."""
    from support import EXAMPLES
    from uwf.backend.base import ThreadInfo
    from uwf.backend.memory import MemoryBackend
    from uwf.engine.threads import bulk
    from uwf.engine.threads import lifecycle as threads
    from uwf.engine.workflows import stored as workflows
    from uwf.util.ulid import new_thread_id

    backend = MemoryBackend(tmp_path)
    workflows.put_workflow(backend, EXAMPLES / "solve-issue.yaml")
    parent = threads.start(backend, "solve-issue", "the parent")["thread"]
    record = backend.threads.get(parent)
    assert record is not None
    children = [new_thread_id() for _ in range(2)]
    grandchild = new_thread_id()
    for child, above in [(children[0], parent), (children[1], parent), (grandchild, children[0])]:
        backend.threads.create(
            child, record.head, ThreadInfo(record.info.workflow, "a child", parent=above)
        )
    ids = [parent, grandchild, children[1]]

    def kill(dry_run: bool) -> list[Any]:
        targets = bulk.select(backend, "thread kill", ids, bulk.Filters())
        return list(bulk.run(backend, bulk.Kill(), targets, dry_run=dry_run))

    planned = kill(dry_run=True)
    done = kill(dry_run=False)
    assert [line["thread"] for line in done] == ids
    assert [line["result"] for line in done] == [{"thread": t, "killed": True} for t in ids]
    assert [as_planned(dict(line)) for line in done] == planned
    assert backend.threads.active() == []
    assert {e.thread: e.status for e in backend.threads.history()} == {
        t: "killed" for t in [parent, *children, grandchild]
    }
