"""The agent context reads history only as far back as the role's last visit, and the prompt
built from that tail is exactly the prompt built from the whole chain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support import DEV, PLAN, REJECT
from uwf.agent_kit.context import build_context
from uwf.agent_kit.prompts import build_agent_prompt
from uwf.backend.fs import FsBackend
from uwf.backend.fs.nodes import FsStore

LOOP = {"planner": [PLAN], "developer": [DEV], "reviewer": [REJECT]}  # never ends


@pytest.fixture
def looping(cli: Any, new_thread: Any, scenario: Any) -> Any:
    agent = scenario(LOOP)

    def make(steps: int) -> str:
        thread = new_thread()
        r = cli("thread", "step", thread, "--agent", agent, "-c", str(steps))
        assert r.code == 0, r.err
        return str(thread)

    return make


def prompt(ctx: Any, steps: Any, offset: int, first_visit: bool) -> str:
    return build_agent_prompt(
        format_instruction="FORMAT",
        role_def=ctx.role_def,
        task=ctx.task,
        steps=steps,
        role=ctx.role,
        edge_prompt=ctx.edge_prompt,
        first_visit=first_visit,
        cli_reference="REF",
        offset=offset,
    )


@pytest.mark.parametrize("role", ["planner", "developer", "reviewer"])
def test_tail_prompt_equals_full_prompt(root: Path, looping: Any, role: str) -> None:
    thread = looping(8)  # planner, then developer/reviewer four times
    ctx = build_context(FsBackend(root), thread, role, "EDGE")
    since, offset = ctx.since_last_visit()
    assert offset + len(since) == ctx.depth == 8
    # a session's continuation needs only the steps since the role's last visit…
    assert prompt(ctx, since, offset, False) == prompt(ctx, ctx.steps, 0, False)
    # …while the full prompt shows the thread, the plan of step 1 included, on every visit
    full = prompt(ctx, ctx.history.steps, ctx.history.offset, True)
    assert "### Step 1: planner" in full and "### Step 8:" in full
    assert "### Step 1: planner" not in prompt(ctx, since, offset, False)
    assert ctx.is_first_visit is False  # every role of the loop has spoken before
    last = ctx.last_visit
    assert last is not None and last["role"] == role


def test_first_visit_of_a_new_role(root: Path, new_thread: Any) -> None:
    thread = new_thread()
    ctx = build_context(FsBackend(root), thread, "planner", "EDGE")
    assert ctx.since_last_visit() == ([], 0)
    assert ctx.is_first_visit and ctx.last_visit is None and ctx.visit == 1


def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    original = FsStore._load

    def counting(self: FsStore, h: str) -> Any:
        reads.append(h)
        return original(self, h)

    monkeypatch.setattr(FsStore, "_load", counting)
    return reads


def test_reads_do_not_grow_with_thread_length(
    root: Path, looping: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    short, long = looping(5), looping(25)
    reads = count_reads(monkeypatch)
    counts = []
    for thread in (short, long):
        reads.clear()
        ctx = build_context(FsBackend(root), thread, "reviewer", "EDGE")
        since, offset = ctx.since_last_visit()
        prompt(ctx, since, offset, first_visit=False)
        counts.append(len(reads))
    assert counts[0] == counts[1]


def test_an_agent_run_on_a_thread_that_is_not_active(root: Path, cli: Any, new_thread: Any) -> None:
    """An agent says why it has no thread to step in the words of ``thread step``, on every
    backend (no file name: PostgreSQL has no threads.yaml)."""
    from uwf.util.errors import NotActive, NotFound

    ghost = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
    with pytest.raises(NotFound) as missing:
        build_context(FsBackend(root), ghost, "planner", "EDGE")
    assert missing.value.message == f"thread not found: {ghost}"
    thread = new_thread()
    assert cli("thread", "kill", thread).code == 0
    with pytest.raises(NotActive) as killed:
        build_context(FsBackend(root), thread, "planner", "EDGE")
    assert killed.value.message == f"thread not active: {thread} (status: killed)"
