"""`uwf thread list` (docs/format.md, "Thread state"; docs/architecture.md, "Decisions where
the sources are silent") and the statuses `thread show` reports.

Active threads are ``idle``, or ``running`` while a process holds their step lock; archived
ones carry their history status (``completed``, ``killed``, ``max_rounds``; the LAST history
line of a thread wins). Only active threads are listed unless ``--all`` or a ``--status`` that
names an archived status. Filters combine; results are newest first by ULID time, then
``--skip``/``--take`` paginate.

Most tests build a population with known creation times by writing thread ids (ULIDs made for
a chosen millisecond) straight into the state files; one test gets every status from real
commands.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rootfiles import RootFiles, open_store
from support import APPROVE, DEV, PLAN
from uwf.protocol import schemas
from uwf.util.ulid import new_thread_id

STATUSES = "idle, running, waiting, failing, failed, completed, killed, max_rounds, active"


def jan(day: int) -> int:
    """Unix ms of 2026-01-<day> 00:00:00 UTC (thread creation times of the population)."""
    return int(dt.datetime(2026, 1, day, tzinfo=dt.UTC).timestamp() * 1000)


@dataclass
class Population:
    """Six threads, one per day of January 2026, with every status."""

    workflow: str
    start: str
    ids: dict[str, str]  # name -> thread id

    def row(self, name: str) -> dict[str, Any]:
        status = name.rstrip("0123456789_")
        return {
            "thread": self.ids[name],
            "workflow": self.workflow,
            "head": self.start,
            "status": status,
            "task": "listed",  # recorded by none of them: read from their StartNode
            "createdAt": jan(DAYS[name]),
        }

    def rows(self, *names: str) -> list[dict[str, Any]]:
        return [self.row(n) for n in names]


# creation day of each thread; the name (minus a trailing number) is its expected status
DAYS = {"idle_1": 1, "completed": 2, "running": 3, "killed": 4, "idle_5": 5, "max_rounds": 6}
NEWEST_FIRST = ["max_rounds", "idle_5", "killed", "running", "completed", "idle_1"]


@pytest.fixture
def pop(root: Path, solve_issue: str) -> Iterator[Population]:
    store = open_store(root)
    h = schemas.ensure(store)
    start = store.put(h.start, {"workflow": solve_issue, "prompt": "listed"})
    ids = {name: new_thread_id(now_ms=jan(day)) for name, day in DAYS.items()}
    state = RootFiles(root)
    with state.edit_threads() as threads:
        for name in ("idle_1", "running", "idle_5"):
            threads[ids[name]] = start
    for name in ("completed", "killed", "max_rounds"):
        state.append_history(ids[name], solve_issue, start, name, jan(20))
    with RootFiles(root).hold_step(ids["running"]):
        yield Population(solve_issue, start, ids)


def list_ok(cli: Any, *args: str) -> list[dict[str, Any]]:
    r = cli("thread", "list", *args)
    assert r.code == 0, r.err
    rows: list[dict[str, Any]] = r.json()
    return rows


def names(pop: Population, rows: list[dict[str, Any]]) -> list[str]:
    by_id = {v: k for k, v in pop.ids.items()}
    return [by_id[r["thread"]] for r in rows]


# -- what is listed ------------------------------------------------------------------------


def test_default_lists_active_threads_only_newest_first(cli: Any, pop: Population) -> None:
    rows = list_ok(cli)
    assert rows == pop.rows("idle_5", "running", "idle_1")
    keys = ["thread", "workflow", "head", "status", "task", "createdAt"]
    assert [list(r) for r in rows] == [keys] * 3


def test_all_adds_archived_threads_with_their_history_status(cli: Any, pop: Population) -> None:
    assert list_ok(cli, "--all") == pop.rows(*NEWEST_FIRST)


def test_yaml_format(cli: Any, pop: Population) -> None:
    import yaml

    r = cli("--format", "yaml", "thread", "list", "--status", "running")
    assert r.code == 0, r.err
    assert not r.out.startswith("[")
    assert yaml.safe_load(r.out) == pop.rows("running")


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        ("active", ["idle_5", "running", "idle_1"]),
        ("idle", ["idle_5", "idle_1"]),
        ("running", ["running"]),
        ("idle,completed", ["idle_5", "completed", "idle_1"]),
        ("completed", ["completed"]),
        ("killed", ["killed"]),
        ("max_rounds", ["max_rounds"]),
        ("killed,max_rounds", ["max_rounds", "killed"]),
        (" idle , running ", ["idle_5", "running", "idle_1"]),
        ("  active ", ["idle_5", "running", "idle_1"]),
        ("max_rounds,killed,completed,running,idle", NEWEST_FIRST),
    ],
)
def test_status_filter(cli: Any, pop: Population, status: str, expected: list[str]) -> None:
    assert list_ok(cli, "--status", status) == pop.rows(*expected)


def test_status_filter_narrows_all(cli: Any, pop: Population) -> None:
    assert names(pop, list_ok(cli, "--all", "--status", "idle")) == ["idle_5", "idle_1"]


def test_running_means_the_step_lock_is_held(cli: Any, root: Path, pop: Population) -> None:
    thread = pop.ids["idle_5"]
    with RootFiles(root).hold_step(thread):
        assert names(pop, list_ok(cli, "--status", "running")) == ["idle_5", "running"]
        assert cli("thread", "show", thread).json()["status"] == "running"
    # released: idle again (the lock file left behind does not count)
    assert names(pop, list_ok(cli, "--status", "running")) == ["running"]
    assert names(pop, list_ok(cli, "--status", "idle")) == ["idle_5", "idle_1"]


def test_show_reads_no_kernel_lock_list_for_a_released_lock(
    cli: Any, root: Path, pop: Population, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A released step lock leaves an empty lock file: `thread show` says idle without
    asking the kernel; a record left by a killed holder is still checked."""
    from uwf.backend.fs import locks as locks_module

    thread = pop.ids["idle_5"]
    with RootFiles(root).hold_step(thread):
        pass
    lock_file = root / "locks" / f"{thread}.lock"
    assert lock_file.exists() and lock_file.stat().st_size == 0

    def unwanted(path: Path) -> None:
        raise AssertionError(f"asked the kernel about {path}")

    with monkeypatch.context() as m:
        m.setattr(locks_module.fsio, "held", unwanted)
        assert cli("thread", "show", thread).json()["status"] == "idle"
    lock_file.write_text('{"pid":999999999,"host":"elsewhere","since":1}')  # a SIGKILLed holder
    assert cli("thread", "show", thread).json()["status"] == "idle"


