"""Retries and dead letters (docs/format.md, "Retries"): a retry policy in config.yaml — the
role's, the workflow's, then the whole file's, key by key — gives each failed attempt its next
allowed attempt, stored with the thread; fleet steppers (`--next`, `uwf worker`) skip a thread
until then, and after the last attempt the thread is `failed`: never picked again, refused by
`thread step` with exit 3, until `uwf thread retry` puts it back.

Every test drives the real CLI in subprocesses, on the filesystem and on PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fleetkit import configure, show
from support import reap, spawn_uwf

ERROR = "agent command failed (uwf-mock) with exit code 1: error: rate limited"
FAILS = {"exit": 1, "stderr": "error: rate limited"}


def always_fails(agent_script: Any, runs: Path) -> str:
    """An agent that fails every time, after appending ``<thread> <role>`` to ``runs``."""
    return agent_script(
        f"open({str(runs)!r}, 'a').write(sys.argv[1] + ' ' + sys.argv[2] + '\\n')\n"
        "print('error: rate limited', file=sys.stderr)\nsys.exit(1)\n"
    )


def test_the_last_attempt_makes_the_thread_failed_until_thread_retry(
    any_store: str, root: Path, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    configure(root, retry={"attempts": 2, "backoff": 0})
    thread = new_thread()
    agent = scenario({"planner": [{"attempts": [FAILS, FAILS, FAILS]}]}, inprocess=False)
    first = cli_proc("thread", "step", thread, "--agent", agent)
    assert first.code == 5, first.err
    shown = show(cli_proc, thread)
    assert shown["status"] == "failing"
    assert (shown["failure"]["attempts"], shown["failure"]["limit"]) == (1, 2)
    assert shown["failure"]["retryAt"] == shown["failure"]["at"]  # back-off 0
    second = cli_proc("thread", "step", thread, "--agent", agent)
    assert second.code == 5, second.err
    shown = show(cli_proc, thread)
    assert shown["status"] == "failed"
    failure = shown["failure"]
    assert (failure["attempts"], failure["limit"], failure["exhausted"]) == (2, 2, True)
    assert "retryAt" not in failure and failure["error"] == ERROR
    listed = cli_proc("thread", "list", "--status", "failed").json()
    assert [(t["thread"], t["status"]) for t in listed] == [(thread, "failed")]
    assert cli_proc("thread", "list", "--status", "failing").json() == []
    assert [t["thread"] for t in cli_proc("thread", "list", "--status", "active").json()] == [
        thread
    ]

    # never stepped again: not by name (exit 3, nothing left to do), not by --next or a worker
    refused = cli_proc("thread", "step", thread, "--agent", agent)
    assert (refused.code, refused.err_line) == (
        3,
        f"error: thread {thread} failed after 2 attempts (last error: {ERROR}); "
        f"`uwf thread retry {thread}` steps it again",
    )
    nothing = cli_proc("thread", "step", "--next", "--agent", agent)
    assert (nothing.code, nothing.err_line) == (
        3,
        "error: nothing to step: no active thread is idle and not waiting",
    )
    idle = cli_proc("worker", "--idle-exit", "0.5", "--agent", agent)
    assert idle.code == 0 and idle.out == "", idle.err
    assert show(cli_proc, thread)["failure"]["attempts"] == 2  # nothing counted a third

    retried = cli_proc("thread", "retry", thread)
    assert retried.code == 0, retried.err
    assert retried.json() == {"thread": thread, "retried": True, "failure": failure}
    shown = show(cli_proc, thread)
    assert shown["status"] == "idle" and "failure" not in shown
    again = cli_proc("thread", "retry", thread)
    assert (again.code, again.err_line) == (
        1,
        f"error: thread {thread} has no failed attempts to retry",
    )
    ok = cli_proc("thread", "step", "--next", "--agent", agent)  # the third run: fails once more
    assert ok.code == 5
    assert show(cli_proc, thread)["failure"]["attempts"] == 1  # counted anew
    landed = cli_proc("thread", "step", thread, "--agent", scenario(inprocess=False))
    assert landed.code == 0, landed.err
    assert "failure" not in show(cli_proc, thread)


def test_fleet_steppers_wait_for_the_back_off_a_named_step_does_not(
    any_store: str, root: Path, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    configure(root, retry={"backoff": 600, "maxBackoff": 900})
    failing = new_thread("Fails")
    agent = scenario({"planner": [FAILS]})
    assert cli_proc("thread", "step", "--next", "--agent", agent).code == 5
    failure = show(cli_proc, failing)["failure"]
    assert failure["retryAt"] == failure["at"] + 600_000 and "limit" not in failure
    other = new_thread("Works")
    works = scenario()
    stepped = cli_proc("thread", "step", "--next", "--agent", works)
    assert stepped.code == 0, stepped.err
    assert stepped.json()["thread"] == other  # the failing thread backs off: the newer one runs
    drained = cli_proc("thread", "step", "--next", "--workflow", "solve-issue", "--agent", works)
    assert drained.code == 0 and drained.json()["thread"] == other
    by_name = cli_proc("thread", "step", failing, "--agent", agent)  # named: no waiting
    assert by_name.code == 5
    failure = show(cli_proc, failing)["failure"]
    assert failure["attempts"] == 2 and failure["retryAt"] == failure["at"] + 900_000  # capped
    assert cli_proc("thread", "retry", failing).code == 0
    assert cli_proc("thread", "step", "--next", "--agent", agent).code == 5  # the oldest again
    assert show(cli_proc, failing)["failure"]["attempts"] == 1  # --next took it at once


def test_the_most_specific_policy_wins_key_by_key(
    any_store: str, root: Path, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    configure(
        root,
        retry={"attempts": 5, "backoff": 3, "maxBackoff": 4},
        retryOverrides={
            "solve-issue": {"retry": {"attempts": 3, "backoff": 2}, "roles": {"planner": {}}},
            "other": {"retry": {"attempts": 1}},
        },
    )
    thread = new_thread()
    agent = scenario({"planner": [FAILS]})
    assert cli_proc("thread", "step", thread, "--agent", agent).code == 5
    failure = show(cli_proc, thread)["failure"]
    # attempts and backoff from the workflow, maxBackoff from the whole file
    assert (failure["limit"], failure["retryAt"] - failure["at"]) == (3, 2000)
    configure(
        root,
        retry={"attempts": 5},
        retryOverrides={
            "solve-issue": {"retry": {"attempts": 3}, "roles": {"planner": {"attempts": 1}}}
        },
    )
    other = new_thread("Another")
    assert cli_proc("thread", "step", other, "--agent", agent).code == 5
    shown = show(cli_proc, other)
    assert shown["status"] == "failed" and shown["failure"]["limit"] == 1


def test_workers_give_up_after_exactly_n_attempts_across_the_fleet(
    any_store: str, root: Path, cli_proc: Any, new_thread: Any, agent_script: Any, tmp_path: Path
) -> None:
    """Three workers share six threads whose agent always fails: each thread runs its agent
    exactly `attempts` times, whichever worker tried it, and ends failed."""
    configure(root, retry={"attempts": 3, "backoff": 0.05})
    threads = [new_thread(f"Task {n}") for n in range(6)]
    runs = tmp_path / "runs.txt"
    agent = always_fails(agent_script, runs)
    workers = [spawn_uwf("worker", "--idle-exit", "2", "--agent", agent) for _ in range(3)]
    try:
        for worker in workers:
            worker.wait(timeout=240)
            assert worker.returncode == 0, worker.stderr.read() if worker.stderr else ""
    finally:
        for worker in workers:
            reap(worker)
    counted = runs.read_text(encoding="utf-8").split("\n")
    per_thread = {t: sum(1 for line in counted if line.startswith(t + " ")) for t in threads}
    assert per_thread == {t: 3 for t in threads}
    listed = cli_proc("thread", "list", "--status", "failed").json()
    assert sorted(t["thread"] for t in listed) == sorted(threads)
    assert {t["failure"]["attempts"] for t in listed} == {3}
    retried = cli_proc("thread", "retry", threads[0])
    assert retried.code == 0, retried.err
    assert show(cli_proc, threads[0])["status"] == "idle"
    still = cli_proc("thread", "list", "--status", "failed").json()
    assert sorted(t["thread"] for t in still) == sorted(threads[1:])


def test_retry_refuses_what_it_cannot_retry(any_store: str, cli_proc: Any, new_thread: Any) -> None:
    thread = new_thread()
    assert cli_proc("thread", "kill", thread).code == 0
    r = cli_proc("thread", "retry", thread)
    assert (r.code, r.err_line) == (1, f"error: thread not active: {thread} (status: killed)")
    bad = cli_proc("thread", "retry", "nope")
    assert bad.code == 1 and bad.err_line.startswith("error: invalid thread id")


def test_config_checks_the_policy(root: Path, cli_proc: Any, new_thread: Any) -> None:
    thread = new_thread()
    configure(root, retry={"attempts": 0, "backoff": -1}, retryOverrides={"x": {"roles": []}})
    r = cli_proc("thread", "step", thread, "--agent", "uwf-mock")
    assert r.code == 1
    assert r.err.splitlines()[:4] == [
        "error: invalid config.yaml: 3 problems",
        "  - retry.attempts: expected a positive integer, got 0",
        "  - retry.backoff: expected a number of seconds (0 or more), got -1",
        "  - retryOverrides.x.roles: expected a mapping of role -> retry policy, got a list",
    ]


# -- a retry policy written in the workflow file ----------------------------------------------


def with_retry(
    tmp_path: Path, top: Any = None, planner: Any = None, version1: bool = False
) -> Path:
    """examples/solve-issue.yaml (or a version-1 file of one role) with ``retry`` at its top
    and on its planner role, where given."""
    import yaml

    from support import EXAMPLES

    if version1:
        doc: dict[str, Any] = {
            "version": 1,
            "roles": {"planner": {"frontmatter": {"type": "object"}}},
            "graph": {
                "$START": {"new": {"role": "planner", "prompt": "Plan."}},
                "planner": {"_": {"role": "$END"}},
            },
        }
    else:
        doc = yaml.safe_load((EXAMPLES / "solve-issue.yaml").read_text(encoding="utf-8"))
    if top is not None:
        doc["retry"] = top
    if planner is not None:
        doc["roles"]["planner"]["retry"] = planner
    path = tmp_path / "solve-issue.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


def test_a_workflow_file_sets_the_policy_and_config_overrides_win(
    root: Path, cli: Any, tmp_path: Path, scenario: Any
) -> None:
    """config.yaml's retryOverrides (the operator's) > the file's role > the file's top >
    config.yaml's retry, key by key."""
    from uwf.protocol import schemas

    path = with_retry(tmp_path, {"attempts": 4, "backoff": 2, "maxBackoff": 9}, {"backoff": 3})
    put = cli("workflow", "put", path)
    assert put.code == 0, put.err
    assert cli("workflow", "show", "solve-issue").json()["type"] == schemas.HASHES.workflow_retry
    agent = scenario({"planner": [FAILS]})

    def first_failure(**config: Any) -> tuple[int, int]:
        configure(root, **config)
        thread = cli("thread", "start", "solve-issue", "-p", "Task").json()["thread"]
        assert cli("thread", "step", thread, "--agent", agent).code == 5
        failure = cli("thread", "show", thread).json()["failure"]
        return failure["limit"], failure["retryAt"] - failure["at"]

    base = {"retry": {"attempts": 7, "backoff": 5, "maxBackoff": 6}}
    assert first_failure(**base) == (4, 3000)  # attempts: the file's top; backoff: its role
    overrides = {"solve-issue": {"retry": {"attempts": 2, "backoff": 1}}}
    assert first_failure(**base, retryOverrides=overrides) == (2, 1000)  # the operator's
    overrides = {"solve-issue": {"roles": {"planner": {"attempts": 3}}}}
    assert first_failure(**base, retryOverrides=overrides) == (3, 3000)


