"""uwf as a Python library (docs/api.md): a lazy top level, frozen typed records, the CLI's
errors and rules, on both backends."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import uwf
from support import EXAMPLES, REPO
from uwf.engine.step import fleet
from uwf.testing import Clock, ScriptedAgent, answer

OUTPUTS = {
    "planner": [{"output": {"status": "_", "plan": "p", "steps": ["a"]}}],
    "developer": [{"output": {"status": "_", "filesChanged": ["a.py"], "summary": "s"}}],
    "reviewer": [
        {"output": {"status": "rejected", "comments": "add tests"}},
        {"output": {"status": "approved", "comments": "ok"}},
    ],
}


def test_import_uwf_loads_nothing_but_its_version() -> None:
    """``import uwf`` is cheap: each public name is imported on first use."""
    code = "import sys, json, uwf; print(json.dumps(sorted(m for m in sys.modules if 'uwf' in m)))"
    loaded = json.loads(subprocess.check_output([sys.executable, "-c", code], text=True))
    assert loaded == ["uwf"]
    code = "import sys, uwf; uwf.Store; print('uwf.engine.step' in sys.modules)"
    assert subprocess.check_output([sys.executable, "-c", code], text=True).strip() == "True"


def test_every_public_name_resolves_and_is_typed_for_checkers() -> None:
    """``__all__``, the lazy table and what type checkers are shown (``__init__.pyi``) name
    the same things, each from the module it lives in."""
    import ast

    stub = ast.parse((REPO / "src" / "uwf" / "__init__.pyi").read_text(encoding="utf-8"))
    typed = {
        alias.name: node.module
        for node in stub.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    [listed] = [n for n in stub.body if isinstance(n, ast.Assign)]
    assert set(ast.literal_eval(listed.value)) == set(uwf.__all__)
    assert set(typed) == set(uwf.__all__) - {"__version__"} == set(uwf._WHERE)
    for name, module in typed.items():
        assert uwf._WHERE[name] == module and getattr(uwf, name) is not None, name
    assert set(dir(uwf)) >= set(uwf.__all__)
    with pytest.raises(AttributeError, match="module 'uwf' has no attribute 'nothing'"):
        _ = uwf.nothing  # type: ignore[attr-defined]
    from uwf.util.errors import UwfError

    assert uwf.UwfError is UwfError


def test_a_thread_driven_to_its_end_through_the_api(any_store: str, root: Path) -> None:
    with uwf.open_store() as store:
        put = store.put_workflow(EXAMPLES / "solve-issue.yaml")
        assert put == uwf.WorkflowPut("solve-issue", put.hash, ())
        assert uwf.WorkflowInfo("solve-issue", put.hash, "global") in store.workflows()
        started = store.start("solve-issue", "Fix the login bug", priority=2)
        assert started == uwf.Started(started.thread, put.hash)
        before = store.show(started.thread)
        assert (before.status, before.steps, before.priority) == ("idle", 0, 2)
        agent = ScriptedAgent(OUTPUTS)
        first = store.run(started.thread, agent=agent, count=2)
        assert (first.outcome, [s.role for s in first.steps]) == ("count", ["planner", "developer"])
        rest = store.run(started.thread, agent=agent)
        assert rest.outcome == "done" and rest.status == "completed"
        assert [s.role for s in rest.steps] == ["reviewer", "developer", "reviewer"]
        assert len(agent.calls) == 5 and agent.calls[0].role == "planner"

        state = store.show(started.thread)
        assert (state.done, state.status, state.steps) == (True, "completed", 5)
        assert state.head == rest.steps[-1].head and isinstance(state.cost, uwf.Cost)
        chain = store.steps(started.thread)
        assert chain.start.prompt == "Fix the login bug"
        assert [s.number for s in chain.steps] == [1, 2, 3, 4, 5]
        assert chain.steps[2].output == {"status": "rejected", "comments": "add tests"}
        assert {s.agent for s in chain.steps} == {"scripted"}
        markdown = store.read(started.thread)
        assert markdown.startswith(f"# Thread `{started.thread}`") and "## Step 5: reviewer" in (
            markdown
        )
        listed = store.threads(status="completed")
        assert [t.thread for t in listed] == [started.thread] and listed[0].task == (
            "Fix the login bug"
        )
        assert store.threads() == ()  # active ones only, by default
        with pytest.raises(dataclasses.FrozenInstanceError):
            state.status = "idle"  # type: ignore[misc]


def test_fork_kill_answer_resume_and_their_errors(root: Path) -> None:
    with uwf.open_store(root) as store:
        store.put_workflow(EXAMPLES / "solve-issue.yaml")
        thread = store.start("solve-issue", "Fix it").thread
        store.run(thread, agent=ScriptedAgent(OUTPUTS), count=2)
        forked = store.fork(thread, at=1)
        assert forked.forked_from == store.steps(thread).steps[0].hash
        assert store.show(forked.thread).steps == 1

        # answered by a person: the reviewer's step, written and routed
        landed = store.answer(thread, {"comments": "fine"}, status="approved")
        assert (landed.role, landed.status) == ("reviewer", "completed")
        with pytest.raises(uwf.NotActive) as ended:
            store.step(thread, agent=ScriptedAgent(OUTPUTS))
        assert ended.value.loop_code == 3 and uwf.exit_code(ended.value) == 1

        # a deferral, then a resume that answers it
        waits = ScriptedAgent({"developer": [{"exit": 75, "stderr": "error: which file?"}]})
        run = store.run(forked.thread, agent=waits)
        assert run.outcome == "waiting" and run.waiting is not None
        assert (run.waiting.role, run.waiting.reason) == ("developer", "which file?")
        resumed = store.resume(forked.thread, "the one in src/", agent=ScriptedAgent(OUTPUTS))
        assert resumed.role == "developer" and store.show(forked.thread).waiting is None

        store.kill(forked.thread)
        assert store.show(forked.thread).status == "killed"
        with pytest.raises(uwf.NotFound):
            store.show("01ARZ3NDEKTSV4RRFFQ69G5FAV")
        with pytest.raises(uwf.UsageError):
            store.run(thread, count=0)


def test_check_workflow_writes_nothing(tmp_path: Path) -> None:
    checked = uwf.check_workflow(EXAMPLES / "solve-issue.yaml")
    assert checked.ok and checked.name == "solve-issue" and checked.hash is not None
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\n")
    refused = uwf.check_workflow(bad)
    assert not refused.ok and refused.hash is None and refused.problems


def test_a_fan_out_is_drained_in_process(root: Path) -> None:
    """``drain`` steps every thread it can until none is left: the parent fans out, the
    children run, then the parent's join (what ``uwf worker`` does, in this process)."""
    with uwf.open_store() as store:
        store.put_workflow(EXAMPLES / "dev-task.yaml")
        store.put_workflow(EXAMPLES / "plan-parallel.yaml")
        thread = store.start("plan-parallel", "Ship the release").thread
        import yaml

        roles = yaml.safe_load((EXAMPLES / "plan-parallel.mock.yaml").read_text())["roles"]
        landed = store.drain(agent=ScriptedAgent(roles))
        state = store.show(thread)
        assert state.status == "completed", state
        children = store.threads(parent=thread)
        assert children and {c.status for c in children} == {"completed"}
        assert {r.thread for r in landed} == {thread, *(c.thread for c in children)}


