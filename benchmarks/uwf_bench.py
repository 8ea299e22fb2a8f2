"""uwf side of the benchmark: storage roots built with the library, measured through the CLI.

Running 10,000 real ``uwf thread step`` calls would take an hour, so long threads are built
in-process with uwf's own code, node for node what ``uwf thread step`` with ``uwf-mock``
writes: the role outputs go through the agent kit's frontmatter fast path (validated against
the role schemas), the AgentTurn and MockDetail nodes use ``uwf.agent_kit.runner.TURN_SCHEMA``
and ``uwf.agents.mock.DETAIL``, the edge prompts come from the moderator, and the StepNodes
carry ``start``/``prev``/``depth`` as the agent kit writes them. Everything goes through
``Store.put`` (hashing, schema validation, the type index); only ``fsync`` is skipped while
building (the files are identical; ``os.sync()`` runs before anything is measured).
``tests/test_benchmarks.py`` checks that a built chain has exactly the hashes that real
``uwf thread step`` calls produce.

Every figure is then measured through the real CLI in fresh processes.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import multiprocessing
import os
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

from harness import Usage, file_usage, tree_usage

from uwf.backend.fs import FsBackend
from uwf.model.cost import Cost
from uwf.util.base32 import NodeHash

REPO = Path(__file__).resolve().parent.parent
WORKFLOW_FILE = REPO / "examples" / "solve-issue.yaml"
BIN = Path(sys.executable).parent
ZERO = Cost().total_json()  # the cost total uwf-mock's details carry (it records no cost)

# The no-op loop: planner once, then developer and reviewer for ever (the reviewer rejects).
SCENARIO: dict[str, str] = {
    "planner": "---\nstatus: _\nplan: no-op\nsteps: []\n---\n",
    "developer": "---\nstatus: _\nfilesChanged: []\nsummary: no-op\n---\n",
    "reviewer": "---\nstatus: rejected\ncomments: again\n---\n",
}


def cli_env(root: Path) -> dict[str, str]:
    """The environment every measured ``uwf`` runs with (``uwf-mock`` found on PATH)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UWF_", "WORKFLOW_"))}
    env["UNCAGED_WORKFLOW_STORAGE_ROOT"] = str(root)
    env["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    return env


def uwf(*args: str) -> list[str]:
    return [str(BIN / "uwf"), *args]


def write_scenario(path: Path) -> Path:
    """The uwf-mock scenario of the loop (JSON is YAML)."""
    path.write_text(json.dumps({"roles": {r: [o] for r, o in SCENARIO.items()}}, indent=1))
    return path


def setup_root(root: Path, scenario: Path) -> str:
    """A storage root with the solve-issue workflow registered and uwf-mock as the default
    agent (config.yaml, as a user would set it up). Returns the workflow hash."""
    from uwf.engine.workflows import stored as workflows

    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(
        "agents:\n  mock:\n    command: uwf-mock\n"
        f"    args: [--scenario, {json.dumps(str(scenario))}]\n"
        "defaultAgent: mock\n"
    )
    return workflows.put_workflow(FsBackend(root), WORKFLOW_FILE).hash


@contextlib.contextmanager
def bulk_writes() -> Iterator[None]:
    """Skip fsync while building (the bytes written are the same), then flush everything so
    that writeback does not run under the measurements."""
    with mock.patch("os.fsync", lambda fd: None):
        yield
    os.sync()


class ChainBuilder:
    """Writes threads into a storage root exactly as ``uwf thread step`` + ``uwf-mock`` would."""

    def __init__(self, root: Path, workflow_hash: str, scenario: Path) -> None:
        from uwf.agent_kit import runner
        from uwf.agents import mock as mock_agent
        from uwf.model import chain
        from uwf.protocol import schemas

        self.root = root
        self.scenario = str(scenario)
        self.backend = FsBackend(root)
        self.store = self.backend.nodes
        self.types = schemas.ensure(self.store)
        self.workflow_hash = workflow_hash
        self.workflow = chain.load_workflow(self.store, NodeHash(workflow_hash))
        self.turn_type = self.store.put_schema(runner.TURN_SCHEMA)
        self.detail_type = self.store.put_schema(mock_agent.DETAIL)
        self._outputs: dict[str, tuple[str, str, Any]] = {}

    def start(self, prompt: str) -> str:
        """The StartNode of a thread on the workflow (what ``thread start`` stores)."""
        return self.store.put(self.types.start, {"workflow": self.workflow_hash, "prompt": prompt})

    def _output(self, role: str) -> tuple[str, str, Any]:
        """(output hash, turn hash, output payload) of a role's scripted answer: the same on
        every visit, so stored once (as the real store deduplicates them)."""
        from uwf.agent_kit import frontmatter

        if role not in self._outputs:
            raw = SCENARIO[role]
            schema_hash = self.workflow["roles"][role]["meta"]
            found = frontmatter.offer(raw, schema_hash, self.store)
            if found.hash is None:
                raise RuntimeError(f"the benchmark's {role} output does not fit its schema")
            turn = self.store.put(self.turn_type, {"index": 0, "role": "assistant", "content": raw})
            payload = self.store.require(found.hash).payload
            self._outputs[role] = (found.hash, turn, payload)
        return self._outputs[role]

    def extend(self, start: str, steps: int) -> list[str]:
        """``steps`` StepNodes after the StartNode ``start``; returns their hashes, oldest first."""
        from uwf.moderator.evaluate import START, evaluate

        graph = self.workflow["graph"]
        decision = evaluate(graph, START, {})
        visits: Counter[str] = Counter()
        prev: str | None = None
        out: list[str] = []
        for depth in range(1, steps + 1):
            role = decision.role
            visits[role] += 1
            output, turn, payload = self._output(role)
            detail = self.store.put(
                self.detail_type,
                # uwf-mock carries the chain's cost total on (all zero: it records none)
                {"scenario": self.scenario, "visit": visits[role], "total": ZERO, "turns": [turn]},
            )
            prev = self.store.put(
                self.types.step,
                {
                    "start": start,
                    "prev": prev,
                    "role": role,
                    "output": output,
                    "detail": detail,
                    "agent": "uwf-mock",
                    "edgePrompt": decision.prompt,
                    "depth": depth,
                },
            )
            out.append(prev)
            decision = evaluate(graph, role, payload)
        return out

    def register(self, heads: dict[str, str]) -> None:
        """Make threads active (as ``thread start`` records them), in one threads.yaml write."""
        from uwf.backend.base import ActiveThread, ThreadInfo
        from uwf.util.ulid import ThreadId

        info = ThreadInfo(NodeHash(self.workflow_hash), "benchmark task")
        self.backend.threads.create_many(
            [ActiveThread(ThreadId(t), NodeHash(h), info) for t, h in heads.items()]
        )

    def step_path(self, h: str) -> Path:
        return self.store.path(h)

    def step_index(self) -> Path:
        return self.store.index_dir / self.types.step


def new_thread_id() -> str:
    from uwf.util.ulid import new_thread_id as new_id

    return new_id()


@dataclass
class ThreadsRoot:
    """The main root: threads of ``small``, ``mid`` and ``large`` steps on one store."""

    root: Path
    threads: dict[str, str]  # small/mid/large -> thread id
    steps: dict[str, list[str]]  # small/mid/large -> StepNode hashes, oldest first
    engine_bytes: dict[str, Usage]  # early/late -> StepNode files + type-index growth per step
    seconds: float
    window: int


def build_threads_root(
    root: Path, scenario: Path, small: int, mid: int, large: int, window: int
) -> ThreadsRoot:
    t0 = time.perf_counter()
    wf = setup_root(root, scenario)
    with bulk_writes():
        b = ChainBuilder(root, wf, scenario)
        threads: dict[str, str] = {}
        steps: dict[str, list[str]] = {}
        index_sizes: dict[int, Usage] = {}
        for name, count in (("small", small), ("mid", mid), ("large", large)):
            start = b.start(f"benchmark task {name}")
            if name == "large":
                # the type index only grows by the large thread's steps from here on
                before = file_usage(b.step_index())
                steps[name] = b.extend(start, count)
                index_growth = file_usage(b.step_index()) - before
                index_sizes[count] = index_growth
            else:
                steps[name] = b.extend(start, count)
            threads[name] = new_thread_id()
        b.register({threads[n]: steps[n][-1] for n in threads})
    chain = steps["large"]
    per_index = Usage(
        index_sizes[large].apparent // large, index_sizes[large].blocks // large, 0
    )  # 14 B a line; blocks amortised over the whole thread

    def window_usage(first: int, last: int) -> Usage:
        total = Usage()
        for h in chain[first:last]:  # steps first+1 .. last
            total = total + file_usage(b.step_path(h))
        return Usage(
            total.apparent // (last - first) + per_index.apparent,
            total.blocks // (last - first) + per_index.blocks,
            1,
        )

    return ThreadsRoot(
        root=root,
        threads=threads,
        steps=steps,
        engine_bytes={
            "early": window_usage(small, small + window),
            "late": window_usage(large - window, large),
        },
        seconds=time.perf_counter() - t0,
        window=window,
    )


def build_list_root(root: Path, scenario: Path, count: int) -> float:
    """``count`` active threads, each with its own task and one step done (the planner's)."""
    t0 = time.perf_counter()
    wf = setup_root(root, scenario)
    with bulk_writes():
        b = ChainBuilder(root, wf, scenario)
        heads = {}
        for i in range(count):
            start = b.start(f"benchmark task {i}")
            heads[new_thread_id()] = b.extend(start, 1)[-1]
        b.register(heads)
    return time.perf_counter() - t0


# -- the large store ----------------------------------------------------------------------


@dataclass
class CasRoot:
    root: Path
    text_hash: str  # the node ``cas get`` reads
    workflow: str
    nodes: int = 0
    fill_seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def _fill_chunk(job: tuple[str, str, int, int]) -> int:
    """Write filler Text nodes ``start..stop`` straight to their files: the same name and
    bytes the store would write (mode 0444), no temp file, no fsync, no type-index line."""
    from uwf.cas import codec
    from uwf.util.jsonfmt import dumps

    objects, type_hash, start, stop = job
    made: set[str] = set()
    for i in range(start, stop):
        payload = f"filler node {i}"
        h = codec.node_hash(type_hash, payload)
        fan = os.path.join(objects, h[:2])
        if fan not in made:
            os.makedirs(fan, exist_ok=True)
            made.add(fan)
        data = dumps({"type": type_hash, "payload": payload, "timestamp": 0}).encode()
        fd = os.open(os.path.join(fan, h), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    return stop - start


def fill(root: Path, start: int, stop: int, workers: int = 0) -> float:
    """Filler nodes ``start..stop`` into the store of ``root``, in parallel; seconds taken."""
    from uwf.protocol import schemas

    t0 = time.perf_counter()
    objects = str(root / "cas" / "objects")
    text = schemas.hashes().text
    chunk = 20_000
    jobs = [(objects, text, i, min(i + chunk, stop)) for i in range(start, stop, chunk)]
    workers = workers or max(1, min(os.cpu_count() or 1, 4))
    if len(jobs) <= 1 or workers == 1:
        for job in jobs:
            _fill_chunk(job)
    else:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            for _ in pool.imap_unordered(_fill_chunk, jobs):
                pass
    os.sync()
    return time.perf_counter() - t0


def setup_cas_root(root: Path, scenario: Path) -> CasRoot:
    """A root with the workflow and one Text node put through the CLI's own code."""
    from uwf.engine.store import cas as casops

    wf = setup_root(root, scenario)
    text = casops.put_text(FsBackend(root), "the node we read")["hash"]
    return CasRoot(root=root, text_hash=text, workflow=wf)


# -- packs --------------------------------------------------------------------------------


def packed_step_bytes(root: Path, steps: list[str]) -> Usage:
    """Disk per StepNode once packed: its record and index entry (``NodeInfo.size`` of a
    node that only a pack holds) plus its type-index line; blocks in proportion to what the
    pack files take on disk (one pack: only its last block is partly empty)."""
    from uwf.backend.fs.packs import NAME_LEN

    store = FsBackend(root).nodes
    apparent = 0
    for h in steps:
        if store.loose_bytes(h) is not None:
            raise RuntimeError(f"step {h} is still a loose file after cas pack")
        info = store.info(h)
        assert info is not None
        apparent += info.size + NAME_LEN + 1  # + the type-index line
    files = tree_usage(store.pack_dir)
    per_step = apparent / len(steps)
    return Usage(round(per_step), round(per_step * files.blocks / files.apparent), 1)


def _filler_source(type_hash: str, i: int) -> Any:
    from uwf.backend.fs.packs import Source
    from uwf.cas import codec
    from uwf.util.jsonfmt import dumps

    payload = f"filler node {i}"
    data = dumps({"type": type_hash, "payload": payload, "timestamp": 0}).encode()
    return Source(codec.node_hash(type_hash, payload), lambda: data, 0)


def fill_packed(root: Path, count: int) -> float:
    """Pack the root's loose nodes together with ``count`` filler Text nodes, written
    straight into one pack (the same records ``uwf cas pack`` would write for loose filler
    files, without writing and removing a million files first). Seconds taken."""
    from uwf.backend.fs import packs
    from uwf.protocol import schemas

    t0 = time.perf_counter()
    store = FsBackend(root).nodes
    loose = [(h, store.path(h)) for h in store.iter_hashes()]
    text = schemas.hashes().text
    sources = [packs.Source(h, path.read_bytes, 0) for h, path in loose]
    sample = [s.load() for s in sources] + [_filler_source(text, i).load() for i in range(64)]
    filler = (_filler_source(text, i) for i in range(count))
    packs.write(store.pack_dir, itertools.chain(sources, filler), packs.dictionary(sample))
    for _, path in loose:
        path.unlink()
    os.sync()
    return time.perf_counter() - t0
