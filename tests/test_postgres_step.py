"""One commit per step on PostgreSQL (docs/format.md, "One commit per step"): what a step's
agent writes is held in uwf's process, readable there and nowhere else, and lands in the
transaction of the head's move; a step that fails writes none of it; a step that holds more
than ``STAGE_BYTES`` writes what it holds at once (a node before its head is inert)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import pgserver
import uwf
from support import EXAMPLES
from uwf.model.agentcall import AgentCall
from uwf.protocol import schemas
from uwf.testing import ScriptedAgent, answer

PLAN = answer("Planned.", status="_", plan="p", steps=["a"])


def stored(url: str, hashes: list[str]) -> set[str]:
    """Which of ``hashes`` another session finds stored (committed)."""
    with pgserver.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT hash FROM uwf_nodes WHERE hash = ANY(%s)", (hashes,))
        return {str(row[0]) for row in rows.fetchall()}


@pytest.fixture
def store(pg_url: str, root: Any) -> Iterator[Any]:
    with uwf.open_store(pg_url) as opened:
        opened.put_workflow(EXAMPLES / "solve-issue.yaml")
        yield opened


def test_a_steps_nodes_land_with_its_head(store: Any, pg_url: str) -> None:
    script = ScriptedAgent({"planner": [PLAN]})
    seen: dict[str, Any] = {}

    def agent(call: AgentCall, /) -> str:
        h = script(call)
        nodes = call.backend.nodes
        node = nodes.get(h)
        assert node is not None  # readable in uwf's process ...
        seen["step"], seen["output"] = h, node.payload["output"]
        seen["before"] = stored(pg_url, [h, node.payload["output"]])  # ... and nowhere else
        return h

    thread = store.start("solve-issue", "Fix it").thread
    result = store.step(thread, agent=agent)
    assert seen["before"] == set()
    assert result.head == seen["step"] == store.show(thread).head
    assert stored(pg_url, [seen["step"], seen["output"]]) == {seen["step"], seen["output"]}


def test_a_step_that_fails_writes_none_of_its_nodes(store: Any, pg_url: str) -> None:
    written: list[str] = []

    def agent(call: AgentCall, /) -> str:
        nodes = call.backend.nodes
        written.append(nodes.put(schemas.ensure(nodes).text, "notes of a step that fails"))
        assert nodes.get(written[0]) is not None
        raise RuntimeError("gave up")

    thread = store.start("solve-issue", "Fix it").thread
    head = store.show(thread).head
    with pytest.raises(uwf.AgentFailed):
        store.step(thread, agent=agent)
    assert store.show(thread).head == head
    assert written and stored(pg_url, written) == set()
    assert store.step(thread, agent=ScriptedAgent({"planner": [PLAN]})).head != head


def test_a_step_holding_too_much_writes_it_at_once(
    store: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uwf.backend.postgres import nodes as pg_nodes

    monkeypatch.setattr(pg_nodes, "STAGE_BYTES", 1000)
    found: list[set[str]] = []
    written: list[str] = []

    def agent(call: AgentCall, /) -> str:
        nodes = call.backend.nodes
        text = schemas.ensure(nodes).text
        written.append(nodes.put(text, "small"))
        found.append(stored(pg_url, written))  # held
        written.append(nodes.put(text, "x" * 2000))
        found.append(stored(pg_url, written))  # beyond the bound: both written
        raise RuntimeError("gave up")

    thread = store.start("solve-issue", "Fix it").thread
    head = store.show(thread).head
    with pytest.raises(uwf.AgentFailed):
        store.step(thread, agent=agent)
    assert found == [set(), set(written)]
    assert store.show(thread).head == head  # inert: no head names them


def test_a_step_answers_which_of_uwfs_schemas_are_stored_without_asking(
    store: Any, pg_url: str
) -> None:
    """What a step reads first (``prefetch_step``) also says which of uwf's schemas are
    stored: the agent's question when it writes its StepNode (``schemas.ensure``) is
    answered in uwf's process, not by another statement; a schema that is not stored is
    still asked about, and found missing."""
    thread = store.start("solve-issue", "Fix it").thread
    gone = schemas.hashes().eval_run  # one of them not stored (as after gc)
    with pgserver.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM uwf_nodes WHERE hash = %s", (gone,))
    stored_ones = [h for h in schemas.hashes() if h != gone]
    asked: list[tuple[set[str], int, set[str], int]] = []

    def agent(call: AgentCall, /) -> str:
        nodes = call.backend.nodes
        calls: list[str] = []
        all_rows = nodes.db.all
        nodes.db.all = lambda sql, params=(): calls.append(sql) or all_rows(sql, params)
        try:
            present = nodes.missing(stored_ones)
            counted = len(calls)
            absent = nodes.missing([gone])
            asked.append((present, counted, absent, len(calls) - counted))
        finally:
            del nodes.db.all
        return ScriptedAgent({"planner": [PLAN]})(call)

    with uwf.open_store(pg_url) as fresh:  # a process that has seen none of them
        fresh.step(thread, agent=agent)
    assert asked == [(set(), 0, {gone}, 1)]