def test_show_says_idle_like_list(cli: Any, pop: Population) -> None:
    thread = pop.ids["idle_5"]
    assert cli("thread", "show", thread).json()["status"] == "idle"


# -- time filters (on the ULID creation time, both bounds exclusive) ----------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--after", "2026-01-03"], ["max_rounds", "idle_5", "killed"]),
        (["--before", "2026-01-03"], ["completed", "idle_1"]),
        (["--after", "2026-01-01", "--before", "2026-01-05"], ["killed", "running", "completed"]),
        (["--after", "2026-01-02T23:59:59.999Z"], ["max_rounds", "idle_5", "killed", "running"]),
        (["--before", "2026-01-03T00:00:00.001Z"], ["running", "completed", "idle_1"]),
        (["--after", "2026-01-03", "--before", "2026-01-04"], []),
    ],
)
def test_time_filters(cli: Any, pop: Population, args: list[str], expected: list[str]) -> None:
    assert names(pop, list_ok(cli, "--all", *args)) == expected


def test_relative_time_filter_counts_back_from_now(
    cli: Any, pop: Population, new_thread: Any
) -> None:
    fresh = new_thread()
    assert [r["thread"] for r in list_ok(cli, "--all", "--after", "1d")] == [fresh]
    assert fresh not in [r["thread"] for r in list_ok(cli, "--all", "--before", "1h")]


# -- pagination ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--take", "2"], NEWEST_FIRST[:2]),
        (["--skip", "2"], NEWEST_FIRST[2:]),
        (["--skip", "2", "--take", "2"], NEWEST_FIRST[2:4]),
        (["--skip", "0", "--take", "1"], NEWEST_FIRST[:1]),
        (["--take", "100"], NEWEST_FIRST),
        (["--skip", "5", "--take", "3"], NEWEST_FIRST[5:]),
        (["--skip", "6"], []),
        (["--skip", "100", "--take", "1"], []),
    ],
)
def test_pagination(cli: Any, pop: Population, args: list[str], expected: list[str]) -> None:
    assert names(pop, list_ok(cli, "--all", *args)) == expected


