"""The contract a cron or CI loop relies on, through the real CLI (docs/errors.md, "Exit codes").

``thread step -c N`` prints each step that landed even when a later one fails, and exits with
the code of its last attempt: 5 when the agent failed, 3 when the thread ended under it
(another loop finished it, or a ``thread kill``). Readers — ``thread list``, ``thread show`` —
never take a step lock, so hundreds of non-waiting steps beside a listing loop see no busy
refusal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from rootfiles import RootFiles
from support import APPROVE, BIN, DEV, ONE_REJECTION, PLAN, REJECT, REPO, spawn_uwf

KEYS = {"workflow", "thread", "head", "role", "done", "status"}


def chain_heads(cli: Any, thread: str) -> list[str]:
    """The heads of a thread's steps, oldest first."""
    return [s["hash"] for s in cli("thread", "steps", thread).json()["steps"][1:]]


def test_count_prints_the_steps_that_landed_and_exits_with_the_failure(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    failing = {"output": "", "exit": 1, "stderr": "error: rate limited"}
    agent = scenario(
        {"planner": [PLAN], "developer": [failing], "reviewer": [REJECT]}, inprocess=False
    )
    thread = new_thread()
    r = cli_proc("thread", "step", thread, "-c", "10", "--agent", agent)
    assert r.code == 5  # the agent failed: the code of the last attempt
    (line,) = r.jsonl()  # step 1 landed and was printed before step 2 failed
    assert set(line) == KEYS
    assert (line["role"], line["done"], line["status"]) == ("planner", False, "active")
    assert line["head"] == cli("thread", "show", thread).json()["head"]
    assert r.err.splitlines()[-1] == (
        "error: agent command failed (uwf-mock) with exit code 1: error: rate limited"
    )
    assert f"step 1/10: planner -> {line['head']}" in r.err.splitlines()


def test_count_exits_3_when_the_thread_is_killed_between_its_steps(
    cli: Any, new_thread: Any, scenario: Any
) -> None:
    """The loop's second step hangs; another process kills the thread: the first step's line
    is on stdout and the loop exits 3 (nothing left to do), whether the kill landed before the
    second step started, while its agent started (which then fails, finding the thread gone),
    or while its agent ran."""
    agent = scenario({"planner": [PLAN], "developer": [{"output": DEV, "sleep": 60}]})
    thread = new_thread()
    loop = spawn_uwf("thread", "step", thread, "-c", "10", "--agent", agent)
    assert loop.stdout is not None
    first = json.loads(loop.stdout.readline())  # printed (and flushed) as it landed
    assert first["role"] == "planner"
    assert cli("thread", "kill", thread).code == 0
    out, err = loop.communicate(timeout=30)
    assert loop.returncode == 3, err
    assert out == ""
    assert err.splitlines()[-1] in {
        f"error: thread {thread} ended (killed) while its step ran; the agent was stopped",
        f"error: thread {thread} ended (killed) while its step ran; the step was not recorded",
        f"error: thread not active: {thread} (status: killed)",
    }
    assert chain_heads(cli, thread) == [first["head"]]


def test_two_loops_on_one_thread_the_one_that_did_not_finish_exits_3(
    cli: Any, new_thread: Any, scenario: Any
) -> None:
    """Two ``-c 10 --wait`` loops on the same thread take turns. Together they print every
    step exactly once, in chain order; the loop that landed the last step exits 0, the other
    finds the thread finished by the other loop and exits 3."""
    slow = {
        role: [{"output": o, "sleep": 0.1} for o in outs] for role, outs in ONE_REJECTION.items()
    }
    agent = scenario(slow)
    thread = new_thread()
    loops = [spawn_uwf("thread", "step", thread, "-c", "10", "--wait", "--agent", agent)]
    time.sleep(0.3)  # the first loop holds the thread: the second waits for its turn
    loops.append(spawn_uwf("thread", "step", thread, "-c", "10", "--wait", "--agent", agent))
    results = [(p.communicate(timeout=120), p.returncode) for p in loops]
    lines = {
        i: [json.loads(x) for x in out.splitlines()] for i, ((out, _), _) in enumerate(results)
    }
    finisher = next(i for i in lines if lines[i] and lines[i][-1]["done"])
    other = 1 - finisher
    assert results[finisher][1] == 0
    assert results[other][1] == 3, results[other][0][1]
    assert results[other][0][1].splitlines()[-1] == (
        f"error: thread not active: {thread} (status: completed)"
    )
    heads = chain_heads(cli, thread)
    printed = sorted(lines[0] + lines[1], key=lambda x: heads.index(x["head"]))
    assert [x["head"] for x in printed] == heads  # every step once
    for mine in lines.values():  # each loop printed its own steps in chain order
        assert [heads.index(x["head"]) for x in mine] == sorted(
            heads.index(x["head"]) for x in mine
        )
    assert [x["status"] for x in printed] == ["active"] * 4 + ["completed"]


def readme_loop() -> str:
    """The shell loop of README.md, "Running from cron or CI"."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("### Running from cron or CI") :]
    return section[section.index("```sh\n") + 6 : section.index("\n```\n")]


def test_the_readme_loop_retries_a_failed_agent_and_stops_when_the_thread_is_done(
    root: Path, new_thread: Any, scenario: Any
) -> None:
    """The loop README.md shows, run by sh against a real thread: the agent fails once (5,
    retried), the steps land (0), the thread completes and the next step says 3: exit 0. An
    agent that keeps failing makes it exit 5 after three tries."""
    failing = {"output": "", "exit": 1, "stderr": "error: rate limited"}
    agent = scenario(
        {"planner": [{"attempts": [failing, PLAN]}], "developer": [DEV], "reviewer": [APPROVE]}
    )
    (root / "config.yaml").write_text(
        f"agents:\n  mock: {{command: uwf-mock, args: ['--scenario', '{agent.split()[-1]}']}}\n"
        "defaultAgent: mock\n"
    )
    loop = readme_loop()
    thread = new_thread()
    run = subprocess.run(
        ["sh", "-c", loop], env={**os.environ, "thread": thread}, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    lines = [json.loads(x) for x in run.stdout.splitlines()]
    assert [x["role"] for x in lines] == ["planner", "developer", "reviewer"]
    assert lines[-1]["status"] == "completed"
    errors = [x for x in run.stderr.splitlines() if x.startswith("error: ")]
    assert errors == [
        "error: agent command failed (uwf-mock) with exit code 1: error: rate limited",
        f"error: thread not active: {thread} (status: completed)",
    ]

    (root / "config.yaml").write_text(
        "agents:\n  broken: {command: uwf-mock, args: ['--scenario', '/nonexistent']}\n"
        "defaultAgent: broken\n"
    )
    stuck = new_thread()
    run = subprocess.run(
        ["sh", "-c", loop], env={**os.environ, "thread": stuck}, capture_output=True, text=True
    )
    assert run.returncode == 5 and run.stdout == ""
    assert len([x for x in run.stderr.splitlines() if x.startswith("error: agent")]) == 3


STEPPER = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    from uwf.adapters.process import Finished
    from uwf.backend.fs import FsBackend
    from uwf.engine import step
    from uwf.model import chain
    from uwf.protocol import schemas
    from uwf.util.errors import Busy

    root, min_steps, stop = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    backend = FsBackend(root)
    threads = [r.thread for r in backend.threads.active()]
    OUT = {"planner": {"status": "_", "plan": "p", "steps": ["a"]},
           "developer": {"status": "_", "filesChanged": [], "summary": "s"},
           "reviewer": {"status": "rejected", "comments": "again"}}

    def agent(plan, env, should_stop):  # what an agent writes, without a process
        store = backend.nodes
        h = schemas.ensure(store)
        roles = chain.load_workflow(store, plan.workflow).roles
        payload = {"start": plan.start, "prev": None if plan.head == plan.start else plan.head,
                   "role": plan.role, "output": store.put(roles[plan.role]["meta"], OUT[plan.role]),
                   "detail": store.put(h.text, "d"), "agent": "stepper",
                   "edgePrompt": plan.prompt, "depth": plan.depth + 1}
        return Finished(0, store.put(h.step, payload) + "\\n", "")

    steps = attempts = busy = 0
    print("ready", flush=True)
    while steps < min_steps or not os.path.exists(stop):
        for thread in threads:
            if steps < min_steps:
                try:
                    step.step(backend, thread, agent="stepper", runner=agent)
                    steps += 1
                except Busy:
                    busy += 1
            for _ in range(20):  # bare attempts, as a loop that finds nothing to do makes
                attempts += 1
                try:
                    with backend.locks.step(thread, wait=False):
                        pass
                except Busy:
                    busy += 1
    print(json.dumps({"steps": steps, "busy": busy, "attempts": attempts}))
    """
)


