"""Fleets under stress, on both backends: 8 workers drain 50 threads (6 in the default run,
50 in the stress tier, 200 under ``UWF_LONG=1``); a worker killed with SIGKILL mid-step; and,
on PostgreSQL, the database restarted (crash-style) mid-run.

After each: every thread reached $END exactly once, every chain is linear back to its
StartNode, every recorded step was reported by exactly one worker, every agent that ran was
either recorded or lost the head's compare-and-swap (the losers of a lock race are refused
before their agent starts), no step lock is held, and the store verifies.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import crashkit
from support import EXAMPLES, ONE_REJECTION, given, spawn_uwf, tiers
from uwf.backend import open_backend
from uwf.protocol import schemas

WORKERS = 8
THREADS = crashkit.scaled(50, 200)
STEPS = 5  # ONE_REJECTION: planner, developer, reviewer (rejects), developer, reviewer
CONFLICT = "changed while the step ran"


def agent_starts(marker: Path) -> int:
    return len(crashkit.lines_of(marker))


def start_threads(n: int) -> list[str]:
    assert crashkit.cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
    return [
        crashkit.cli("thread", "start", "solve-issue", "-p", f"task {i}").json()["thread"]
        for i in range(n)
    ]


def chain(store: Any, head: str) -> list[str]:
    """The StepNode hashes from the StartNode to ``head``; asserts the chain is linear."""
    h = schemas.hashes()
    steps: list[str] = []
    node = store.require(head)
    current = head
    while node.type == h.step:
        steps.append(current)
        current = node.payload["prev"] or node.payload["start"]
        node = store.require(current)
    assert node.type == h.start
    steps.reverse()
    for depth, step in enumerate(steps, 1):
        assert store.require(step).payload["depth"] == depth
    return steps


def check_fleet(
    threads: list[str], outputs: list[str], marker: Path, killed: int = 0
) -> dict[str, int]:
    """The guarantees of the module doc; returns counts of what the workers reported."""
    lines = [crashkit.Result(0, out, "").jsonl() for out in outputs]
    reported = [x for ls in lines for x in ls if "error" not in x]
    errors = [x for ls in lines for x in ls if "error" in x]
    heads = Counter(x["head"] for x in reported)
    twice = [x for x in reported if heads[x["head"]] > 1]
    assert not twice, f"steps reported twice: {twice} (errors: {errors})"
    with open_backend() as backend:
        assert backend.threads.active() == []
        history = backend.threads.history()
        assert sorted(e.thread for e in history) == sorted(threads)  # each exactly once
        assert {e.status for e in history} == {"completed"}
        recorded: list[str] = []
        for entry in history:
            steps = chain(backend.nodes, entry.head)
            assert len(steps) == STEPS
            recorded += steps
        assert backend.locks.running() == set()
    unreported = set(recorded) - set(heads)
    lost_replies = [x for x in errors if x["error"].startswith("cannot reach the store")]
    assert len(unreported) <= len(lost_replies)  # a commit whose reply the restart cut off
    assert set(heads) <= set(recorded)
    conflicts = [x for x in errors if CONFLICT in x["error"]]
    # every agent that ran was recorded, lost the compare-and-swap, or failed with the store
    assert agent_starts(marker) >= len(recorded)
    assert agent_starts(marker) <= len(recorded) + len(errors) + killed
    verify = crashkit.cli("cas", "verify")
    assert verify.code == 0 and verify.json()["ok"] is True, verify.out
    return {"steps": len(reported), "errors": len(errors), "conflicts": len(conflicts)}


@pytest.mark.usefixtures("any_store")
@tiers("count", 6, THREADS)
def test_eight_workers_drain_the_threads(tmp_path: Path, count: int) -> None:
    began = time.monotonic()
    threads = start_threads(count)
    agent, marker = crashkit.thread_marker_agent(tmp_path, ONE_REJECTION)
    procs = [spawn_uwf("worker", *given(threads), "--agent", agent) for _ in range(WORKERS)]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err
        outs.append(out)
    counts = check_fleet(threads, outs, marker)
    assert counts["steps"] == count * STEPS
    unexpected = counts["errors"] - counts["conflicts"]
    assert unexpected == 0
    busy = [len(crashkit.Result(0, out, "").jsonl()) for out in outs]
    assert sum(1 for n in busy if n > 0) >= 2  # the work was shared
    print(f"{WORKERS} workers, {count} threads: {time.monotonic() - began:.1f}s, {counts}")


@pytest.mark.usefixtures("any_store")
def test_a_worker_killed_mid_step_leaves_the_head_and_releases_the_lock(tmp_path: Path) -> None:
    threads = start_threads(3)
    roles = {**ONE_REJECTION, "planner": [{"output": ONE_REJECTION["planner"][0], "sleep": 30}]}
    agent, marker = crashkit.thread_marker_agent(tmp_path, roles)
    with open_backend() as backend:
        before = {t: backend.threads.head(t) for t in threads}  # type: ignore[arg-type]
        first = spawn_uwf("worker", "--agent", agent)
        deadline = time.monotonic() + 30
        while agent_starts(marker) < 1:
            assert time.monotonic() < deadline and first.poll() is None
            time.sleep(0.02)
        assert backend.locks.running() == {threads[0]}
        crashkit.sigkill(first)
        deadline = time.monotonic() + 10
        while backend.locks.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert backend.locks.running() == set()  # died with the worker (or its connection)
        assert {t: backend.threads.head(t) for t in threads} == before  # type: ignore[arg-type]
    crashkit.write_scenario(tmp_path / "marked.yaml", ONE_REJECTION)  # no more sleeping
    second = spawn_uwf("worker", *given(threads), "--agent", agent)
    out, err = second.communicate(timeout=300)
    assert second.returncode == 0, err
    check_fleet(threads, [out], marker, killed=1)


def test_postgres_restarted_mid_run(
    pg_server: Any, pg_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    monkeypatch.setenv("UWF_STORE", pg_url)
    threads = start_threads(6)
    slow = {role: [{"output": text[0], "sleep": 0.2}] for role, text in ONE_REJECTION.items()}
    slow["reviewer"] = [
        {"output": ONE_REJECTION["reviewer"][0], "sleep": 0.2},
        {"output": ONE_REJECTION["reviewer"][1], "sleep": 0.2},
    ]
    agent, marker = crashkit.thread_marker_agent(tmp_path, slow)
    procs = [spawn_uwf("worker", *given(threads), "--agent", agent) for _ in range(2)]
    deadline = time.monotonic() + 120
    while agent_starts(marker) < 8:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    pg_server.restart("immediate")  # like a crash of the database server
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert pg_url.split(":")[2].split("@")[0] not in out + err  # the password
        outs.append(out)
    counts = check_fleet(threads, outs, marker)
    assert counts["steps"] >= len(threads) * STEPS - counts["errors"]
