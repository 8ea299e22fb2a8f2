"""Steering in-process on the memory backend: deferral and the wait, answers, fork with an
edited output, re-runs. The real CLI, uwf-human and the cron loop are in tests/test_human.py
and tests/test_steer.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from test_step_engine import APPROVE, DEV, PLAN, REJECT, scripted
from uwf.adapters.process import Finished
from uwf.backend.memory import MemoryBackend
from uwf.engine import step
from uwf.engine.step import StepPlan
from uwf.engine.threads import lifecycle as threads
from uwf.engine.threads import steer
from uwf.engine.threads.listing import list_threads
from uwf.engine.threads.steplist import steps
from uwf.model import chain
from uwf.testing import InProcessRunner
from uwf.util.errors import AgentFailed, Deferred, InvalidInput, SchemaViolation
from uwf.util.ulid import ThreadId

pytest_plugins = ["test_step_engine"]  # its backend and thread fixtures


def deferring(reason: str = "error: nobody at the keyboard") -> Callable[..., Finished]:
    def run(plan: StepPlan, env: dict[str, str], stop: Callable[[], bool]) -> Finished:
        return Finished(75, "", f"looking for a person\n{reason}\n")

    return run


def to_reviewer(backend: MemoryBackend, thread: ThreadId) -> InProcessRunner:
    fake = scripted(backend, {"planner": [PLAN], "developer": [DEV], "reviewer": [APPROVE]})
    step.step_many(backend, thread, 2, on_result=lambda r: None, agent="x", runner=fake)
    return fake


def test_a_deferred_step_records_the_wait_and_leaves_the_head(
    backend: MemoryBackend, thread: ThreadId
) -> None:
    to_reviewer(backend, thread)
    head = backend.threads.head(thread)
    with pytest.raises(Deferred) as err:
        step.step(backend, thread, agent="x", runner=deferring())
    assert err.value.loop_code == 6
    assert err.value.message == (
        f"thread {thread} waits for reviewer: the agent deferred the step (nobody at the "
        f"keyboard); answer it with uwf thread answer {thread}, or step it again later"
    )
    record = backend.threads.get(thread)
    assert record is not None and record.head == head
    assert record.waiting is not None
    assert (record.waiting.role, record.waiting.head) == ("reviewer", head)
    assert record.waiting.reason == "nobody at the keyboard"
    first_since = record.waiting.since
    shown = threads.show(backend, thread)
    assert shown["status"] == "waiting"
    assert shown["waiting"] == {
        "role": "reviewer",
        "since": first_since,
        "reason": "nobody at the keyboard",
    }
    # deferring again keeps the first "since"; a step that lands ends the wait
    with pytest.raises(Deferred):
        step.step(backend, thread, agent="x", runner=deferring("error: still nobody"))
    again = backend.threads.get(thread)
    assert again is not None and again.waiting is not None
    assert (again.waiting.since, again.waiting.reason) == (first_since, "still nobody")
    assert [t["status"] for t in list_threads(backend, status="waiting")] == ["waiting"]
    result = step.step(backend, thread, agent="x", runner=scripted(backend, {"reviewer": [REJECT]}))
    assert result.role == "reviewer" and threads.show(backend, thread)["status"] == "idle"
    assert list_threads(backend, status="waiting") == []


def test_answer_writes_the_waiting_role_through_the_checks(
    backend: MemoryBackend, thread: ThreadId
) -> None:
    to_reviewer(backend, thread)
    with pytest.raises(Deferred):
        step.step(backend, thread, agent="x", runner=deferring())
    head = backend.threads.head(thread)
    with pytest.raises(SchemaViolation) as err:
        steer.answer_step(backend, thread, fields={"status": "maybe", "comments": "hmm"})
    assert err.value.message == (
        'output rejected by the schema of role "reviewer": status: '
        'expected one of "approved", "rejected", got "maybe"'
    )
    with pytest.raises(SchemaViolation) as err:
        steer.answer_step(backend, thread, fields={"status": "approved"})
    assert err.value.message.endswith("comments: missing (expected a string)")
    assert backend.threads.head(thread) == head
    result = steer.answer_step(
        backend,
        thread,
        fields={"comments": "Ship it."},
        text="---\nstatus: approved\ncomments: overwritten by --set\n---\nRead it twice.",
    )
    assert (result.role, result.done, result.status) == ("reviewer", True, "completed")
    node = chain.load_head(backend.nodes, result.head)
    assert isinstance(node, chain.Step) and node.prev == head and node.depth == 3
    assert chain.output_of(backend.nodes, node) == {"status": "approved", "comments": "Ship it."}
    assert node.payload["agent"] == "uwf-human"
    detail = backend.nodes.get(node.payload["detail"])
    assert detail is not None and detail.payload["via"] == "thread answer"


def test_fork_with_an_edited_output(backend: MemoryBackend, thread: ThreadId) -> None:
    fake = to_reviewer(backend, thread)
    dev_step = backend.threads.head(thread)
    assert dev_step is not None
    before = steps(backend, thread)
    forked = steer.fork_edited(
        backend,
        dev_step,
        '{"status": "_", "filesChanged": ["b.py"], "summary": "did it better"}',
        via="thread fork --output",
    )
    new = chain.load_head(backend.nodes, forked["head"])
    old = chain.load_head(backend.nodes, dev_step)
    assert isinstance(new, chain.Step) and isinstance(old, chain.Step)
    assert (new.start, new.prev, new.role, new.depth) == (old.start, old.prev, old.role, 2)
    assert chain.output_of(backend.nodes, new)["filesChanged"] == ["b.py"]
    detail = backend.nodes.get(new.payload["detail"])
    assert detail is not None
    assert (detail.payload["via"], detail.payload["editedFrom"]) == (
        "thread fork --output",
        dev_step,
    )
    assert backend.threads.head(ThreadId(forked["thread"])) == forked["head"]
    assert steps(backend, thread) == before  # the original is untouched
    # the fork goes on from the edited step: the reviewer sees the new files
    step.step(backend, ThreadId(forked["thread"]), agent="x", runner=fake)
    assert "b.py" in fake.plans[-1].prompt
    with pytest.raises(SchemaViolation) as err:
        steer.fork_edited(backend, dev_step, "status: _\nsummary: x", via="thread fork --output")
    assert err.value.message.endswith("filesChanged: missing (expected a list of strings)")
    with pytest.raises(InvalidInput) as bad:
        steer.fork_edited(backend, dev_step, "- just\n- a list", via="thread fork --output")
    assert bad.value.message.startswith("answer is not a YAML mapping of the role's fields")


def test_rerun_forks_at_the_parent_and_runs_the_role_once(
    backend: MemoryBackend, thread: ThreadId
) -> None:
    fake = to_reviewer(backend, thread)
    dev_step = backend.threads.head(thread)
    assert dev_step is not None
    old = chain.load_head(backend.nodes, dev_step)
    assert isinstance(old, chain.Step)
    out = steer.rerun(backend, dev_step, agent="y", edge_prompt="Do it in Rust.", runner=fake)
    assert out["rerunOf"] == dev_step and out["role"] == "developer"
    assert out["thread"] != thread and backend.threads.head(thread) == dev_step
    assert fake.plans[-1].prompt == "Do it in Rust." and fake.plans[-1].argv[0] == "y"
    new = chain.load_head(backend.nodes, out["head"])
    assert isinstance(new, chain.Step) and new.prev == old.prev and new.role == "developer"
    assert new.payload["edgePrompt"] == "Do it in Rust."


def test_rerun_and_fork_edit_need_a_step_node(backend: MemoryBackend, thread: ThreadId) -> None:
    start = backend.threads.head(thread)
    assert start is not None
    with pytest.raises(InvalidInput) as err:
        steer.rerun(backend, start)
    assert err.value.message == f"thread rerun needs a StepNode; {start} is a StartNode"


def test_a_rerun_that_fails_names_its_thread(backend: MemoryBackend, thread: ThreadId) -> None:
    to_reviewer(backend, thread)
    dev_step = backend.threads.head(thread)
    assert dev_step is not None

    def failing(plan: StepPlan, env: dict[str, str], stop: Callable[[], bool]) -> Finished:
        return Finished(1, "", "error: no\n")

    for _ in range(3):  # retried: no idle thread piles up
        with pytest.raises(AgentFailed) as err:
            steer.rerun(backend, dev_step, agent="z", runner=failing)
    assert [t["thread"] for t in list_threads(backend)] == [thread]
    killed = list_threads(backend, status="killed")
    assert len(killed) == 3
    forked, parent = killed[0]["thread"], killed[0]["head"]
    assert err.value.message == (
        f"agent command failed (z) with exit code 1: error: no "
        f"(the re-run's thread {forked}, forked at {parent}, was archived as killed)"
    )