def test_listing_beside_hundreds_of_steps_refuses_none(
    cli: Any, root: Path, tmp_path: Path, solve_issue: str
) -> None:
    """A process runs 200 non-waiting steps on ten threads, and non-waiting lock attempts in
    a tight loop, while ``thread list`` and ``thread show`` run in a loop: none is refused as
    busy (a reader that took the locks, even for a moment, made some fail)."""
    for n in range(10):
        assert cli("thread", "start", "solve-issue", "-p", f"task {n}").code == 0
    threads = sorted(RootFiles(root).active())
    script, stop = tmp_path / "stepper.py", tmp_path / "stop"
    script.write_text(STEPPER)
    stepper = subprocess.Popen(
        [sys.executable, str(script), str(root), "200", str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert stepper.stdout is not None and stepper.stdout.readline() == "ready\n"
    for n in range(5):
        listed = subprocess.run(
            [str(BIN / "uwf"), "thread", "list"], capture_output=True, text=True, check=True
        )
        assert sorted(t["thread"] for t in json.loads(listed.stdout)) == threads
        shown = subprocess.run(
            [str(BIN / "uwf"), "thread", "show", threads[n]],
            capture_output=True,
            text=True,
            check=True,
        )
        assert json.loads(shown.stdout)["status"] in {"idle", "running"}
    stop.touch()
    out, _ = stepper.communicate(timeout=120)
    assert stepper.returncode == 0
    report = json.loads(out)
    assert (report["steps"], report["busy"]) == (200, 0), report
    assert report["attempts"] > 2000
    assert {len(chain_heads(cli, t)) for t in threads} == {20}
