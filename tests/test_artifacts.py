"""Artifacts (docs/format.md, "Artifacts"): the files an agent leaves in $UWF_ARTIFACTS_DIR are
stored with its step, come back byte for byte, survive gc, and a tampered one is reported.

The CLI tests run real agents (uwf-cmd wrapping a script) through ``uwf thread step``; the
backend test runs an agent on the kit in-process on the memory and filesystem backends.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import uwf
from rootfiles import damage_packed_record
from support import EXAMPLES, PLAN
from test_builtin import doc_block
from uwf.agent_kit import runner
from uwf.agent_kit.context import AgentContext
from uwf.backend.base import Backend
from uwf.backend.fs import FsBackend
from uwf.backend.memory import MemoryBackend
from uwf.cas import ops
from uwf.cas.store import Node
from uwf.engine import step
from uwf.engine.store import gc
from uwf.engine.threads import lifecycle as threads
from uwf.engine.threads import longthreads
from uwf.engine.workflows import stored as workflows
from uwf.model import artifacts
from uwf.protocol import parts, schemas
from uwf.testing import InProcessRunner
from uwf.util.errors import InvalidInput, UwfError
from uwf.util.ulid import ThreadId

BINARY = bytes(range(256)) * 3 + b"\x00\xff\xfe"  # not UTF-8
PATCH = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new ✓\r\n"
DEV = "---\nstatus: _\nfilesChanged: [x]\nsummary: s\n---\nDone."

WRITER = """\
import os, sys
sys.stdin.read()
where = os.environ["UWF_ARTIFACTS_DIR"]
with open(os.environ["SEEN"], "a") as f:
    f.write(where + " " + ",".join(sorted(os.listdir(where))) + "\\n")
os.makedirs(os.path.join(where, "logs"), exist_ok=True)
open(os.path.join(where, "change.patch"), "w", encoding="utf-8", newline="").write(PATCH)
open(os.path.join(where, "logs", "trace.bin"), "wb").write(BINARY)
open(os.path.join(where, "empty.txt"), "w").close()
os.symlink("/etc/hostname", os.path.join(where, "link"))
if os.environ.get("FAIL"):
    sys.exit(3)
print(OUTPUT)
"""


@pytest.fixture
def cmd_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``uwf-cmd`` wrapping a Python script that leaves three files and a symlink (and notes
    its directory and what it found there in ``$SEEN``)."""
    monkeypatch.setenv("SEEN", str(tmp_path / "seen.txt"))

    def make(output: str = DEV) -> str:
        script = tmp_path / "writer.py"
        body = f"PATCH = {PATCH!r}\nBINARY = {BINARY!r}\nOUTPUT = {output!r}\n" + WRITER
        script.write_text(body, encoding="utf-8")
        return f"uwf-cmd -- {sys.executable} {script}"

    return make


@pytest.fixture
def at_developer(cli: Any, new_thread: Any, scenario: Any) -> str:
    thread = new_thread()
    assert (
        cli(
            "thread", "step", thread, "--agent", scenario({"planner": [PLAN]}, inprocess=False)
        ).code
        == 0
    )
    return str(thread)


def head_of(cli: Any, thread: str) -> str:
    return str(cli("thread", "show", thread).json()["head"])


@pytest.fixture
def developer_step(cli: Any, at_developer: str, cmd_agent: Any) -> str:
    """The developer's step, by ``cmd_agent``: its hash."""
    r = cli("thread", "step", at_developer, "--agent", cmd_agent())
    assert r.code == 0, r.err
    return head_of(cli, at_developer)