def test_status_time_and_pagination_combine(cli: Any, pop: Population) -> None:
    rows = list_ok(
        cli,
        "--status",
        "idle,running,completed",
        "--after",
        "2026-01-01",
        "--skip",
        "1",
        "--take",
        "2",
    )
    # idle_1 is not after 01-01 00:00 (exclusive); left: idle_5, running, completed
    assert rows == pop.rows("running", "completed")


def test_pages_partition_the_whole_list(cli: Any, pop: Population) -> None:
    pages = [list_ok(cli, "--all", "--skip", str(s), "--take", "4") for s in (0, 4, 8)]
    assert [len(p) for p in pages] == [4, 2, 0]
    assert pages[0] + pages[1] == list_ok(cli, "--all")


# -- where the entries come from ------------------------------------------------------------


def test_empty_store_lists_nothing_and_creates_nothing(cli: Any, root: Path) -> None:
    assert list_ok(cli) == []
    assert list_ok(cli, "--all", "--status", "completed,idle", "--after", "7d") == []
    assert not root.exists()


def test_last_history_line_of_a_thread_wins(cli: Any, root: Path, pop: Population) -> None:
    state = RootFiles(root)
    thread = pop.ids["completed"]
    store = open_store(root)
    other = store.put(schemas.hashes().start, {"workflow": pop.workflow, "prompt": "again"})
    state.append_history(thread, pop.workflow, other, "killed", jan(21))
    rows = [r for r in list_ok(cli, "--all") if r["thread"] == thread]
    assert rows == [{**pop.row("completed"), "head": other, "status": "killed", "task": "again"}]
    assert list_ok(cli, "--status", "completed") == []
    show = cli("thread", "show", thread).json()
    assert (show["head"], show["status"], show["done"]) == (other, "killed", True)


def test_active_entry_wins_over_a_history_line(cli: Any, root: Path, pop: Population) -> None:
    """A thread in both files, not on the last history line (a hand edit): active wins."""
    thread = pop.ids["idle_5"]
    state = RootFiles(root)
    state.append_history(thread, pop.workflow, pop.start, "completed", jan(22))
    state.append_history(pop.ids["killed"], pop.workflow, pop.start, "killed", jan(23))
    rows = [r for r in list_ok(cli, "--all") if r["thread"] == thread]
    assert rows == [pop.row("idle_5")]
    assert list_ok(cli, "--status", "completed") == pop.rows("completed")
    show = cli("thread", "show", thread).json()
    assert (show["head"], show["done"]) == (pop.start, False)


def test_crash_leftover_on_the_last_history_line_is_archived(
    cli: Any, root: Path, pop: Population
) -> None:
    """Archiving appends history before rewriting threads.yaml; a crash in between leaves
    the thread in both, with its id on the last history line: it is archived."""
    thread = pop.ids["idle_5"]
    RootFiles(root).append_history(thread, pop.workflow, pop.start, "killed", jan(22))
    assert names(pop, list_ok(cli)) == ["running", "idle_1"]
    rows = [r for r in list_ok(cli, "--all") if r["thread"] == thread]
    assert rows == [{**pop.row("idle_5"), "status": "killed"}]
    show = cli("thread", "show", thread).json()
    assert (show["status"], show["done"]) == ("killed", True)


def test_unreadable_heads_are_skipped_and_a_foreign_key_is_damage(
    cli: Any, root: Path, pop: Population
) -> None:
    missing = "0000000000000"
    ghost = new_thread_id(now_ms=jan(7))
    not_a_chain_node = new_thread_id(now_ms=jan(8))
    with RootFiles(root).edit_threads() as threads:
        threads[ghost] = missing
        threads[not_a_chain_node] = pop.workflow
    expected = pop.rows("idle_5", "running", "idle_1")
    assert list_ok(cli) == expected
    # a threads.yaml key that is not a ULID is damage, never read as fewer threads
    # (docs/reliability.md, "Repairing damaged state")
    text = (root / "threads.yaml").read_text()
    (root / "threads.yaml").write_text(text + f'"not-a-ulid": "{pop.start}"\n')
    for extra in ([], ["--after", "2025-12-31"]):
        r = cli("thread", "list", *extra)
        assert (r.code, r.out) == (1, "")
        assert r.err == (
            f'error: {root / "threads.yaml"} is damaged: "not-a-ulid" is not a thread id; '
            'see docs/reliability.md, "Repairing damaged state"\n'
        )


