"""Fan-out trees bounded per root (docs/format.md, "Fan-out and join", "How far a tree grows";
docs/reliability.md, "Hostile agents", row 14), through the real CLI on both backends.

A child that runs its parent's own workflow can fan out again: with an agent emitting 20
items, one worker made 3,321 active threads in 40 s, three levels deep. Now recursion is asked
for by name (a ``fanOut`` without ``workflow`` is refused), and config.yaml's ``fanOut``
bounds every tree: ``maxDepth`` levels of children, ``maxThreads`` threads in all, counted on
the root in the same atomic change that starts them (tests/backend_contract.py races
processes for it).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import reap, spawn_uwf

pytestmark = pytest.mark.usefixtures("any_store")  # the filesystem and PostgreSQL


def role(fields: dict[str, Any]) -> dict[str, Any]:
    return {
        "description": "r",
        "goal": "g",
        "capabilities": [],
        "procedure": "p",
        "output": "o",
        "meta": {"type": "object", "properties": fields, "required": ["status"]},
    }


def tree(fan_out: dict[str, Any]) -> dict[str, Any]:
    """A planner whose subtasks each run ``fan_out``'s workflow; a reviewer joins them."""
    return {
        "name": "tree",
        "description": "Split the task, then review the parts.",
        "roles": {
            "planner": role({"status": {"type": "string", "enum": ["_"]}, "subtasks": {}}),
            "reviewer": role({"status": {"type": "string", "enum": ["done"]}}),
        },
        "graph": {
            "$START": {"_": {"role": "planner", "prompt": "Plan."}},
            "planner": {"_": {"role": "reviewer", "prompt": "Review.", "fanOut": fan_out}},
            "reviewer": {"done": {"role": "$END", "prompt": "x"}},
        },
    }


def planner(tmp_path: Path, items: int) -> str:
    """uwf-mock: every planner splits its task in ``items``; every reviewer approves."""
    subtasks = json.dumps([f"part {n}" for n in range(items)])
    path = tmp_path / "scenario.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "roles": {
                    "planner": [f"---\nstatus: _\nsubtasks: {subtasks}\n---\nA plan."],
                    "reviewer": ["---\nstatus: done\n---\nGood."],
                }
            }
        )
    )
    return f"uwf-mock --scenario {path}"


def put(cli: Any, tmp_path: Path, document: dict[str, Any]) -> Any:
    path = tmp_path / "tree.yaml"
    path.write_text(yaml.safe_dump(document))
    return cli("workflow", "put", str(path))


def test_recursion_is_asked_for_by_name(cli: Any, tmp_path: Path) -> None:
    """A fanOut without `workflow` ran the parent's own workflow: refused by `workflow put`;
    one stored by an older uwf fails the step that takes it, before its head moves."""
    refused = put(cli, tmp_path, tree({"field": "subtasks"}))
    assert refused.code == 1
    assert (
        "  - graph.planner._.fanOut.workflow: missing (expected the name of the workflow each "
        "child runs; this workflow's own name makes a recursive fan-out)"
    ) in refused.err
    assert put(cli, tmp_path, tree({"field": "subtasks", "workflow": "tree"})).code == 0
    # the node an older uwf stored: the same workflow, its fanOut naming none
    from uwf.backend import open_backend
    from uwf.protocol import schemas

    backend = open_backend()
    try:
        current = backend.registry.get("tree")
        assert current is not None
        node = backend.nodes.get(current)
        assert node is not None
        payload = json.loads(json.dumps(node.payload))
        del payload["graph"]["planner"]["_"]["fanOut"]["workflow"]
        legacy = backend.nodes.put(schemas.ensure(backend.nodes).workflow_fan_out, payload)
        backend.registry.set("tree", legacy)
    finally:
        backend.close()
    thread = cli("thread", "start", "tree", "-p", "grow").json()["thread"]
    r = cli("thread", "step", thread, "--agent", planner(tmp_path, 20))
    assert (r.code, r.err) == (
        5,
        "error: post-step moderator evaluate failed: fan-out names no workflow: its children "
        "would run this workflow again, a recursion the workflow must ask for "
        '(fanOut.workflow: its own name); docs/format.md, "Fan-out and join" (head not moved)\n',
    )
    assert len(cli("thread", "list", "--all").json()) == 1


def test_a_worker_grows_a_recursive_tree_only_to_its_limits(
    cli: Any, root: Path, tmp_path: Path
) -> None:
    """A tree that asks for recursion, each planner splitting in 2, in a tree of at most 2
    levels and 5 threads: the root's 2 children, one child's 2 (the other's would make 6),
    none below them. Each refusal fails its step with one line, the head not moved."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(
        yaml.safe_dump({"fanOut": {"maxDepth": 2, "maxThreads": 5}, "retry": {"attempts": 1}})
    )
    assert put(cli, tmp_path, tree({"field": "subtasks", "workflow": "tree"})).code == 0
    top = cli("thread", "start", "tree", "-p", "grow").json()["thread"]
    worker = spawn_uwf("worker", "--idle-exit", "2", "--agent", planner(tmp_path, 2))
    try:
        deadline = time.monotonic() + 90
        while worker.poll() is None:
            assert time.monotonic() < deadline, "the worker never went idle"
            assert len(cli("thread", "list", "--all").json()) <= 5, "the tree grew past 5"
            time.sleep(0.2)
        _, err = worker.communicate(timeout=30)
        assert worker.returncode == 0, err
    finally:
        reap(worker)
    listed = {t["thread"]: t for t in cli("thread", "list", "--all").json()}
    assert len(listed) == 5
    errors = sorted(
        cli("thread", "show", t).json()["failure"]["error"]
        for t, shown in listed.items()
        if shown["status"] == "failed"
    )
    assert len(errors) == 3
    assert sum("would pass fanOut.maxThreads (5) of config.yaml" in e for e in errors) == 1
    assert sum("would pass fanOut.maxDepth (2) of config.yaml" in e for e in errors) == 2
    assert all(
        e.startswith("post-step moderator evaluate failed: fan-out refused: ") for e in errors
    )
    parents = [t for t, shown in listed.items() if shown["status"] == "waiting"]
    assert top in parents and len(parents) == 2  # the root and the child that fanned out
    assert cli("cas", "verify").json()["ok"] is True
