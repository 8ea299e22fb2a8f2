"""uwf side of the benchmark: storage roots built with the library, measured through the CLI.

Running 10,000 real ``uwf thread step`` calls would take an hour, so long threads are built
in-process with uwf's own code, node for node what ``uwf thread step`` with the benchmark's
agent (``mock_agent.py``: uwf-mock answering from ``workload.py``) writes: each step's answer
goes through the agent kit's frontmatter fast path (validated against the role schemas), the
AgentTurn and MockDetail nodes use ``uwf.agent_kit.runner.TURN_SCHEMA`` and
``uwf.agents.mock.DETAIL``, the edge prompts come from the moderator, and the StepNodes carry
``start``/``prev``/``depth`` as the agent kit writes them. Everything goes through
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

import mock_agent
import workload

from uwf.backend.fs import FsBackend
from uwf.model.cost import Cost
from uwf.util.base32 import NodeHash

REPO = Path(__file__).resolve().parent.parent
WORKFLOW_FILE = REPO / "examples" / "solve-issue.yaml"
BIN = Path(sys.executable).parent
ZERO = Cost().total_json()  # the cost total uwf-mock's details carry (it records no cost)
AGENT = Path(__file__).resolve().parent / "mock_agent.py"
# The external-agent rows' program (the one the peers' nodes spawn) and config.yaml's alias of
# it: ``uwf-cmd`` run in the stepping process (``python: uwf-cmd``, docs/agents.md), so that
# uwf's side, like each peer's, is one tool process that spawns agent.py.
AGENT_PROGRAM = Path(__file__).resolve().parent / "agent.py"
EXTERNAL = "external"


def cli_env(root: Path) -> dict[str, str]:
    """The environment every measured ``uwf`` runs with (``uwf-mock`` found on PATH)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UWF_", "WORKFLOW_"))}
    env["UNCAGED_WORKFLOW_STORAGE_ROOT"] = str(root)
    env["PATH"] = f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"
    return env


def uwf(*args: str) -> list[str]:
    return [str(BIN / "uwf"), *args]


def task_of(name: str) -> str:
    """The task of a benchmark thread (``small``, ``large``, ``t000042``…): the key of its
    answers in ``workload.py``, the same on every side."""
    return f"benchmark task {name}"