def test_statuses_from_real_commands(cli: Any, root: Path, solve_issue: str, scenario: Any) -> None:
    agent = scenario({"planner": [PLAN], "developer": [DEV], "reviewer": [APPROVE]})

    def start(*extra: str) -> str:
        r = cli("thread", "start", "solve-issue", "-p", "task", *extra)
        assert r.code == 0, r.err
        return str(r.json()["thread"])

    completed, capped, killed, idle, running = (
        start(),
        start("--max-rounds", "1"),
        start(),
        start(),
        start(),
    )
    r = cli("thread", "step", completed, "--agent", agent, "-c", "5")
    assert r.code == 0, r.err
    assert [x["done"] for x in r.jsonl()] == [False, False, True]
    r = cli("thread", "step", capped, "--agent", agent)
    assert r.code == 0, r.err
    assert r.json()["done"] is True
    assert cli("thread", "kill", killed).code == 0
    expected = {
        completed: "completed",
        capped: "max_rounds",
        killed: "killed",
        idle: "idle",
        running: "running",
    }
    with RootFiles(root).hold_step(running):
        rows = list_ok(cli, "--all")
        assert {r["thread"]: r["status"] for r in rows} == expected
        assert {r["workflow"] for r in rows} == {solve_issue}
        for thread in (completed, capped, killed, running):
            assert cli("thread", "show", thread).json()["status"] == expected[thread]
        assert [r["thread"] for r in list_ok(cli, "--status", "max_rounds")] == [capped]
        assert {r["thread"] for r in list_ok(cli)} == {running, idle}
    # newest first by creation time (the first 10 ULID characters)
    times = [r["thread"][:10] for r in rows]
    assert times == sorted(times, reverse=True)
    assert {r["task"] for r in rows} == {"task"}  # recorded at start, kept in the history
    history = (root / "history.jsonl").read_text().splitlines()
    assert all(json.loads(line)["task"] == "task" for line in history)
    assert [r["createdAt"] for r in rows] == sorted((r["createdAt"] for r in rows), reverse=True)


def test_task_and_creation_time(cli: Any, cli_proc: Any, root: Path, solve_issue: str) -> None:
    """The task's first non-blank line (shortened to 100 characters) and the creation time
    (unix ms, from the ULID) — recorded when the thread is started or forked, so listing a
    thread reads none of its nodes."""
    long = "  \n\n  Fix the login bug " + "x" * 200 + "\nsecond line\n"
    before = int(time.time() * 1000)
    thread = cli("thread", "start", "solve-issue", "-p", long).json()["thread"]
    after = int(time.time() * 1000)
    (row,) = cli_proc("thread", "list").json()
    assert row["task"] == ("Fix the login bug " + "x" * 200)[:99] + "…"
    assert before - 1 <= row["createdAt"] <= after
    start = cli("thread", "show", thread).json()["head"]
    (root / "cas" / "objects" / start[:2] / start).unlink()  # no node is read for the list
    assert cli_proc("thread", "list").json() == [row]
    started = cli("thread", "start", "solve-issue", "-p", "second").json()["thread"]
    forked = cli("thread", "fork", cli("thread", "show", started).json()["head"]).json()
    listed = {r["thread"]: r["task"] for r in cli("thread", "list").json()}
    assert listed[forked["thread"]] == "second"  # a fork records its task too


# -- bad options: one exact line, exit 2 (a time that does not parse: 1) ----------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--status", "bogus"], f"Invalid status: bogus. Must be one of: {STATUSES}"),
        (["--status", "idle,done"], f"Invalid status: done. Must be one of: {STATUSES}"),
        (["--status", "active,idle"], f"Invalid status: active. Must be one of: {STATUSES}"),
        (["--status", "Idle"], f"Invalid status: Idle. Must be one of: {STATUSES}"),
        (["--skip", "-1"], "--skip must be a non-negative integer"),
        (["--skip", "x"], "--skip must be a non-negative integer"),
        (["--take", "0"], "--take must be a positive integer"),
        (["--take", "-1"], "--take must be a positive integer"),
        (["--take", "many"], "--take must be a positive integer"),
        (
            ["--after", "not-a-date"],
            "invalid time format: not-a-date (expected ISO date or relative like '7d')",
        ),
        (
            ["--before", "2026-13-01"],
            "invalid time format: 2026-13-01 (expected ISO date or relative like '7d')",
        ),
    ],
)
def test_bad_options(
    cli: Any, root: Path, snapshot: Any, pop: Population, args: list[str], message: str
) -> None:
    before = snapshot(root)
    r = cli("thread", "list", *args)
    usage = args[0] != "--after" and args[0] != "--before"  # a bad option value: exit 2
    assert (r.code, r.out, r.err) == (2 if usage else 1, "", f"error: {message}\n")
    assert snapshot(root) == before


