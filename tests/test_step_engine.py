"""The step as plan -> run -> commit, driven in-process on the memory backend.

The agent is a scripted Python agent run in-process by uwf.testing (on the agent kit, as
``uwf-mock`` runs: an output, a detail and a StepNode), or a runner that writes a StepNode
straight into the backend (``uwf.testing.write_step``), so the engine's decisions are tested
without processes; the real processes are covered by tests/test_thread_e2e.py and friends.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support import EXAMPLES
from uwf.adapters.process import Finished
from uwf.backend.memory import MemoryBackend, MemoryThreads
from uwf.engine import step
from uwf.engine.step import StepPlan
from uwf.engine.threads import lifecycle as threads
from uwf.engine.workflows import stored as workflows
from uwf.testing import InProcessRunner, ScriptedAgent, write_step
from uwf.util.base32 import NodeHash
from uwf.util.errors import AgentFailed, Busy, Conflict, NotActive
from uwf.util.ulid import ThreadId

PLAN = {"status": "_", "plan": "do it", "steps": ["one"]}
DEV = {"status": "_", "filesChanged": ["a.py"], "summary": "did it"}
REJECT = {"status": "rejected", "comments": "add tests"}
APPROVE = {"status": "approved", "comments": "ok"}


def scripted(backend: MemoryBackend, outputs: dict[str, list[Any]]) -> InProcessRunner:
    """The engine's runner for an agent in this process (``uwf.testing``), the agent answering
    each role with its outputs in visit order (the last repeats); the runner keeps each plan
    and environment it was given."""
    script = {role: [{"output": output} for output in items] for role, items in outputs.items()}
    return InProcessRunner(backend, ScriptedAgent(script))


@pytest.fixture
def backend(tmp_path: Path) -> MemoryBackend:
    return MemoryBackend(tmp_path)


@pytest.fixture
def thread(backend: MemoryBackend) -> ThreadId:
    workflows.put_workflow(backend, EXAMPLES / "solve-issue.yaml")
    return ThreadId(threads.start(backend, "solve-issue", "Fix the login bug")["thread"])


def agent(backend: MemoryBackend) -> InProcessRunner:
    return scripted(backend, {"planner": [PLAN], "developer": [DEV], "reviewer": [REJECT, APPROVE]})


def test_a_thread_runs_to_end_with_one_rejection(backend: MemoryBackend, thread: ThreadId) -> None:
    fake = agent(backend)
    results = step.step_many(backend, thread, 20, on_result=lambda r: None, agent="x", runner=fake)
    roles = [r.role for r in results]
    assert roles == ["planner", "developer", "reviewer", "developer", "reviewer"]
    assert [r.status for r in results] == ["active"] * 4 + ["completed"]
    assert results[-1].done and backend.threads.head(thread) is None
    entry = backend.threads.history_entry(thread)
    assert entry is not None and (entry.head, entry.status) == (results[-1].head, "completed")
    assert fake.plans[3].prompt.endswith("Address every comment:\nadd tests\n")


def test_plan_is_frozen_and_names_the_agent_and_prompt(
    backend: MemoryBackend, thread: ThreadId
) -> None:
    out = step.dry_run(backend, thread, agent="my-agent --flag")
    assert out["role"] == "planner" and out["agent"] == ["my-agent", "--flag", thread, "planner"]
    assert (out["done"], out["status"], out["dryRun"]) == (False, "active", True)
    assert backend.locks.running() == set()


def test_the_agent_gets_the_edge_prompt_and_the_backend_in_its_environment(
    backend: MemoryBackend, thread: ThreadId
) -> None:
    fake = agent(backend)
    step.step(backend, thread, agent="x", runner=fake)
    env = fake.envs[0]
    assert env["UWF_EDGE_PROMPT"] == fake.plans[0].prompt != ""
    assert env["WORKFLOW_STORAGE_ROOT"] == str(backend.root)


def test_a_failed_agent_leaves_the_head_and_says_why(
    backend: MemoryBackend, thread: ThreadId
) -> None:
    head = backend.threads.head(thread)

    def failing(plan: StepPlan, env: dict[str, str], stop: Callable[[], bool]) -> Finished:
        return Finished(3, "", "warming up\nerror: the model is down\n")

    with pytest.raises(AgentFailed) as err:
        step.step(backend, thread, agent="x", runner=failing)
    assert err.value.message == (
        "agent command failed (x) with exit code 3: error: the model is down"
    )
    assert err.value.loop_code == 5
    assert backend.threads.head(thread) == head


def test_a_step_node_for_another_step_is_refused(backend: MemoryBackend, thread: ThreadId) -> None:
    head = backend.threads.head(thread)

    def wrong_role(plan: StepPlan, env: dict[str, str], stop: Callable[[], bool]) -> Finished:
        return Finished(0, write_step(backend, plan, PLAN, role="reviewer", depth=5), "")

    with pytest.raises(AgentFailed) as err:
        step.step(backend, thread, agent="x", runner=wrong_role)
    assert 'role is "reviewer", expected "planner"; depth is 5, expected 1' in err.value.message
    assert backend.threads.head(thread) == head


def test_busy_thread_is_refused_before_the_agent_runs(
    backend: MemoryBackend, thread: ThreadId
) -> None:
    fake = agent(backend)
    with backend.locks.step(thread, wait=False), pytest.raises(Busy) as err:
        step.step(backend, thread, agent="x", runner=fake)
    assert err.value.message == f"thread {thread} is busy" and err.value.loop_code == 4
    assert fake.plans == []


def test_not_active_thread_has_loop_code_3(backend: MemoryBackend, thread: ThreadId) -> None:
    threads.kill(backend, thread)
    with pytest.raises(NotActive) as err:
        step.step(backend, thread, agent="x", runner=agent(backend))
    assert err.value.message == f"thread not active: {thread} (status: killed)"
    assert err.value.loop_code == 3


def test_kill_during_the_step_stops_the_agent(backend: MemoryBackend, thread: ThreadId) -> None:
    """The runner is asked to stop once the thread is archived; the step fails with 3."""

    def killed_meanwhile(plan: StepPlan, env: dict[str, str], stop: Callable[[], bool]) -> Finished:
        assert not stop()
        backend.threads.archive(thread, plan.workflow, "killed", 1)
        assert stop()
        return Finished(-15, "", "", stopped=True)

    with pytest.raises(NotActive) as err:
        step.step(backend, thread, agent="x", runner=killed_meanwhile)
    assert err.value.message == (
        f"thread {thread} ended (killed) while its step ran; the agent was stopped"
    )


def test_a_head_moved_by_another_writer_is_a_conflict(
    backend: MemoryBackend, thread: ThreadId
) -> None:
    start = backend.threads.head(thread)
    assert start is not None

    def racing(plan: StepPlan, env: dict[str, str], stop: Callable[[], bool]) -> Finished:
        other = write_step(backend, plan, PLAN, agent="other")
        backend.threads.move(thread, start, other)  # a writer that ignored the lock
        return Finished(0, write_step(backend, plan, PLAN), "")

    with pytest.raises(Conflict) as err:
        step.step(backend, thread, agent="x", runner=racing)
    assert err.value.loop_code == 4 and "changed while the step ran" in err.value.message


def test_kill_racing_the_archive_of_a_finishing_step_keeps_the_step(
    backend: MemoryBackend, tmp_path: Path
) -> None:
    """``thread kill`` does not take the step lock, so it can archive a thread between a
    step's head move and that step's own archive (its last step reached maxRounds). The step
    was recorded and must say so, with the thread's status ``killed``."""

    class KillAfterMove(MemoryThreads):
        def move(self, thread: ThreadId, expected: NodeHash, new: NodeHash, **kw: Any) -> None:
            super().move(thread, expected, new, **kw)
            threads.kill(backend, thread)  # the racing `thread kill`

    workflows.put_workflow(backend, EXAMPLES / "solve-issue.yaml")
    tid = ThreadId(threads.start(backend, "solve-issue", "x", max_rounds=1)["thread"])
    racing = KillAfterMove(backend.nodes)
    racing._active = backend.threads._active
    backend.threads = racing
    result = step.step(backend, tid, agent="x", runner=agent(backend))
    assert (result.role, result.done, result.status) == ("planner", True, "killed")
    entry = backend.threads.history_entry(tid)
    assert entry is not None and (entry.head, entry.status) == (result.head, "killed")


def test_max_rounds_archives_after_the_last_allowed_step(backend: MemoryBackend) -> None:
    workflows.put_workflow(backend, EXAMPLES / "solve-issue.yaml")
    tid = ThreadId(threads.start(backend, "solve-issue", "x", max_rounds=2)["thread"])
    results = step.step_many(
        backend, tid, 10, on_result=lambda r: None, agent="x", runner=agent(backend)
    )
    assert [(r.role, r.status) for r in results] == [
        ("planner", "active"),
        ("developer", "max_rounds"),
    ]


def test_step_many_hands_over_each_step_before_a_failure(
    backend: MemoryBackend, thread: ThreadId
) -> None:
    fake = agent(backend)
    seen: list[str | None] = []

    def flaky(plan: StepPlan, env: dict[str, str], stop: Callable[[], bool]) -> Finished:
        if plan.role == "developer":
            return Finished(1, "", "error: out of tokens\n")
        return fake(plan, env, stop)

    with pytest.raises(AgentFailed):
        step.step_many(
            backend, thread, 5, on_result=lambda r: seen.append(r.role), agent="x", runner=flaky
        )
    assert seen == ["planner"]
