"""End to end through the real `uwf` and `uwf-mock` processes: a rejection loop to $END,
then steps, history, read, a fork that runs on while the original stays archived, and kill."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support import EXAMPLES, REJECT, history_lines, store_state

pytestmark = pytest.mark.usefixtures("any_store")  # the filesystem and PostgreSQL


def test_solve_issue_to_end_with_fork_and_kill(cli_proc: Any, root: Path, scenario: Any) -> None:
    agent = scenario()
    put = cli_proc("workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
    assert put.code == 0, put.err
    wf_hash = put.json()["hash"]
    started = cli_proc("thread", "start", "solve-issue", "-p", "Fix the login bug")
    assert started.code == 0, started.err
    thread = started.json()["thread"]
    assert started.json()["workflow"] == wf_hash

    roles = []
    for _ in range(10):
        r = cli_proc("thread", "step", thread, "--agent", agent)
        assert r.code == 0, r.err
        out = r.json()
        roles.append(out["role"])
        if out["done"]:
            break
    assert roles == ["planner", "developer", "reviewer", "developer", "reviewer"]
    assert out["done"] is True

    # archived exactly once, as completed, with the last head
    history = history_lines()
    assert [(h["thread"], h["status"], h["head"]) for h in history] == [
        (thread, "completed", out["head"])
    ]
    assert thread not in [r.thread for r in store_state()[0]]
    show = cli_proc("thread", "show", thread).json()
    spent = show.pop("cost")  # uwf-mock records no duration and no model call
    assert spent["calls"] == spent["totalTokens"] == spent["durationMs"] == 0
    assert spent["elapsedMs"] >= 0
    assert show == {
        "workflow": wf_hash,
        "thread": thread,
        "head": out["head"],
        "done": True,
        "status": "completed",
        "steps": 5,
        "cwd": str(Path.cwd()),  # where thread start ran
    }
    again = cli_proc("thread", "step", thread, "--agent", agent)
    assert again.code == 3
    assert again.err == f"error: thread not active: {thread} (status: completed)\n"

    steps = cli_proc("thread", "steps", thread).json()["steps"]
    assert [s.get("role") for s in steps] == [
        None,
        "planner",
        "developer",
        "reviewer",
        "developer",
        "reviewer",
    ]
    assert steps[0]["prompt"] == "Fix the login bug"
    assert steps[3]["output"] == {"status": "rejected", "comments": "add tests"}
    assert steps[5]["output"] == {"status": "approved", "comments": "looks good"}

    read = cli_proc("thread", "read", thread, "--quota", "100000")
    assert read.code == 0
    assert read.out.startswith(f"# Thread `{thread}`\n\n**Workflow:** solve-issue (`{wf_hash}`)")
    assert "## Step 3: reviewer" in read.out and "## Step 5: reviewer" in read.out
    # the output as frontmatter, then the content: here the raw assistant turn, verbatim
    assert f"**Output:**\n\n```markdown\n{REJECT}\n```" in read.out
    assert read.out.count("<prompt>") == 3  # one per role, deduplicated

    # fork at the rejecting review: the fork routes back to the developer and runs on
    fork = cli_proc("thread", "fork", steps[3]["hash"])
    assert fork.code == 0, fork.err
    forked = fork.json()["thread"]
    assert fork.json()["forkedFrom"] == {"step": steps[3]["hash"]}
    r = cli_proc("thread", "step", forked, "--agent", agent)
    assert r.code == 0, r.err
    assert r.json()["role"] == "developer" and r.json()["done"] is False
    fork_steps = cli_proc("thread", "steps", forked).json()["steps"]
    assert [s["hash"] for s in fork_steps[:4]] == [s["hash"] for s in steps[:4]]  # shared nodes
    assert len(fork_steps) == 5
    assert cli_proc("thread", "show", thread).json()["done"] is True  # original stays archived

    killed = cli_proc("thread", "kill", forked)
    assert killed.code == 0 and killed.json() == {"thread": forked, "killed": True}
    assert cli_proc("thread", "show", forked).json()["status"] == "killed"
    listed = cli_proc("thread", "list", "--all").json()
    assert {(t["thread"], t["status"]) for t in listed} == {
        (thread, "completed"),
        (forked, "killed"),
    }
    assert cli_proc("thread", "list").json() == []
    verify = cli_proc("cas", "verify")
    assert verify.code == 0, verify.out


def test_count_runs_to_end_and_prints_progress(cli_proc: Any, scenario: Any) -> None:
    cli_proc("workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
    thread = cli_proc("thread", "start", "solve-issue", "-p", "task").json()["thread"]
    r = cli_proc("thread", "step", thread, "--agent", scenario(), "-c", "20")
    assert r.code == 0, r.err
    results = r.jsonl()
    assert [x["role"] for x in results] == [
        "planner",
        "developer",
        "reviewer",
        "developer",
        "reviewer",
    ]
    assert [x["done"] for x in results] == [False] * 4 + [True]
    progress = [line for line in r.err.splitlines() if line.startswith("step ")]
    assert progress[0].startswith("step 1/20: planner -> ")
    assert progress[-1].endswith("(done)") and len(progress) == 5