def test_round_trip_gc_and_a_tampered_blob(
    cli: Any, root: Path, tmp_path: Path, at_developer: str, developer_step: str
) -> None:
    thread, step_hash = at_developer, developer_step
    listed = cli("step", "artifacts", step_hash).json()
    assert [(a["path"], a["size"]) for a in listed] == [
        ("change.patch", len(PATCH.encode())),
        ("empty.txt", 0),
        ("logs/trace.bin", len(BINARY)),
    ]
    store = FsBackend(root).nodes
    h = schemas.hashes()
    types = [store.require(a["hash"]).type for a in listed]
    assert types == [h.text, h.text, h.blob]

    def extract(into: Path) -> None:
        out = cli("step", "artifacts", step_hash, "--extract", into)
        assert out.code == 0, out.err
        assert [a["file"] for a in out.json()] == [str(into / a["path"]) for a in listed]
        assert (into / "change.patch").read_bytes() == PATCH.encode()
        assert (into / "logs" / "trace.bin").read_bytes() == BINARY
        assert (into / "empty.txt").read_bytes() == b""

    extract(tmp_path / "out")
    again = cli("step", "artifacts", step_hash, "--extract", tmp_path / "out")
    assert again.code == 1
    assert again.err_line == (
        f"error: {tmp_path / 'out' / 'change.patch'} exists; --extract never overwrites a file"
    )
    read = cli("thread", "read", thread).out
    assert (
        f"**Artifacts:**\n- `change.patch` ({len(PATCH.encode())} bytes, `{listed[0]['hash']}`)"
        in read
    )
    assert f"- `logs/trace.bin` ({len(BINARY):,} bytes, `{listed[2]['hash']}`)" in read

    # gc keeps them with their step; verify finds nothing wrong
    assert cli("cas", "gc", "--grace", "0").code == 0
    extract(tmp_path / "after-gc")
    assert cli("cas", "verify").code == 0

    # a tampered blob is reported by verify, and never handed out
    blob = listed[2]["hash"]
    assert store.loose_bytes(blob) is None  # gc packed what survived
    damage_packed_record(root / "cas", blob)
    verify = cli("cas", "verify")
    assert verify.code == 1
    damaged = {d["hash"]: d["problem"] for d in verify.json()["damaged"] if "hash" in d}
    # the nodes packed in the same block as the blob are damaged with it
    assert blob in damaged and damaged[blob].startswith(f"corrupt node {blob}: ")
    broken = cli("step", "artifacts", step_hash, "--extract", tmp_path / "broken")
    assert broken.code == 1 and broken.err_line.startswith("error: corrupt node ")
    assert broken.err_line.split()[3].rstrip(":") in damaged  # the blob, or a node beside it
    assert not (tmp_path / "broken" / "change.patch").exists()  # nothing written