def test_a_python_agent_named_in_config_runs_for_the_api_too(root: Path) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(
        "agents:\n"
        f"  mock: {{python: uwf-mock, args: [--scenario, {EXAMPLES / 'solve-issue.mock.yaml'}]}}\n"
        "defaultAgent: mock\n"
    )
    with uwf.open_store() as store:
        store.put_workflow(EXAMPLES / "solve-issue.yaml")
        thread = store.start("solve-issue", "Fix it").thread
        assert store.run(thread).outcome == "done"
        assert {s.agent for s in store.steps(thread).steps} == {"uwf-mock"}


def test_the_clock_ends_a_workers_idle_wait_at_once(root: Path) -> None:
    """An idle worker with --idle-exit of an hour: on a test's clock, its back-off sleeps
    move the clock instead of waiting."""
    with uwf.open_store() as store, Clock() as clock:
        said: list[str] = []
        began, clock_began = time.monotonic(), clock.monotonic()
        summary = fleet.Worker(store.backend, emit=print, say=said.append, idle_exit=3600).run()
        assert summary == {"steps": 0, "failed": 0}
        assert clock.monotonic() - clock_began >= 3600 and time.monotonic() - began < 30
        assert said[-1].startswith("idle for 3600")


def test_answer_helper_writes_frontmatter() -> None:
    assert answer("Body.", status="_", steps=["a"]) == "---\nstatus: _\nsteps:\n- a\n---\nBody."
