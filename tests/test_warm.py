"""A process that steps in a loop (a worker, a program on ``uwf.api``) keeps what it read
(docs/architecture.md, "What a process keeps"): config.yaml and .env parsed once per version
of the file, each node decoded once, each schema put once. What it keeps is never stale: an
edit of config.yaml or .env between two steps is seen by the second, a secret added to .env
is redacted from the next step on, and a node gc deleted is not served from memory."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

import uwf
from support import EXAMPLES
from uwf.cas import codec
from uwf.cas.store import Store
from uwf.config import config as config_module
from uwf.config import envfile
from uwf.engine.step import step
from uwf.engine.store.gc import gc
from uwf.model import routing
from uwf.testing import InProcessRunner, ScriptedAgent
from uwf.util import filememo
from uwf.util.jsonfmt import dumps

SCENARIO = EXAMPLES / "solve-issue.mock.yaml"
OUTPUTS = {
    "planner": [{"output": {"status": "_", "plan": "p", "steps": ["a"]}}],
    "developer": [
        {
            "output": {
                "status": "_",
                "filesChanged": ["a.py"],
                "summary": "used first-token-1234 then second-token-5678",
            }
        }
    ],
    "reviewer": [{"output": {"status": "approved", "comments": "ok"}}],
}


def write_config(root: Path, *args: str) -> None:
    """config.yaml: the default agent a Python agent whose arguments are ``args``."""
    config = {
        "agents": {"mock": {"python": "uwf-mock", "args": ["--scenario", str(SCENARIO), *args]}},
        "defaultAgent": "mock",
    }
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")


def started(store: uwf.Store) -> str:
    store.put_workflow(EXAMPLES / "solve-issue.yaml")
    return store.start("solve-issue", "Fix the login bug").thread


@contextlib.contextmanager
def stepped_once(root: Path) -> Iterator[tuple[uwf.Store, str, InProcessRunner]]:
    """A store of ``root`` whose new thread took its first step in this process (what a
    process reads once, read), and the runner that stepped it."""
    write_config(root)
    with uwf.open_store() as store:
        thread = started(store)
        runner = InProcessRunner(store.backend, ScriptedAgent(OUTPUTS))
        step(store.backend, thread, runner=runner)
        yield store, thread, runner


def test_an_edited_config_yaml_is_read_by_the_next_step(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every file counts as settled at once: what is kept is then kept from its first read
    monkeypatch.setattr(filememo, "FINE_SETTLED_NS", 0)
    monkeypatch.setattr(filememo, "COARSE_SETTLED_NS", 0)
    write_config(root, "--first")
    with uwf.open_store() as store:
        thread = started(store)
        runner = InProcessRunner(store.backend, ScriptedAgent(OUTPUTS))
        reads = config_module.CONFIGS.reads
        step(store.backend, thread, runner=runner)
        assert runner.plans[-1].argv[-3] == "--first"
        assert config_module.CONFIGS.reads - reads == 1  # parsed once for the whole step

        # rewritten in place, the same size, its mtime put back: its ctime tells
        path = root / "config.yaml"
        before = path.stat()
        path.write_text(path.read_text().replace("--first", "--other"), encoding="utf-8")
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert path.stat().st_size == before.st_size and path.stat().st_ino == before.st_ino
        step(store.backend, thread, runner=runner)
        assert runner.plans[-1].argv[-3] == "--other"
        assert config_module.CONFIGS.reads - reads == 2

        # an editor's write-and-rename: another inode
        fresh = root / "config.yaml.new"
        fresh.write_text(path.read_text().replace("--other", "--third"), encoding="utf-8")
        fresh.replace(path)
        step(store.backend, thread, runner=runner)
        assert runner.plans[-1].argv[-3] == "--third"
        assert config_module.CONFIGS.reads - reads == 3

        # broken, then gone: the error each time it is read, then no config at all
        path.write_text("agents: [", encoding="utf-8")
        with pytest.raises(uwf.UwfError, match=r"^invalid config\.yaml: "):
            config_module.load_config(root)
        path.unlink()
        assert config_module.load_config(root).agents == {}


def test_a_file_changed_just_now_is_parsed_at_every_read(root: Path) -> None:
    """Within the file clock's tick of its last change an edit may leave its identity as it
    was: such a file is never kept (git's "racily clean" rule)."""
    write_config(root, "--first")
    reads = config_module.CONFIGS.reads
    assert config_module.load_config(root).agents["mock"].args[-1] == "--first"
    assert config_module.load_config(root).agents["mock"].args[-1] == "--first"
    assert config_module.CONFIGS.reads - reads == 2  # just written: read again each time
    st = (root / "config.yaml").stat()
    assert not filememo.settled(st, time.time_ns())
    assert filememo.settled(st, max(st.st_mtime_ns, st.st_ctime_ns) + 4_000_000_000)


def test_an_edited_env_reaches_the_next_step_and_its_secrets_are_redacted(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WARM_TOKEN", raising=False)
    monkeypatch.delenv("LATER_TOKEN", raising=False)
    write_config(root)
    env = root / ".env"
    env.write_text("WARM_TOKEN=first-token-1234\n", encoding="utf-8")
    with uwf.open_store() as store:
        thread = started(store)
        runner = InProcessRunner(store.backend, ScriptedAgent(OUTPUTS))
        step(store.backend, thread, runner=runner)  # the planner; secrets read by its puts
        assert runner.envs[-1]["WARM_TOKEN"] == "first-token-1234"

        env.write_text(
            "WARM_TOKEN=first-token-1234\nLATER_TOKEN=second-token-5678\n", encoding="utf-8"
        )
        step(store.backend, thread, runner=runner)  # the developer's summary names both
        assert runner.envs[-1]["LATER_TOKEN"] == "second-token-5678"
        developer = store.steps(thread).steps[-1]
        assert developer.role == "developer"
        assert developer.output["summary"] == "used *** then ***"

        env.write_text("WARM_TOKEN=changed-token-9\n", encoding="utf-8")
        step(store.backend, thread, runner=runner)
        assert runner.envs[-1]["WARM_TOKEN"] == "changed-token-9"
        assert "LATER_TOKEN" not in runner.envs[-1]  # a key taken out is gone
    assert envfile.load_dotenv(root) == {"WARM_TOKEN": "changed-token-9"}
    assert envfile.load_dotenv(root) is not envfile.load_dotenv(root)  # a copy each time


def test_the_kept_files_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(filememo, "FINE_SETTLED_NS", 0)
    monkeypatch.setattr(filememo, "COARSE_SETTLED_NS", 0)
    memo: filememo.FileMemo[bytes] = filememo.FileMemo(limit=4)
    paths = [tmp_path / f"f{i}" for i in range(10)]
    for i, path in enumerate(paths):
        path.write_bytes(b"x" * i)
        assert memo.load(path, bytes, 100) == b"x" * i
        assert len(memo._found) <= 4
    reads = memo.reads
    assert memo.load(paths[-1], bytes, 100) == b"x" * 9
    assert memo.reads == reads  # the last one is still kept
    assert memo.load(tmp_path / "missing", bytes, 100) is None


def _after(ms: int) -> None:
    """Wait until the clock's millisecond is past ``ms`` (gc's grace 0 takes nodes strictly
    older than now)."""
    deadline = time.monotonic() + 5
    while time.time_ns() // 1_000_000 <= ms and time.monotonic() < deadline:
        time.sleep(0.001)


def test_a_node_gc_deleted_is_not_served_from_memory(any_store: str, root: Path) -> None:
    with uwf.open_store() as opened:
        backend = opened.backend
        store: Store = backend.nodes
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        s = store.put_schema(schema)
        h = store.put(s, {"n": 1})
        node = store.get(h)
        assert node is not None and store.kept().get(h) == node  # kept: written, then read
        _after(node.timestamp)
        assert gc(backend, grace="0")["collected"] >= 2
        assert store.get(h) is None and not store.has(h)
        assert store.kept().get(h) is None  # dropped once the storage said it is gone
        assert store.get(s) is None  # the schema went too, unreferenced

        # the schema this process put is put again by the next node typed by it
        assert store.put_schema(schema) == s
        h2 = store.put(s, {"n": 2})
        assert store.require(h2).payload == {"n": 2} and store.require(s).payload == schema
        with pytest.raises(uwf.UwfError, match="payload does not match schema"):
            store.put(s, {"n": "two"})  # validated against the schema put again


def test_a_process_decodes_each_node_once_and_puts_each_schema_once(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Warm steps of one process: no node is read from the storage twice, and the role's
    schemas are not put again (docs/performance.md, "Warm: where the design cannot win")."""
    with stepped_once(root) as (store, thread, runner):
        nodes = store.backend.nodes
        loaded: list[str] = []
        stored: list[Any] = []
        real_load, real_store = nodes._load, nodes._store

        def load(h: str) -> Any:
            loaded.append(h)
            return real_load(h)

        def store_node(h: str, *args: Any, **kwargs: Any) -> Any:
            stored.append(h)
            return real_store(h, *args, **kwargs)

        monkeypatch.setattr(nodes, "_load", load)
        monkeypatch.setattr(nodes, "_store", store_node)
        step(store.backend, thread, runner=runner)
        assert len(loaded) == len(set(loaded))  # each read from the storage once at most
        step(store.backend, thread, runner=runner)
        heads = [s.hash for s in store.steps(thread).steps]
        assert len(loaded) == len(set(loaded)) and not set(loaded) & set(heads)
        schemas = {nodes.require(h).type for h in heads} | {nodes.ensure_meta()}
        assert not set(stored) & schemas  # only new nodes written: no type put again


def test_a_step_validates_each_new_node_once(
    any_store: str, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent kit checks each node as it puts it (its batch); the write of the batch
    does not check them again (docs/architecture.md, "What a process keeps"). A put_many
    from anywhere else is still validated: an invalid payload is refused, nothing stored."""
    with stepped_once(root) as (store, thread, runner):
        nodes = store.backend.nodes
        validated: list[Any] = []
        real = Store._validate

        def validate(self: Store, type_hash: Any, payload: Any) -> None:
            validated.append(payload)
            real(self, type_hash, payload)

        monkeypatch.setattr(Store, "_validate", validate)
        result = step(store.backend, thread, runner=runner)
        head = nodes.require(result.head)
        written = [result.head, head.payload["output"], head.payload["detail"]]
        assert all(nodes.get(h) is not None for h in written)
        # output, detail, its turn, StepNode: each once (the batch's check), not twice
        assert len(validated) == len({dumps(p) for p in validated}) == len(written) + 1
        s = nodes.put_schema({"type": "object", "required": ["n"]})
        with pytest.raises(uwf.UwfError, match="payload does not match schema"):
            nodes.put_many([(s, {"n": 1}), (s, {"m": 2})])
        valid, _ = codec.hashed(s, {"n": 1})
        assert not nodes.has(valid)  # checked before anything was written


def test_the_moderator_decides_once_per_warm_step(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The decision the commit made for the new head is the next plan's: one evaluation per
    step, not two; the routing is the same as a fresh process's (docs/architecture.md,
    "What a process keeps")."""
    with stepped_once(root) as (store, thread, runner):
        decided: list[str] = []
        real = routing.decide

        def decide(store: Any, workflow: Any, head: Any, *args: Any, **kwargs: Any) -> Any:
            decided.append(head.hash)
            return real(store, workflow, head, *args, **kwargs)

        monkeypatch.setattr(routing, "decide", decide)
        roles = [step(store.backend, thread, runner=runner).role for _ in range(2)]
        assert len(decided) == 2 and len(set(decided)) == 2  # each head decided once
        assert roles == ["developer", "reviewer"]


def test_a_node_another_process_collected_is_not_served_from_memory(
    root: Path, cli_proc: Any
) -> None:
    """gc in another process (``uwf cas gc``): a kept node is served only once a ``stat``
    says its file is still there (PostgreSQL's store answers from the nodes its process has
    seen: docs/architecture.md, "What a process keeps")."""
    with uwf.open_store() as opened:
        store: Store = opened.backend.nodes
        s = store.put_schema({"type": "object"})
        h = store.put(s, {"n": 1})
        node = store.require(h)
        _after(node.timestamp)
        ran = cli_proc("cas", "gc", "--grace", "0")
        assert ran.code == 0, ran.err
        assert ran.json()["collected"] >= 2
        assert store.get(h) is None and not store.has(h)
        h2 = store.put(s, {"n": 2})  # the schema this process put: put again first
        assert store.require(s).payload == {"type": "object"} and store.get(h2) is not None
