"""Finding a step by its number (docs/format.md, "The step index"): ``thread steps --at N``,
``thread fork <thread> --at N``, and the per-start index file in the machine's cache that
makes a lookup a few reads at any depth, kept right across new steps and forks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from uwf.backend.fs import FsBackend
from uwf.model import chain, stepindex
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash
from uwf.util.errors import CorruptNode


def build(backend: Any, steps: int, *, after: str | None = None, depth: bool = True) -> list[str]:
    """A StartNode and ``steps`` StepNodes after it (or after the step ``after``); their
    hashes, the start first (or the steps only, with ``after``)."""
    store = backend.nodes
    h = schemas.ensure(store)
    text = store.put(h.text, "an output")
    if after is None:
        start = store.put(h.start, {"workflow": text, "prompt": "task"})  # never read here
        prev, first, out = None, 1, [start]
    else:
        node = chain.require_step(store, after)
        start, prev, first, out = node.start, after, (node.depth or 0) + 1, []
    for k in range(first, first + steps):
        payload = {
            "start": start,
            "prev": prev,
            "role": "dev",
            "output": store.put(h.text, f"output {k}"),
            "detail": text,
            "agent": "test",
            "edgePrompt": f"from {prev} at {k}",
        }
        if depth:
            payload["depth"] = k
        prev = store.put(h.step, payload)
        out.append(prev)
    return out


@pytest.fixture
def backend(root: Path) -> FsBackend:
    return FsBackend(root)


class Reads:
    """Counts the nodes a lookup reads."""

    def __init__(self, backend: FsBackend, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = backend.nodes.get

        def get(h: str, *, keep: bool = True) -> Any:
            self.count += 1
            return real(h, keep=keep)

        monkeypatch.setattr(backend.nodes, "get", get)


def at(backend: Any, head: str, number: int) -> str:
    return str(
        stepindex.step_at(backend, chain.load_head(backend.nodes, NodeHash(head)), number).hash
    )


def test_steps_at_prints_step_n_as_thread_steps_lists_it(
    cli: Any, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    agent = scenario()
    for _ in range(4):
        assert cli("thread", "step", thread, "--agent", agent).code == 0
    listed = cli("thread", "steps", thread).json()["steps"]
    for n in range(5):
        found = cli("thread", "steps", thread, "--at", str(n)).json()
        assert found == {"thread": thread, "number": n, **listed[n]}
    table = cli("thread", "steps", thread, "--at", "0", "--format", "table").out.splitlines()
    assert table[0].split() == ["#", "HASH", "ROLE", "STATUS", "AGENT", "TOOK", "TOKENS", "AGE"]
    assert table[1].split()[:3] == ["0", listed[0]["hash"], "(task)"] and len(table) == 2
    table = cli("thread", "steps", thread, "--at", "3", "--format", "table").out.splitlines()
    assert table[1].split()[:3] == ["3", listed[3]["hash"], listed[3]["role"]]
    assert len(table) == 2
    r = cli("thread", "steps", thread, "--at", "5")
    assert (r.code, r.err) == (1, "error: no step 5: the thread has 4 steps (0 is its start)\n")
    for bad in ("-1", "x", "1.5", ""):
        r = cli("thread", "steps", thread, "--at", bad)
        assert r.code == 2
        assert r.err == f"error: --at must be a step number (0 is the thread's start), got: {bad}\n"


def test_fork_at_n_forks_the_thread_at_its_step_n(cli: Any, new_thread: Any, scenario: Any) -> None:
    thread = new_thread()
    agent = scenario()
    for _ in range(3):
        assert cli("thread", "step", thread, "--agent", agent).code == 0
    steps = cli("thread", "steps", thread).json()["steps"]
    for n in (0, 2, 3):
        forked = cli("thread", "fork", thread, "--at", str(n)).json()
        assert forked["forkedFrom"] == {"step": steps[n]["hash"]}
        assert cli("thread", "show", forked["thread"]).json()["head"] == steps[n]["hash"]
    r = cli("thread", "fork", thread, "--at", "4")
    assert (r.code, r.err) == (1, "error: no step 4: the thread has 3 steps (0 is its start)\n")
    # the v0.5.0 name takes it too
    assert cli("step", "fork", thread, "--at", "1").json()["forkedFrom"] == {
        "step": steps[1]["hash"]
    }


def test_a_lookup_reads_a_few_nodes_at_any_depth(
    backend: FsBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes = build(backend, 300)
    assert at(backend, nodes[-1], 10) == nodes[10]  # the first lookup walks the chain once
    index = stepindex.path_of(backend.root, NodeHash(nodes[0]))
    assert index.read_text() == "".join(f"{h}\n" for h in nodes[1:])
    reads = Reads(backend, monkeypatch)
    for n in (1, 150, 299):
        assert at(backend, nodes[-1], n) == nodes[n]
    assert reads.count <= 3 * 3  # the head, its start, the step: whatever the depth


def test_new_steps_extend_the_index_by_a_walk_of_those_steps(
    backend: FsBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes = build(backend, 50)
    assert at(backend, nodes[-1], 5) == nodes[5]
    more = build(backend, 7, after=nodes[-1])
    reads = Reads(backend, monkeypatch)
    assert at(backend, more[-1], 20) == nodes[20]
    assert reads.count <= 7 + 4  # the seven new steps walked once, then a lookup
    index = stepindex.path_of(backend.root, NodeHash(nodes[0]))
    assert index.read_text() == "".join(f"{h}\n" for h in [*nodes[1:], *more])


def test_forks_of_one_start_share_the_file_and_stay_right(backend: FsBackend) -> None:
    nodes = build(backend, 40)
    branch = build(backend, 15, after=nodes[25])  # a fork at 25, stepped 15 times
    for _ in range(2):  # alternating between the branches rewrites the file each time
        assert [at(backend, nodes[-1], n) for n in (1, 25, 26, 40)] == [
            nodes[1],
            nodes[25],
            nodes[26],
            nodes[40],
        ]
        assert [at(backend, branch[-1], n) for n in (1, 25, 26, 40)] == [
            nodes[1],
            nodes[25],
            branch[0],
            branch[14],
        ]
    index = stepindex.path_of(backend.root, NodeHash(nodes[0]))
    assert index.read_text() == "".join(f"{h}\n" for h in [*nodes[1:26], *branch])


def test_a_damaged_or_edited_index_is_repaired_or_refused(backend: FsBackend) -> None:
    nodes = build(backend, 30)
    assert at(backend, nodes[-1], 3) == nodes[3]
    index = stepindex.path_of(backend.root, NodeHash(nodes[0]))
    index.write_bytes(b"garbage\x00" * 5)  # not lines of hashes: walked and rewritten
    assert at(backend, nodes[-1], 7) == nodes[7]
    assert index.read_text() == "".join(f"{h}\n" for h in nodes[1:])
    lines = index.read_text().splitlines()
    lines[9] = lines[10]  # an edit that keeps the head's line: the named node is checked
    index.write_text("".join(f"{x}\n" for x in lines))
    with pytest.raises(CorruptNode) as info:
        at(backend, nodes[-1], 10)
    assert str(info.value) == f"step index {index} names {nodes[11]} for step 10"
    index.unlink()  # a cache: deleting it costs one walk
    assert at(backend, nodes[-1], 10) == nodes[10]


def test_steps_without_depth_are_found_by_walking(backend: FsBackend) -> None:
    nodes = build(backend, 12, depth=False)
    assert [at(backend, nodes[-1], n) for n in (0, 1, 6, 12)] == [
        nodes[0],
        nodes[1],
        nodes[6],
        nodes[12],
    ]
    assert not stepindex.path_of(backend.root, NodeHash(nodes[0])).exists()


def test_an_unwritable_cache_costs_a_walk_not_the_lookup(backend: FsBackend) -> None:
    nodes = build(backend, 10)
    (backend.root / "cache").mkdir(parents=True, exist_ok=True)
    (backend.root / "cache" / "steps").write_text("a file where the directory should be")
    assert at(backend, nodes[-1], 4) == nodes[4]


def test_a_lookup_through_the_thread_on_any_backend(
    any_store: str, cli_proc: Any, scenario: Any
) -> None:
    assert (
        cli_proc(
            "workflow", "put", str(Path(__file__).parent.parent / "examples" / "solve-issue.yaml")
        ).code
        == 0
    )
    thread = cli_proc("thread", "start", "solve-issue", "-p", "task").json()["thread"]
    agent = scenario()
    for _ in range(3):
        assert cli_proc("thread", "step", thread, "--agent", agent).code == 0
    listed = cli_proc("thread", "steps", thread).json()["steps"]
    assert cli_proc("thread", "steps", thread, "--at", "2").json()["hash"] == listed[2]["hash"]
    forked = cli_proc("thread", "fork", thread, "--at", "1").json()
    assert forked["forkedFrom"] == {"step": listed[1]["hash"]}
