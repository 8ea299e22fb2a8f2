"""`uwf cas gc`: roots, mark, sweep, the grace period, and gc running beside steps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from rootfiles import RootFiles, open_store
from support import BIN, EXAMPLES, Result
from uwf.backend.fs import FsBackend
from uwf.backend.memory import MemoryStore
from uwf.cas.schema import meta_hash
from uwf.cas.store import Store
from uwf.engine.store.gc import parse_grace
from uwf.protocol import schemas
from uwf.util import fsio

HOUR_MS = 3_600_000
NOTHING = {"locks": 0, "tempFiles": 0}  # no lock file or temp file left to sweep
BAD_OUTPUT = "no frontmatter at all"


def ok(cli: Any, *args: str) -> Any:
    r: Result = cli(*args)
    assert r.code == 0, (args, r.out, r.err)
    return r.json() if r.out.strip().startswith(("{", "[")) else r.out


def gc(cli: Any, *args: str) -> dict[str, Any]:
    time.sleep(0.003)  # a node put in this very millisecond is not older than --grace 0
    out: dict[str, Any] = ok(cli, "cas", "gc", *args)
    return out


def nodes(root: Path) -> set[str]:
    return set(open_store(root).iter_hashes())


def text_node(cli: Any, text: str) -> str:
    return str(ok(cli, "cas", "put-text", text)["hash"])


def age(root: Path, h: str, ms: int) -> None:
    """Make node ``h`` look first put ``ms`` ago (its timestamp is not part of its hash)."""
    path = open_store(root).path(h)
    record = json.loads(path.read_bytes())
    then = time.time_ns() // 1_000_000 - ms
    record["timestamp"] = then
    path.chmod(0o644)
    path.write_text(json.dumps(record, separators=(",", ":")))
    path.chmod(0o444)
    os.utime(path, (then / 1000, then / 1000))


def verify_ok(cli: Any) -> None:
    report = ok(cli, "cas", "verify")
    assert report["ok"] is True, report


# -- the command -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [("0", 0), ("30s", 30_000), ("10m", 600_000), ("1h", HOUR_MS), ("2d", 2 * 24 * HOUR_MS)],
)
def test_grace_durations(text: str, ms: int) -> None:
    assert parse_grace(text) == ms


@pytest.mark.parametrize("text", ["", "1w", "-1h", "1.5h", "h", "1 h h", "10ms"])
def test_bad_grace(cli: Any, root: Path, snapshot: Any, text: str) -> None:
    text_node(cli, "x")
    before = snapshot(root)
    r = cli("cas", "gc", "--grace", text)
    assert r.code == 1
    assert r.err == f"error: invalid --grace: {text} (expected a duration like 30s, 10m, 1h, 2d)\n"
    assert snapshot(root) == before


def test_empty_root_creates_nothing(cli: Any, root: Path) -> None:
    for args in ([], ["--dry-run"], ["--grace", "0"]):
        out = gc(cli, *args)
        expected = {**NOTHING, "scanned": 0, "reachable": 0, "collected": 0, "bytes": 0}
        extra = {"dryRun": True} if args == ["--dry-run"] else {"packed": 0}
        assert out == {**expected, **extra}
    assert not root.exists()


def test_only_garbage_goes_and_uwf_schemas_stay(cli: Any, root: Path) -> None:
    garbage = text_node(cli, "nobody refers to me")
    store = open_store(root)
    h = schemas.hashes()
    n = len(h.every)  # the meta-schema and uwf's schemas
    assert nodes(root) == {*h.every, garbage}
    size = store.path(garbage).stat().st_size
    assert gc(cli, "--dry-run") == {  # 1h grace
        **NOTHING,
        "scanned": n + 1,
        "reachable": n,
        "collected": 0,
        "bytes": 0,
        "dryRun": True,
    }
    assert gc(cli, "--grace", "0", "--dry-run") == {
        **NOTHING,
        "scanned": n + 1,
        "reachable": n,
        "collected": 1,
        "bytes": size,
        "dryRun": True,
    }
    assert garbage in nodes(root)
    assert gc(cli, "--grace", "0") == {
        **NOTHING,
        "scanned": n + 1,
        "reachable": n,
        "collected": 1,
        "bytes": size,
        "packed": n,  # what survives is packed
    }
    assert nodes(root) == set(h.every)
    assert store.index(h.text) == []  # collected hashes leave the type index
    assert not list((root / "cas" / "objects").rglob("*/*"))
    assert gc(cli, "--grace", "0") == {
        **NOTHING,
        "scanned": n,
        "reachable": n,
        "collected": 0,
        "bytes": 0,
        "packed": 0,
    }
    verify_ok(cli)
    assert text_node(cli, "nobody refers to me") == garbage  # stored again, indexed again
    assert store.index(h.text) == [garbage]


def test_dry_run_deletes_nothing(cli: Any, root: Path, snapshot: Any, new_thread: Any) -> None:
    new_thread()
    text_node(cli, "garbage")
    before = snapshot(root / "cas")
    out = gc(cli, "--grace", "0", "--dry-run")
    assert out["collected"] == 1 and out["dryRun"] is True
    assert snapshot(root / "cas") == before


def test_grace_period_and_refresh_by_a_later_put(cli: Any, root: Path) -> None:
    """A put of a node that is already stored makes it young again (content addressing
    turned the put into a no-op, so the writer is about to link to the existing node)."""
    old = text_node(cli, "old")
    age(root, old, 2 * HOUR_MS)
    young = text_node(cli, "young")
    assert gc(cli, "--dry-run")["collected"] == 1  # default grace: one hour
    assert text_node(cli, "old") == old
    assert gc(cli, "--dry-run")["collected"] == 0
    age(root, old, 2 * HOUR_MS)
    assert gc(cli, "--grace", "90m")["collected"] == 1
    assert nodes(root) >= {young} and old not in nodes(root)


def test_a_put_of_a_packed_node_makes_it_young_again(cli: Any, root: Path) -> None:
    """A pack never changes, so a put of a packed node writes a loose copy of it: its mtime
    is the node's last put, and the next pack records it."""
    old = text_node(cli, "old")
    age(root, old, 2 * HOUR_MS)
    packed = ok(cli, "cas", "pack")["packed"]
    assert packed == len(schemas.hashes().every) + 1  # the old node keeps its age in the pack
    assert open_store(root).loose_bytes(old) is None
    assert gc(cli, "--dry-run")["collected"] == 1
    assert text_node(cli, "old") == old
    assert open_store(root).loose_bytes(old) is not None  # the loose copy
    assert gc(cli)["collected"] == 0  # young again; gc packs it with its new last put
    assert open_store(root).loose_bytes(old) is None
    assert gc(cli, "--dry-run")["collected"] == 0
    assert gc(cli, "--grace", "0")["collected"] == 1
    assert old not in nodes(root)
    verify_ok(cli)