def setup_root(root: Path) -> str:
    """A storage root with the solve-issue workflow registered and the benchmark's agent as
    the default (config.yaml, as a user would set it up), and the external agent program
    as the alias ``EXTERNAL``. Returns the workflow hash."""
    from uwf.engine.workflows import stored as workflows

    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(
        f"agents:\n  mock:\n    command: {json.dumps(str(BIN / 'python'))}\n"
        f"    args: [{json.dumps(str(AGENT))}]\n"
        f"  {EXTERNAL}:\n    python: uwf-cmd\n"
        f'    args: ["--", {json.dumps(sys.executable)}, {json.dumps(str(AGENT_PROGRAM))}]\n'
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
    """Writes threads into a storage root exactly as ``uwf thread step`` with the benchmark's
    agent (``mock_agent.py``) would."""

    def __init__(self, root: Path, workflow_hash: str) -> None:
        from uwf.agent_kit import runner
        from uwf.agents import mock
        from uwf.model import chain
        from uwf.protocol import schemas

        self.root = root
        self.backend = FsBackend(root)
        self.store = self.backend.nodes
        self.types = schemas.ensure(self.store)
        self.workflow_hash = workflow_hash
        self.workflow = chain.load_workflow(self.store, NodeHash(workflow_hash))
        self.turn_type = self.store.put_schema(runner.TURN_SCHEMA)
        self.detail_type = self.store.put_schema(mock.DETAIL)

    def start(self, task: str) -> str:
        """The StartNode of a thread on the workflow (what ``thread start`` stores)."""
        return self.store.put(self.types.start, {"workflow": self.workflow_hash, "prompt": task})

    def _answer(self, task: str, role: str, depth: int) -> tuple[str, str, Any]:
        """(output hash, turn hash, output payload) of the agent's answer at ``depth``."""
        from uwf.agent_kit import fastpath

        raw = workload.answer(task, role, depth)
        schema_hash = self.workflow.payload["roles"][role]["meta"]
        found = fastpath.offer(raw, schema_hash, self.store)
        if found.hash is None:
            raise RuntimeError(f"the benchmark's {role} answer does not fit its schema")
        turn = self.store.put(self.turn_type, {"index": 0, "role": "assistant", "content": raw})
        return found.hash, turn, self.store.require(found.hash).payload

    def extend(self, start: str, task: str, steps: int) -> list[str]:
        """``steps`` StepNodes after the StartNode ``start`` of a thread with task ``task``;
        their hashes, oldest first."""
        from uwf.moderator.evaluate import START, evaluate

        graph = self.workflow.graph
        decision = evaluate(graph, START, {})
        visits: Counter[str] = Counter()
        prev: str | None = None
        out: list[str] = []
        for depth in range(1, steps + 1):
            role = decision.role
            visits[role] += 1
            output, turn, payload = self._answer(task, role, depth)
            # the agent carries the chain's cost total on (all zero: it records none)
            detail = self.store.put(
                self.detail_type, mock_agent.detail_payload(visits[role], {"total": ZERO}, [turn])
            )
            prev = self.store.put(
                self.types.step,
                {
                    "start": start,
                    "prev": prev,
                    "role": role,
                    "output": output,
                    "detail": detail,
                    "agent": mock_agent.LABEL,
                    "edgePrompt": decision.prompt,
                    "depth": depth,
                },
            )
            out.append(prev)
            decision = evaluate(graph, role, payload)
        return out

    def register(self, heads: dict[str, tuple[str, str]]) -> None:
        """Make threads active (thread id -> (head, task)), as ``thread start`` records them,
        in one threads.yaml write."""
        from uwf.backend.base import ActiveThread, ThreadInfo
        from uwf.model.threads import task_line
        from uwf.util.ulid import ThreadId

        wf = NodeHash(self.workflow_hash)
        self.backend.threads.create_many(
            [
                ActiveThread(ThreadId(t), NodeHash(h), ThreadInfo(wf, task_line(task)))
                for t, (h, task) in heads.items()
            ]
        )


def new_thread_id() -> str:
    from uwf.util.ulid import new_thread_id as new_id

    return new_id()


@dataclass
class ThreadsRoot:
    """The main root: threads of ``small``, ``mid`` and ``large`` steps on one store."""

    root: Path
    threads: dict[str, str]  # small/mid/large -> thread id
    steps: dict[str, list[str]]  # small/mid/large -> StepNode hashes, oldest first
    seconds: float


def build_threads_root(root: Path, small: int, mid: int, large: int) -> ThreadsRoot:
    """Threads of ``small``, ``mid`` and ``large`` steps, tasks ``benchmark task <size>``."""
    t0 = time.perf_counter()
    wf = setup_root(root)
    with bulk_writes():
        b = ChainBuilder(root, wf)
        threads: dict[str, str] = {}
        steps: dict[str, list[str]] = {}
        heads: dict[str, tuple[str, str]] = {}
        for name, count in (("small", small), ("mid", mid), ("large", large)):
            task = task_of(name)
            steps[name] = b.extend(b.start(task), task, count)
            threads[name] = new_thread_id()
            heads[threads[name]] = (steps[name][-1], task)
        b.register(heads)
    return ThreadsRoot(root, threads, steps, time.perf_counter() - t0)


def build_list_root(root: Path, count: int) -> float:
    """``count`` active threads, each with its own task and one step done (the planner's)."""
    t0 = time.perf_counter()
    wf = setup_root(root)
    with bulk_writes():
        b = ChainBuilder(root, wf)
        heads = {}
        for i in range(1, count + 1):
            task = task_of(f"t{i:06d}")
            heads[new_thread_id()] = (b.extend(b.start(task), task, 1)[-1], task)
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


def setup_cas_root(root: Path) -> CasRoot:
    """A root with the workflow and one Text node put through the CLI's own code."""
    from uwf.engine.store import cas as casops

    wf = setup_root(root)
    text = casops.put_text(FsBackend(root), "the node we read")["hash"]
    return CasRoot(root=root, text_hash=text, workflow=wf)


# -- packs --------------------------------------------------------------------------------


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
    from uwf.backend.fs import packs, packwrite
    from uwf.protocol import schemas

    t0 = time.perf_counter()
    store = FsBackend(root).nodes
    loose = [(h, store.path(h)) for h in store.iter_hashes()]
    text = schemas.hashes().text
    sources = [packs.Source(h, path.read_bytes, 0) for h, path in loose]
    sample = [s.load() for s in sources] + [_filler_source(text, i).load() for i in range(64)]
    filler = (_filler_source(text, i) for i in range(count))
    packwrite.write_pack(store.pack_dir, itertools.chain(sources, filler), packs.dictionary(sample))
    for _, path in loose:
        path.unlink()
    os.sync()
    return time.perf_counter() - t0