def test_each_step_gets_a_fresh_directory_removed_after(
    cli: Any,
    root: Path,
    tmp_path: Path,
    at_developer: str,
    cmd_agent: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    where = root / "cache" / "artifacts" / at_developer
    where.mkdir(parents=True)
    (where / "stale.txt").write_text("left by a step killed with SIGKILL")
    monkeypatch.setenv("FAIL", "1")
    failed = cli("thread", "step", at_developer, "--agent", cmd_agent())
    assert failed.code == 5
    assert not where.exists()  # removed after a failure
    monkeypatch.delenv("FAIL")
    assert cli("thread", "step", at_developer, "--agent", cmd_agent()).code == 0
    assert not where.exists()  # and after a success
    seen = (tmp_path / "seen.txt").read_text().splitlines()
    assert seen == [f"{where} ", f"{where} "]  # fresh and empty each time: no stale file
    assert cli("step", "artifacts", head_of(cli, at_developer)).json()[0]["path"] == (
        "change.patch"
    )


def test_a_symbolic_link_is_left_out_with_a_warning(
    cli_proc: Any, at_developer: str, cmd_agent: Any
) -> None:
    r = cli_proc("thread", "step", at_developer, "--agent", cmd_agent())
    assert r.code == 0, r.err
    assert "warning: artifact link is not a regular file (a symbolic link?); not stored" in r.err


def test_an_artifact_over_the_limit_fails_the_step(
    cli: Any, root: Path, at_developer: str, cmd_agent: Any
) -> None:
    (root / "config.yaml").write_text("artifactMaxBytes: 100\n", encoding="utf-8")
    head = head_of(cli, at_developer)
    r = cli("thread", "step", at_developer, "--agent", cmd_agent())
    assert r.code == 5
    assert r.err_line.endswith(
        f"error: artifact logs/trace.bin is {len(BINARY)} bytes, over the limit of 100 bytes "
        "(artifactMaxBytes in config.yaml)"
    )
    assert head_of(cli, at_developer) == head


@pytest.mark.parametrize("kind", ["memory", "fs"])
def test_artifacts_on_every_backend(kind: str, tmp_path: Path) -> None:
    backend = open_backend(kind, tmp_path / kind)
    workflows.put_workflow(backend, EXAMPLES / "solve-issue.yaml")
    thread = ThreadId(threads.start(backend, "solve-issue", "Fix it")["thread"])
    files = {"plan.md": b"# Plan\n", "bin/data": BINARY}
    run = InProcessRunner(backend, uwf.kit_agent(FilesAgent(files, PLAN)))
    result = step.step(backend, thread, agent="test-files", runner=run)
    assert not Path(run.envs[0]["UWF_ARTIFACTS_DIR"]).exists()  # removed after the step
    listed = longthreads.step_artifacts(backend, result.head)
    assert [a["path"] for a in listed] == ["bin/data", "plan.md"]
    out = longthreads.extract_artifacts(backend, result.head, tmp_path / "out")
    assert {a["path"]: Path(a["file"]).read_bytes() for a in out} == files

    gc.gc(backend, grace="0")
    assert all(backend.nodes.has(a["hash"]) for a in listed)
    assert ops.verify(backend.nodes)["ok"] is True
    blob = listed[0]["hash"]
    tamper(kind, backend, blob)
    report = ops.verify(backend.nodes)
    damaged = [d.get("hash") for d in report["damaged"]]
    assert report["ok"] is False and blob in damaged
    # the blob, or a node packed in its block (docs/format.md, "Packs"), as a process that
    # did not read it before finds it (this one keeps what it read: "What a process keeps")
    backend.nodes.kept().clear()
    with pytest.raises(UwfError, match="corrupt node ") as info:
        longthreads.extract_artifacts(backend, result.head, tmp_path / "again")
    assert str(info.value).split()[2].rstrip(":") in damaged


def open_backend(kind: str, root: Path) -> Backend:
    """``memory`` or ``fs``: the two backends every feature must work on."""
    return MemoryBackend(root) if kind == "memory" else FsBackend(root)


class FilesAgent:
    """An agent on the kit that leaves ``files`` (path -> bytes) in its artifacts directory
    and answers ``output``."""

    label = "test-files"

    def __init__(self, files: dict[str, bytes], output: str) -> None:
        self.files = files
        self.output = output

    def run(self, ctx: AgentContext) -> runner.RunResult:
        where = ctx.artifacts_dir
        assert where is not None
        for path, data in self.files.items():
            (where / path).parent.mkdir(parents=True, exist_ok=True)
            (where / path).write_bytes(data)
        turns = runner.store_turns(ctx, [{"role": "assistant", "content": self.output}])
        detail_type = ctx.store.put_schema(runner.detail_schema("FilesDetail", {}))
        return runner.RunResult(self.output, ctx.store.put(detail_type, {"turns": turns}))

    def resume(self, ctx: AgentContext, session: str | None, message: str) -> Any:
        return None


def tamper(kind: str, backend: Any, h: str) -> None:
    """Change a stored node's bytes behind the store's back."""
    if kind == "memory":
        node = backend.nodes.nodes[h]
        backend.nodes.nodes[h] = Node(node.type, "AAAA" + node.payload[4:], node.timestamp)
        return
    damage_packed_record(backend.root / "cas", h)  # gc packed every node it kept


def test_extract_refuses_paths_outside_the_directory(tmp_path: Path) -> None:
    backend = FsBackend(tmp_path / "root")
    store = backend.nodes
    text = artifacts.encode(store, b"evil")
    for bad in ("../evil", "/etc/evil", "a/./b", "a//b", "a\\b", ""):
        with pytest.raises(InvalidInput, match="is not a relative path"):
            artifacts.check_path(bad)
    assert artifacts.check_path("a/b.txt") == "a/b.txt"
    outside = tmp_path / "outside"
    outside.mkdir()
    into = tmp_path / "into"
    into.mkdir()
    (into / "sub").symlink_to(outside)
    detail_type = store.put_schema({"type": "object", "properties": {"artifacts": parts.ARTIFACTS}})
    detail = store.put(detail_type, {"artifacts": [{"path": "sub/x", "hash": text, "size": 4}]})
    h = schemas.ensure(store)
    start = store.put(h.start, {"workflow": text, "prompt": "p"})
    step_hash = store.put(
        h.step,
        {"start": start, "prev": None, "role": "r", "output": text, "detail": detail, "agent": "a"},
    )
    with pytest.raises(InvalidInput, match="a symbolic link on the way"):
        longthreads.extract_artifacts(backend, step_hash, into)
    assert list(outside.iterdir()) == []


def test_a_detail_without_an_artifacts_field_is_refused(tmp_path: Path) -> None:
    store = FsBackend(tmp_path).nodes
    detail = store.put(schemas.ensure(store).text, "a plain detail")
    found = [artifacts.Artifact("a.txt", artifacts.encode(store, b"a"), 1)]
    with pytest.raises(UwfError, match="has no artifacts field to list them"):
        artifacts.attach(store, detail, found)


def test_doc_shell_agent_leaves_a_patch(cli: Any, at_developer: str) -> None:
    here = Path.cwd()  # where the thread was started: its agents work there
    (here / "developer.sh").write_text(doc_block("patch-agent"), encoding="utf-8")
    r = cli("thread", "step", at_developer, "--agent", "uwf-cmd -- sh ./developer.sh")
    assert r.code == 0, r.err
    step_hash = head_of(cli, at_developer)
    (listed,) = cli("step", "artifacts", step_hash).json()
    assert listed["path"] == "change.patch"
    assert cli("step", "artifacts", step_hash, "--extract", "out").code == 0
    patch = (here / "out" / "change.patch").read_text(encoding="utf-8")
    assert patch.startswith("--- src/signup.py.orig") and '+    return "@" in email' in patch
    assert (here / "src" / "signup.py").exists()
    assert "`change.patch`" in cli("thread", "read", at_developer).out
    output = cli("thread", "steps", at_developer).json()["steps"][-1]["output"]
    assert output == {"status": "_", "filesChanged": ["src/signup.py"], "summary": "e-mail check"}


def test_the_web_view_links_artifacts(
    cli: Any, root: Path, at_developer: str, developer_step: str
) -> None:
    from starlette.testclient import TestClient

    from uwf.web.app import create_app

    step_hash = developer_step
    client = TestClient(create_app(FsBackend(root)), base_url="http://127.0.0.1")
    page = client.get(f"/thread/{at_developer}").text
    for path in ("change.patch", "logs/trace.bin"):
        assert f'href="/step/{step_hash}/artifact/{path}" download' in page
    text = client.get(f"/step/{step_hash}/artifact/change.patch")
    assert text.status_code == 200 and text.content == PATCH.encode()
    assert text.headers["content-type"] == "text/plain; charset=utf-8"
    blob = client.get(f"/step/{step_hash}/artifact/logs/trace.bin")
    assert blob.content == BINARY and blob.headers["content-type"] == "application/octet-stream"
    assert blob.headers["content-disposition"] == "attachment; filename*=UTF-8''trace.bin"
    assert blob.headers["x-content-type-options"] == "nosniff"
    missing = client.get(f"/step/{step_hash}/artifact/nope")
    assert missing.status_code == 404 and "has no artifact" in missing.text
    exported = cli("thread", "export", at_developer, "--html", "-").out
    assert "<code>logs/trace.bin</code>" in exported and "/artifact/" not in exported