@pytest.mark.parametrize("make", [MemoryStore, None], ids=["memory", "fs"])
def test_a_put_refreshes_the_node_and_its_type(root: Path, make: Any) -> None:
    store: Store = make() if make is not None else open_store(root)
    schema = store.put_schema({"type": "integer"})
    node = store.put(schema, 7)
    if make is None:
        age(root, schema, 2 * HOUR_MS)
        age(root, node, 2 * HOUR_MS)
        cutoff = time.time_ns() // 1_000_000 - HOUR_MS
        assert all(store.info(x).last_put < cutoff for x in (schema, node))  # type: ignore[union-attr]
    time.sleep(0.002)
    before = time.time_ns() // 1_000_000
    assert store.put(schema, 7) == node
    for h in (schema, node):
        info = store.info(h)
        assert info is not None and info.last_put >= before
        assert info.type == (meta_hash() if h == schema else schema)
        assert info.size > 0
    first = store.get(node)
    assert first is not None and first.timestamp < before  # the first timestamp is kept


# -- roots ---------------------------------------------------------------------------------


def test_a_failed_step_leaves_no_node_and_orphans_are_collected(
    cli: Any, root: Path, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    before = nodes(root)
    r = cli("thread", "step", thread, "--agent", scenario({"planner": [BAD_OUTPUT]}))
    assert r.code == 5 and "does not contain valid YAML frontmatter" in r.err
    # the mock put its turn and detail before the extract failed: the kit held them, and
    # writes a step's nodes only with its StepNode
    assert nodes(root) == before
    orphans = {text_node(cli, f"orphan {i}") for i in range(3)}  # nothing refers to them
    assert gc(cli)["collected"] == 0  # young: the default grace keeps them
    out = gc(cli, "--grace", "0")
    assert out["collected"] == len(orphans)
    assert nodes(root) == before
    verify_ok(cli)
    step = ok(cli, "thread", "step", thread, "--agent", scenario())  # the thread continues
    assert step["role"] == "planner"
    verify_ok(cli)


def test_forks_share_nodes_and_keep_them(
    cli: Any, root: Path, new_thread: Any, scenario: Any
) -> None:
    agent = scenario()
    a = new_thread()
    first = ok(cli, "thread", "step", a, "--agent", agent)["head"]
    ok(cli, "thread", "step", a, "--agent", agent)
    b = ok(cli, "thread", "fork", first)["thread"]
    ok(cli, "thread", "kill", a)  # a is archived; b shares its start and first step
    chain_b = ok(cli, "thread", "steps", b)
    assert gc(cli, "--grace", "0")["collected"] == 0
    verify_ok(cli)
    assert ok(cli, "thread", "steps", b) == chain_b
    assert ok(cli, "thread", "steps", a)["steps"][1]["hash"] == first
    r = cli("thread", "step", b, "--agent", agent, "-c", "5")
    assert r.code == 0, r.err
    assert r.jsonl()[-1]["done"] is True


def test_archived_threads_keep_their_chains(
    cli: Any, root: Path, new_thread: Any, scenario: Any
) -> None:
    agent = scenario()
    done = new_thread("one")
    assert cli("thread", "step", done, "--agent", agent, "-c", "5").code == 0
    killed = new_thread("two")
    ok(cli, "thread", "step", killed, "--agent", agent)
    ok(cli, "thread", "kill", killed)
    assert ok(cli, "thread", "list") == []
    views = {
        t: (ok(cli, "thread", "steps", t), ok(cli, "thread", "read", t)) for t in (done, killed)
    }
    everything = nodes(root)
    assert gc(cli, "--grace", "0")["collected"] == 0
    assert nodes(root) == everything
    for t, (steps, text) in views.items():
        assert ok(cli, "thread", "steps", t) == steps
        assert ok(cli, "thread", "read", t) == text
        for step in steps["steps"][1:]:
            assert ok(cli, "thread", "step-details", step["hash"], "--format", "json")


def variant(tmp_path: Path, description: str, name: str = "solve-issue") -> Path:
    text = (EXAMPLES / "solve-issue.yaml").read_text(encoding="utf-8")
    lines = [
        f"description: {json.dumps(description)}" if line.startswith("description:") else line
        for line in text.splitlines()
    ]
    text = "\n".join(lines).replace("name: solve-issue", f"name: {name}", 1) + "\n"
    path = tmp_path / description / f"{name}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_rollback_targets_survive(cli: Any, root: Path, tmp_path: Path) -> None:
    v1 = ok(cli, "workflow", "put", variant(tmp_path, "first"))["hash"]
    v2 = ok(cli, "workflow", "put", variant(tmp_path, "second"))["hash"]
    unregistered = ok(cli, "workflow", "show", v2)["payload"]
    unregistered["name"] = "ghost"  # a Workflow node whose name has no registry entry
    ghost = ok(cli, "cas", "put", schemas.hashes().workflow, json.dumps(unregistered))["hash"]
    store = open_store(root)
    (store.index_dir / schemas.hashes().workflow).unlink()  # even a lost index line costs nothing
    out = gc(cli, "--grace", "0")
    assert out["collected"] == 1
    assert ghost not in nodes(root) and {v1, v2} <= nodes(root)
    verify_ok(cli)
    ok(cli, "cas", "reindex")
    assert [v["hash"] for v in ok(cli, "workflow", "history", "solve-issue")] == [v1, v2]
    assert ok(cli, "workflow", "rollback", "solve-issue", v1)["hash"] == v1
    assert ok(cli, "thread", "start", "solve-issue", "-p", "x")["workflow"] == v1


def test_workflow_of_a_thread_started_from_a_file_is_kept(
    cli: Any, root: Path, tmp_path: Path, scenario: Any
) -> None:
    path = variant(tmp_path, "local", name="local-flow")
    started = ok(cli, "thread", "start", str(path), "-p", "task")
    assert ok(cli, "workflow", "list") == []  # stored, never registered
    ok(cli, "thread", "kill", started["thread"])
    assert gc(cli, "--grace", "0")["collected"] == 0
    assert ok(cli, "workflow", "show", started["workflow"])["payload"]["name"] == "local-flow"


# -- damage --------------------------------------------------------------------------------


def tamper(root: Path, h: str) -> None:
    path = open_store(root).path(h)
    path.chmod(0o644)
    path.write_text(path.read_text().replace('"prompt":"', '"prompt":"tampered '))
    path.chmod(0o444)


def test_a_corrupt_reachable_node_stops_gc(
    cli: Any, root: Path, snapshot: Any, new_thread: Any
) -> None:
    thread = new_thread()
    head = ok(cli, "thread", "show", thread)["head"]
    text_node(cli, "garbage")
    tamper(root, head)
    before = snapshot(root / "cas")
    time.sleep(0.003)
    r = cli("cas", "gc", "--grace", "0")
    assert r.code == 1
    assert r.err_line.startswith(
        f"error: cas gc stopped, nothing was deleted: corrupt node {head}: content hashes to "
    )
    assert r.err_line.endswith(
        " (it is reachable, so what it refers to is unknown; see uwf cas verify)"
    )
    assert snapshot(root / "cas") == before


def test_a_corrupt_unreachable_node_is_kept_for_verify(
    cli: Any, root: Path, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    head = ok(cli, "thread", "show", thread)["head"]
    ok(cli, "thread", "kill", thread)
    history = root / "history.jsonl"
    history.write_text("")  # the StartNode is garbage now
    tamper(root, head)
    out = gc(cli, "--grace", "0")
    assert head in nodes(root)
    assert out["collected"] == 0  # its workflow is registered; the corrupt node is kept
    problems = cli("cas", "verify").json()["damaged"]
    assert [p["hash"] for p in problems] == [head]


# -- running beside other processes ---------------------------------------------------------


def test_a_second_gc_is_refused(cli: Any, root: Path) -> None:
    text_node(cli, "x")
    with fsio.locked(root / "locks" / "gc"):
        r = cli("cas", "gc")
    assert (r.code, r.err) == (1, "error: cas gc or cas pack is already running\n")
    assert gc(cli)["scanned"] == len(schemas.hashes().every) + 1


@pytest.mark.parametrize("kernel", ["answers", "cannot tell"])
def test_a_step_in_flight_is_protected_even_with_grace_0(
    cli: Any,
    root: Path,
    new_thread: Any,
    monkeypatch: pytest.MonkeyPatch,
    kernel: str,
) -> None:
    """While a thread's step lock is held, nothing put since its head was written goes.

    Where the kernel cannot tell whether the lock is held (no open file description locks:
    not Linux, an old kernel) the holder record's pid answers "is it running"."""
    if kernel == "cannot tell":
        monkeypatch.setattr(fsio, "held", lambda path: None)
    locks = FsBackend(root).locks
    older = text_node(cli, "written before the thread's head")
    time.sleep(0.003)
    thread = new_thread()
    time.sleep(0.003)
    newer = text_node(cli, "written while the step runs")  # as an agent would
    with RootFiles(root).hold_step(thread):
        assert locks.running() == {thread}
        gc(cli, "--grace", "0")
        assert newer in nodes(root) and older not in nodes(root)
    assert locks.running() == set()
    gc(cli, "--grace", "0")
    assert newer not in nodes(root)


HOLD = """
import sys, time
from pathlib import Path
from uwf.backend.fs import FsBackend
with FsBackend(Path(sys.argv[1])).locks.step(sys.argv[2], wait=True):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_the_kernel_says_whether_a_step_lock_is_held(root: Path, new_thread: Any) -> None:
    """``fsio.held`` asks the kernel (``F_OFD_GETLK``) whether a step lock is held, by this
    process or another, without taking it: a holder that takes it meanwhile is never refused,
    and releasing (or dying) ends it at once."""
    thread, other = new_thread(), new_thread()
    locks = FsBackend(root).locks
    path = locks.path(thread)
    assert fsio.held(path) is False  # no lock file yet
    with locks.step(thread, wait=False):
        assert fsio.held(path) is True  # held by this very process, through another descriptor
        assert locks.running() == {thread}
    assert fsio.held(path) is False and path.exists()
    with subprocess.Popen(
        [sys.executable, "-c", HOLD, str(root), other],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline() == "held\n"
            for _ in range(3):  # asking never takes it
                assert fsio.held(locks.path(other)) is True
            assert locks.running() == {other} and locks.is_running(other)
            holder.kill()  # SIGKILL: the lock dies with its holder
            holder.wait(timeout=30)
            assert fsio.held(locks.path(other)) is False
            assert locks.running() == set() and not locks.is_running(other)
            with locks.step(other, wait=False):  # free for the next holder
                assert locks.running() == {other}
        finally:
            holder.kill()


WRAPPER = """
import os, subprocess, sys, time
thread, role = sys.argv[-2], sys.argv[-1]
run = subprocess.run(["uwf-mock", "--scenario", {scenario!r}, thread, role],
                     capture_output=True, text=True)
sys.stderr.write(run.stderr)
if run.returncode:
    sys.exit(run.returncode)
step = run.stdout.strip()
time.sleep(0.2)  # the new nodes sit unreachable while gc runs with --grace 0
if "UWF_PREVIOUS_ATTEMPTS" not in os.environ:  # fail every first attempt: its nodes become
    open(os.path.join({marks!r}, thread + "-" + step), "w").close()  # garbage; the retry
    sys.exit(9)  # puts its output and turns again (the same nodes), its detail keeps the
print(step)  # failure (docs/format.md, "Previous attempts")
"""


def test_gc_beside_running_steps_loses_nothing(cli: Any, root: Path, tmp_path: Path) -> None:
    uwf = str(BIN / "uwf")
    marks = tmp_path / "marks"
    marks.mkdir()
    wrapper = tmp_path / "agent.py"
    scenario = EXAMPLES / "solve-issue.mock.yaml"
    wrapper.write_text(WRAPPER.format(scenario=str(scenario), marks=str(marks)))
    agent = f"{sys.executable} {wrapper}"
    ok(cli, "workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
    threads = [
        ok(cli, "thread", "start", "solve-issue", "-p", f"task {i}")["thread"] for i in range(3)
    ]
    errors: list[str] = []
    steps: dict[str, int] = dict.fromkeys(threads, 0)

    def drive(thread: str) -> None:
        for _ in range(20):
            r = subprocess.run(
                [uwf, "thread", "step", thread, "--agent", agent],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if r.returncode == 0:
                steps[thread] += 1
                if json.loads(r.stdout)["done"]:
                    return
            elif "with exit code 9" not in r.stderr:  # not the planned first-attempt failure
                errors.append(r.stderr)
                return
        errors.append(f"{thread} did not finish")

    drivers = [threading.Thread(target=drive, args=(t,)) for t in threads]
    for d in drivers:
        d.start()
    runs: list[dict[str, Any]] = []
    i = 0
    while any(d.is_alive() for d in drivers):
        i += 1
        subprocess.run([uwf, "cas", "put-text", f"garbage {i}"], capture_output=True, check=True)
        r = subprocess.run([uwf, "cas", "gc", "--grace", "0"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        runs.append(json.loads(r.stdout))
    for d in drivers:
        d.join()
    assert errors == []
    assert len(runs) >= 5
    assert sum(run["collected"] for run in runs) >= len(runs) - 1  # garbage really went
    verify_ok(cli)
    for thread in threads:
        assert steps[thread] == 5
        show = ok(cli, "thread", "show", thread)
        assert (show["done"], show["status"], show["steps"]) == (True, "completed", 5)
        assert "Approved." in ok(cli, "thread", "read", thread)
    gc(cli, "--grace", "0")
    verify_ok(cli)


# -- leftovers: step locks of archived threads, temp files of killed writers ----------------


def test_gc_sweeps_the_locks_of_archived_threads(
    cli: Any, cli_proc: Any, root: Path, solve_issue: str, scenario: Any
) -> None:
    """Lock files pile up one per thread that ever stepped; gc removes those of archived
    threads — not an active thread's, and not one a process holds (a step being stopped)."""
    agent = scenario()

    def started() -> str:
        thread = str(ok(cli, "thread", "start", "solve-issue", "-p", "x")["thread"])
        assert cli("thread", "step", thread, "--agent", agent).code == 0
        return thread

    done, killed, stopping, active = started(), started(), started(), started()
    assert cli("thread", "step", done, "-c", "9", "--agent", agent).code == 0
    for thread in (killed, stopping):
        ok(cli, "thread", "kill", thread)
    locks = root / "locks"
    assert {f"{t}.lock" for t in (done, killed, stopping, active)} <= set(os.listdir(locks))
    with RootFiles(root).hold_step(stopping):
        assert gc(cli, "--dry-run")["locks"] == 2
        assert {f"{t}.lock" for t in (done, killed)} <= set(os.listdir(locks))
        out = cli_proc("cas", "gc").json()  # the real command
        assert out["locks"] == 2
        left = set(os.listdir(locks))
        assert f"{done}.lock" not in left and f"{killed}.lock" not in left
        assert {f"{stopping}.lock", f"{active}.lock"} <= left
    assert gc(cli)["locks"] == 1  # the stopped step let go of it
    assert f"{stopping}.lock" not in os.listdir(locks)
    assert cli("thread", "step", active, "--agent", agent).code == 0  # active threads step on
    assert gc(cli)["locks"] == 0


def test_gc_sweeps_old_temp_files_of_killed_writers(cli: Any, root: Path, solve_issue: str) -> None:
    """``.tmp-*`` files that a SIGKILL between write and rename left: deleted once last
    written before the cutoff (older than --grace), under their writer's lock."""
    thread = str(ok(cli, "thread", "start", "solve-issue", "-p", "x")["thread"])
    head = RootFiles(root).head(thread)
    assert head is not None
    fan = open_store(root).path(head).parent
    old = [
        fan / f".tmp-{head}.1.1",
        root / "cas" / "index" / ".tmp-SOMETYPE.1.1",
        root / ".tmp-threads.yaml.1.1",
        root / ".tmp-registry.yaml.1.1",
        root / ".tmp-config.yaml.1.1",
    ]
    young = [fan / f".tmp-{head}.2.2", root / ".tmp-threads.yaml.2.2"]
    for path in old + young:
        path.write_bytes(b"half a ")
    then = time.time() - 2 * 3600
    for path in old:
        os.utime(path, (then, then))
    assert gc(cli, "--dry-run")["tempFiles"] == len(old)
    assert all(p.exists() for p in old + young)
    assert gc(cli)["tempFiles"] == len(old)  # --grace 1h: the young ones stay
    assert not any(p.exists() for p in old) and all(p.exists() for p in young)
    assert gc(cli, "--grace", "0")["tempFiles"] == len(young)
    assert not any(p.exists() for p in young)
    assert ok(cli, "thread", "show", thread)["head"] == head
    verify_ok(cli)