def test_first_invalid_status_is_reported_whatever_the_hash_seed(cli_proc: Any) -> None:
    errors = {
        cli_proc("thread", "list", "--status", "idle,foo,bar", env={"PYTHONHASHSEED": str(s)}).err
        for s in range(8)
    }
    assert errors == {f"error: Invalid status: foo. Must be one of: {STATUSES}\n"}


# -- --format table: for a person at a terminal ------------------------------------------------


def columns(line: str, starts: list[int]) -> list[str]:
    """The cells of a table line, cut where the header's columns start."""
    ends = [*starts[1:], None]
    return [line[a:b].strip() for a, b in zip(starts, ends, strict=True)]


def test_table_format_of_list_show_steps_and_workflow_list(
    cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    """`--format table`: aligned columns, chosen explicitly; JSON stays the default."""
    done = new_thread("Ship the\nnew signup form")  # only the first line is listed
    assert (
        cli_proc("thread", "step", done, "-c", "5", "--agent", scenario(inprocess=False)).code == 0
    )
    failing = new_thread("Fix the login bug")
    bad = scenario({"planner": [{"exit": 1, "stderr": "error: rate limited"}]}, inprocess=False)
    assert cli_proc("thread", "step", failing, "--agent", bad).code == 5
    assert cli_proc("thread", "step", failing, "--agent", bad).code == 5

    listed = cli_proc("thread", "list", "--all", "--format", "table")
    assert listed.code == 0, listed.err
    header, *lines = listed.out.splitlines()
    names = ["THREAD", "AGE", "STATUS", "WORKFLOW", "TASK", "LAST FAILURE"]
    starts = [header.index(name) for name in names]
    assert starts == sorted(starts) and columns(header, starts) == names
    rows = [columns(line, starts) for line in lines]
    assert [r[0] for r in rows] == [failing, done]  # newest first, like the JSON
    assert rows[0][2:] == [
        "failing",
        "solve-issue",
        "Fix the login bug",
        "×2 exit 5: agent command failed (uwf-mock) with exit code 1: error: rate limited",
    ]
    assert rows[1][2:5] == ["completed", "solve-issue", "Ship the"]
    assert all(r[1].endswith(("s", "m")) for r in rows)  # an age: "3s", "1m"
    assert cli_proc("thread", "list", "--all").json()[0]["thread"] == failing  # JSON by default

    shown = cli_proc("thread", "show", failing, "--format", "table").out.splitlines()
    fields = {
        line.split()[0] if not line.startswith("last") else "last failure": line for line in shown
    }
    assert fields["status"].split() == ["status", "failing"]
    assert "×2 exit 5: agent command failed" in fields["last failure"]

    steps = cli_proc("thread", "steps", done, "--format", "table").out.splitlines()
    assert steps[0].split() == ["#", "HASH", "ROLE", "STATUS", "AGENT", "TOOK", "TOKENS", "AGE"]
    assert [line.split()[2:4] for line in steps[2:]] == [
        ["planner", "_"],
        ["developer", "_"],
        ["reviewer", "rejected"],
        ["developer", "_"],
        ["reviewer", "approved"],
    ]
    assert steps[1].split()[:3] == [
        "0",
        cli_proc("thread", "steps", done).json()["steps"][0]["hash"],
        "(task)",
    ]

    workflows = cli_proc("workflow", "list", "--format", "table").out.splitlines()
    assert workflows[0].split() == ["NAME", "ORIGIN", "HASH"]
    assert workflows[1].split()[:2] == ["solve-issue", "global"]
    bad_format = cli_proc("thread", "list", "--format", "tabel")
    assert (
        bad_format.code == 2 and "'tabel' is not one of 'json', 'yaml', 'table'" in bad_format.err
    )