def test_a_version_1_file_sets_the_policy_too(cli: Any, tmp_path: Path, scenario: Any) -> None:
    from uwf.protocol import schemas

    plain = cli("workflow", "put", with_retry(tmp_path, version1=True))
    assert plain.code == 0, plain.err
    assert cli("workflow", "show", "solve-issue").json()["type"] == schemas.HASHES.workflow_v1
    path = with_retry(tmp_path, {"attempts": 1}, version1=True)
    put = cli("workflow", "put", path)
    assert put.code == 0 and put.json()["hash"] != plain.json()["hash"], put.err
    shown = cli("workflow", "show", "solve-issue").json()
    assert shown["type"] == schemas.HASHES.workflow_v1_retry
    assert shown["payload"]["retry"] == {"attempts": 1}
    thread = cli("thread", "start", "solve-issue", "-p", "Task").json()["thread"]
    failed = cli("thread", "step", thread, "--agent", scenario({"planner": [FAILS]}))
    assert failed.code == 5, failed.err
    assert cli("thread", "show", thread).json()["status"] == "failed"


def test_a_workflow_file_without_a_policy_keeps_its_hash(cli: Any, tmp_path: Path) -> None:
    from support import EXAMPLES

    before = cli("workflow", "put", EXAMPLES / "solve-issue.yaml").json()["hash"]
    assert before == "4WV82QSTJ4217"  # tests/test_version1.py: the hash it always had
    assert cli("workflow", "put", with_retry(tmp_path)).json()["hash"] == before


def test_the_workflow_file_policy_is_checked(cli: Any, tmp_path: Path) -> None:
    path = with_retry(
        tmp_path, {"attempts": 0, "backoff": -1, "maxBackoff": "x", "tries": 2}, {"attempts": 1.5}
    )
    r = cli("workflow", "check", path)
    assert r.code == 1
    assert r.json()[0]["problems"] == [  # top to bottom: the file's retry is written last
        "roles.planner.retry.attempts: expected a positive integer, got a number",
        "retry.attempts: expected a positive integer, got 0",
        "retry.backoff: expected a number of seconds (0 or more), got -1",
        "retry.maxBackoff: expected a number of seconds (0 or more), got a string",
        'retry.tries: unknown key "tries" (known keys: attempts, backoff, maxBackoff)',
    ]
    v1 = cli("workflow", "check", with_retry(tmp_path, None, [], version1=True))
    assert v1.json()[0]["problems"] == [
        "roles.planner.retry: expected a mapping {attempts, backoff, maxBackoff}, got a list"
    ]
