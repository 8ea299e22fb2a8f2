"""Damaged stores and settings, round two (docs/reliability.md, "Hostile agents" rows 17 and
20–25, and "Repairing damaged state"), each driven through the real CLI in subprocesses, on a
real PostgreSQL server where the store matters.

A node lost in the middle of a chain (a disk fault, a partial restore) must stop `cas gc`,
or the steps behind the gap are collected and restoring the node no longer repairs the
thread. State files are read with a size bound and their damage is reported by the command
that needs them and by `cas verify`. Numbers in settings are finite. A PostgreSQL schema row
that says an older version than the tables are is refused with a clear line. `uwf ui` parses
the `Host` header strictly. A `location` that is not a directory says what it is.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rootfiles import lose_node, open_store
from support import BIN, EXAMPLES, PLAN, take_snapshot
from test_hostile import LOOP, Ui, ok

REPAIR = 'docs/reliability.md, "Repairing damaged state"'
AGAIN = "---\nstatus: again\nnotes: more\n---\nWritten."


def loop_thread(cli_proc: Any, tmp_path: Path, steps: int) -> str:
    """A thread of the one-role loop workflow with ``steps`` steps."""
    path = tmp_path / "loop.yaml"
    path.write_text(yaml.safe_dump(LOOP))
    ok(cli_proc, "workflow", "put", str(path))
    thread = str(ok(cli_proc, "thread", "start", "loop", "-p", "write")["thread"])
    scenario = tmp_path / "again.yaml"
    scenario.write_text(yaml.safe_dump({"roles": {"writer": [AGAIN] * steps}}))
    agent = f"uwf-mock --scenario {scenario}"
    r = cli_proc("thread", "step", thread, "--agent", agent, "--count", str(steps))
    assert r.code == 0, r.err
    return thread


def chain_of(cli_proc: Any, thread: str) -> list[str]:
    """The thread's steps, head first (through ``prev``)."""
    out = [ok(cli_proc, "thread", "show", thread)["head"]]
    while True:
        payload = ok(cli_proc, "cas", "get", out[-1])["payload"]
        if not payload.get("prev"):
            return out
        out.append(payload["prev"])


class Nodes:
    """Take a node out of the store this test's uwf uses and put it back, as a disk fault
    and a restore from a backup would."""

    def __init__(self, kind: str, root: Path) -> None:
        self.kind, self.root = kind, root

    def count(self) -> int:
        if self.kind == "fs":
            return sum(1 for _ in open_store(self.root).iter_hashes())
        with self._connect() as conn:
            row = conn.execute("SELECT count(*) FROM uwf_nodes").fetchone()
            return int(row[0])

    def lose(self, h: str) -> Any:
        if self.kind == "fs":
            return lose_node(self.root / "cas", h)  # the step's whole pack
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM uwf_nodes WHERE hash = %s", (h,)).fetchone()
            conn.execute("DELETE FROM uwf_nodes WHERE hash = %s", (h,))
            return row

    def restore(self, h: str, saved: Any) -> None:
        if self.kind == "fs":
            saved()
            return
        with self._connect() as conn:
            conn.execute("INSERT INTO uwf_nodes VALUES (%s, %s, %s, %s, %s)", saved)

    @staticmethod
    def _connect() -> Any:
        from pgserver import connect

        return connect(os.environ["UWF_STORE"])


# -- 17: a node lost in the middle of a live chain stops gc ----------------------------------


def test_a_lost_middle_node_stops_gc_and_restoring_it_repairs_the_thread(
    any_store: str, cli_proc: Any, root: Path, tmp_path: Path
) -> None:
    thread = loop_thread(cli_proc, tmp_path, 6)
    chain = chain_of(cli_proc, thread)
    assert len(chain) == 6
    lost, referrer = chain[3], chain[2]
    nodes = Nodes(any_store, root)
    saved = nodes.lose(lost)
    report = cli_proc("cas", "verify").json()
    assert report["ok"] is False
    assert {"hash": referrer, "problem": f"it refers to missing node {lost}"} in report["damaged"]
    before, files = nodes.count(), take_snapshot(root / "cas")
    for args in (["cas", "gc", "--grace", "0"], ["cas", "gc", "--grace", "0", "--dry-run"]):
        r = cli_proc(*args)
        assert r.code == 1 and r.out == "", r
        assert r.err == (
            "error: cas gc stopped, nothing was deleted: a chain is broken: "
            f"thread {thread}: node {lost} is missing (node {referrer} refers to it); "
            "the nodes behind a gap would be collected and the chain could never be "
            "repaired: restore the missing nodes from a backup and run cas gc again (uwf cas "
            f"verify lists them; {REPAIR})\n"
        )
    assert nodes.count() == before and take_snapshot(root / "cas") == files
    nodes.restore(lost, saved)  # the backup
    assert ok(cli_proc, "cas", "verify")["ok"] is True
    assert ok(cli_proc, "cas", "gc", "--grace", "0")["collected"] == 0
    assert chain_of(cli_proc, thread) == chain
    shown = ok(cli_proc, "thread", "show", thread)
    assert (shown["head"], shown["steps"]) == (chain[0], 6)


# -- 22: numbers in settings are finite -------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "where", "shown"),
    [
        ("retry: {attempts: 3, backoff: .nan, maxBackoff: .inf}", "retry.backoff", ".nan"),
        ("agentTimeout: .inf", "agentTimeout", ".inf"),
        (
            "retryOverrides: {loop: {roles: {writer: {maxBackoff: -.inf}}}}",
            "retryOverrides.loop.roles.writer.maxBackoff",
            "-.inf",
        ),
    ],
)
def test_nan_and_infinity_in_config_yaml_are_refused_where_it_is_read(
    cli_proc: Any, root: Path, tmp_path: Path, setting: str, where: str, shown: str
) -> None:
    thread = loop_thread(cli_proc, tmp_path, 1)
    (root / "config.yaml").write_text(setting + "\n")
    failing = f"{sys.executable} -c 'raise SystemExit(3)'"
    r = cli_proc("thread", "step", thread, "--agent", failing)
    line = (
        f"error: invalid config.yaml: invalid YAML: {where}: {shown} is not a finite number "
        "(NaN and infinities are refused)\n"
    )
    assert (r.code, r.err) == (1, line)
    assert "internal error" not in r.err


def test_nan_and_infinity_in_a_workflow_file_and_a_task_are_refused(
    cli_proc: Any, tmp_path: Path
) -> None:
    wf = {**LOOP, "retry": {"attempts": 2, "maxBackoff": 10}}
    path = tmp_path / "loop.yaml"
    path.write_text(yaml.safe_dump(wf).replace("maxBackoff: 10", "maxBackoff: .inf"))
    r = cli_proc("workflow", "put", str(path))
    assert r.code == 1 and "retry.maxBackoff: .inf is not a finite number" in r.err, r.err
    included = tmp_path / "flow"
    included.mkdir()
    (included / "index.yaml").write_text(
        yaml.safe_dump({**LOOP, "name": "flow", "retry": "INCLUDE"}).replace(
            "retry: INCLUDE", "retry: !include retry.json"
        )
    )
    (included / "retry.json").write_text('{"backoff": NaN}')
    r = cli_proc("workflow", "put", str(included))
    assert r.code == 1 and "invalid JSON: NaN is not a finite number" in r.err, r.err
    task = tmp_path / "task"
    task.mkdir()
    (task / "task.yaml").write_text("workflow: loop\nprompt: p\nlimits: {timeoutMinutes: .inf}\n")
    r = cli_proc("eval", "run", str(task))
    assert r.code == 1 and "limits.timeoutMinutes: .inf is not a finite number" in r.err, r.err


def test_a_back_off_too_long_for_a_time_waits_a_year(
    any_store: str, cli_proc: Any, root: Path, tmp_path: Path
) -> None:
    """A finite but absurd back-off (1e300 s) is recorded as a year, on both backends: a
    retry time past PostgreSQL's bigint used to lose the failure record."""
    thread = loop_thread(cli_proc, tmp_path, 1)
    (root / "config.yaml").write_text("retry: {backoff: 1.0e+300, maxBackoff: 1.0e+300}\n")
    failing = f"{sys.executable} -c 'raise SystemExit(3)'"
    r = cli_proc("thread", "step", thread, "--agent", failing)
    assert r.code == 5, r.err
    failure = ok(cli_proc, "thread", "show", thread)["failure"]
    assert failure["retryAt"] - failure["at"] == 366 * 86_400_000, failure


# -- 24: uwf ui reads the Host header strictly -----------------------------------------------


def test_ui_reads_the_host_header_strictly(root: Path) -> None:
    """A ``Host`` with user info, a path or a second port names no host the server serves
    (``127.0.0.1:PORT@evil.example`` used to be read as ``127.0.0.1``)."""
    root.mkdir(parents=True, exist_ok=True)
    ui = Ui()
    try:
        port = ui.port
        for header in (
            f"127.0.0.1:{port}@evil.example",
            f"localhost:{port}/evil.example",
            f"127.0.0.1:{port}:{port}",
            "127.0.0.1 evil.example",
            "",
        ):
            status, body = ui.request("/", host=header)
            shown = json.dumps(header) if header else "(none)"
            assert (status, body) == (
                421,
                f"uwf ui does not serve the host {shown}\n".encode(),
            ), header
        for header in (f"127.0.0.1:{port}", "LOCALHOST", f"[::1]:{port}", "127.0.0.1"):
            assert ui.request("/", host=header)[0] == 200, header
    finally:
        ui.stop()


# -- 25: a location that is a file says so -----------------------------------------------------


def test_a_location_that_is_a_file_is_named_for_what_it_is(cli_proc: Any, tmp_path: Path) -> None:
    from version1 import PLAN, write_review

    project = tmp_path / "project"
    write_review(project)
    (project / "work").rmdir()
    (project / "work").write_text("not a directory\n")
    thread = ok(cli_proc, "thread", "start", "review", "-p", "x", "--cwd", str(project))["thread"]
    scenario = tmp_path / "plan.yaml"
    scenario.write_text(yaml.safe_dump({"roles": {"planner": [PLAN]}}))
    ok(cli_proc, "thread", "step", thread, "--agent", f"uwf-mock --scenario {scenario}")
    head = ok(cli_proc, "thread", "show", thread)["head"]
    r = cli_proc("thread", "step", thread, "--agent", f"uwf-mock --scenario {scenario}")
    host = os.uname().nodename
    assert (r.code, r.err) == (
        5,
        f"error: thread {thread}: the working directory {project / 'work'} of builder is a "
        f"file, not a directory on this machine ({host}); the step was not run\n",
    )
    assert ok(cli_proc, "thread", "show", thread)["head"] == head


# -- 23: a schema version that does not match the tables -------------------------------------


@pytest.mark.parametrize("row", ["older", "deleted"])
def test_a_schema_row_set_back_is_refused_with_a_clear_line(
    cli_proc: Any, pg_url: str, monkeypatch: pytest.MonkeyPatch, row: str
) -> None:
    from pgserver import connect
    from uwf.backend.postgres.db import redacted_url

    monkeypatch.setenv("UWF_STORE", pg_url)
    ok(cli_proc, "workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
    with connect(pg_url, autocommit=True) as conn:
        latest = conn.execute("SELECT version FROM uwf_schema").fetchone()[0]
        if row == "older":
            conn.execute("UPDATE uwf_schema SET version = 1")
        else:
            conn.execute("DELETE FROM uwf_schema")
    said = "uwf_schema says 1" if row == "older" else "uwf_schema has no row (version 0)"
    line = (
        f"error: the store {redacted_url(pg_url)} is damaged: {said}, but its tables are at schema "
        f"version {latest}; uwf_schema was changed by hand or restored apart from the tables, "
        f"and migrating from {1 if row == 'older' else 0} would fail or change the tables "
        f"twice: set it right with UPDATE uwf_schema SET version = {latest} (uwf then "
        f"migrates the rest); see {REPAIR}\n"
    )
    for args in (["thread", "list"], ["store", "init"], ["cas", "verify"]):
        r = cli_proc(*args)
        assert (r.code, r.out, r.err) == (1, "", line), args
    with connect(pg_url, autocommit=True) as conn:
        if row == "older":
            conn.execute("UPDATE uwf_schema SET version = %s", (latest,))
        else:
            conn.execute("INSERT INTO uwf_schema VALUES (%s)", (latest,))
    assert ok(cli_proc, "workflow", "list")[0]["name"] == "solve-issue"


def test_the_tables_tell_every_schema_version_and_a_true_one_migrates(pg_url: str) -> None:
    """The markers name each migration: a store made at every older version reads as that
    version and migrates to the newest through the check."""
    from uwf.backend.postgres import schema
    from uwf.backend.postgres.db import Db

    db = Db(pg_url)
    try:
        for version in range(schema.VERSION + 1):
            db.execute("DROP SCHEMA public CASCADE")
            db.execute("CREATE SCHEMA public")
            schema.ensure(db, schema.MIGRATIONS[:version])
            assert schema.tables_version(db) == version
            assert schema.ensure(db) == {"from": version, "to": schema.VERSION}
            assert schema.tables_version(db) == schema.VERSION
    finally:
        db.close()


# -- 20, 21: state files read with a bound, their damage reported -----------------------------


def peak(*args: str, input_bytes: bytes = b"") -> tuple[int, str, str, float]:
    """Run ``uwf <args>`` under a small launcher: exit code, stdout, stderr and peak RSS in
    MB (the peak of a child forked from pytest would count pytest's own pages)."""
    import subprocess

    launcher = (
        "import resource, subprocess, sys\n"
        "r = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "sys.stderr.buffer.write(r.stderr); sys.stdout.buffer.write(r.stdout)\n"
        "sys.stdout.write(f'\\n{r.returncode} {peak}\\n')\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", launcher, str(BIN / "uwf"), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    out, _, last = ran.stdout.rstrip("\n").rpartition("\n")
    code, kb = (int(word) for word in last.split())
    return code, out, ran.stderr, kb / 1024


def huge_worker_record(root: Path, size: int) -> Path:
    """A worker record of ``size`` bytes: a valid record whose host is one long name."""
    from uwf.util.ulid import new_thread_id, now_ms

    worker = new_thread_id()
    now = now_ms()
    record = {"id": worker, "host": "", "pid": 1, "started": now, "beat": now}
    record.update(interval=10_000, steps=0, failed=0)
    text = json.dumps(record)
    fill = size - len(text)
    path = root / "workers" / f"{worker}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text.replace('"host": ""', '"host": "' + "x" * fill + '"'))
    return path


def test_a_huge_worker_record_costs_no_memory_and_is_reported(cli_proc: Any, root: Path) -> None:
    """A 100 MB record in workers/: `worker list` and a starting `uwf worker` read none of
    it (they took 3× its size), warn naming the file, and `cas verify` reports it."""
    r = cli_proc("worker", "--idle-exit", "0")  # one real worker, stopped
    assert r.code == 0, r.err
    path = huge_worker_record(root, 100_000_000)
    line = (
        f"warning: {path} is damaged: it holds 100,000,000 bytes, more than uwf ever writes "
        f"there (65,536); see {REPAIR}\n"
    )
    code, out, err, mb = peak("worker", "list")
    assert (code, err) == (0, line)
    listed = json.loads(out)
    assert len(listed) == 1 and listed[0]["state"] == "stopped"
    assert mb < 80, f"worker list: peak RSS {mb:.0f} MB"
    code, out, err, mb = peak("worker", "--idle-exit", "0")
    assert code == 0 and err.startswith(line), err
    assert mb < 80, f"uwf worker: peak RSS {mb:.0f} MB"
    report = cli_proc("cas", "verify").json()
    assert report["ok"] is False
    assert {"state": "workers", "problem": line[9:-1]} in report["damaged"]
    path.unlink()  # the repair: the record of a worker that is not running
    assert ok(cli_proc, "cas", "verify")["ok"] is True
    assert len(ok(cli_proc, "worker", "list")) == 2


def test_workers_replaced_by_a_file_is_damage_every_command_names(
    cli_proc: Any, root: Path
) -> None:
    """`workers/` made a file: a worker used to run unregistered and `worker list` printed
    `[]`; now both fail naming it, and `cas verify` reports it."""
    ok(cli_proc, "workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
    (root / "workers").write_text("not a directory\n")
    line = (
        f"error: {root / 'workers'} is damaged: it is not a directory (uwf keeps one file per "
        f"worker there); see {REPAIR}\n"
    )
    for args in (["worker", "--idle-exit", "0"], ["worker", "list"]):
        r = cli_proc(*args)
        assert (r.code, r.out, r.err) == (1, "", line), args
    report = cli_proc("cas", "verify").json()
    assert {"state": "workers", "problem": line[7:-1]} in report["damaged"]
    (root / "workers").unlink()
    assert ok(cli_proc, "cas", "verify")["ok"] is True
    assert cli_proc("worker", "--idle-exit", "0").code == 0
    assert len(ok(cli_proc, "worker", "list")) == 1


def test_a_cut_start_keys_file_is_reported_by_verify(cli_proc: Any, root: Path) -> None:
    ok(cli_proc, "workflow", "put", str(EXAMPLES / "solve-issue.yaml"))
    ok(cli_proc, "thread", "start", "solve-issue", "-p", "a", "--key", "issue-1")
    path = root / "start-keys.yaml"
    text = path.read_text()
    path.write_text(text[: text.index("issue-1") + 4])
    r = cli_proc("thread", "start", "solve-issue", "-p", "b", "--key", "issue-2")
    assert r.code == 1 and r.err.startswith(f"error: {path} is damaged: invalid YAML: "), r.err
    assert r.err.endswith(f"; see {REPAIR}\n")
    report = cli_proc("cas", "verify").json()
    assert report["ok"] is False
    assert {"state": "startKeys", "problem": r.err[7:-1]} in report["damaged"]
    path.write_text(text)  # the repair: the file from a backup
    assert ok(cli_proc, "cas", "verify")["ok"] is True


def test_a_damaged_limit_file_holds_steps_back_and_is_reported(
    cli_proc: Any, root: Path, new_thread: Any, tmp_path: Path
) -> None:
    import hashlib

    from fleetkit import configure, show

    scenario = tmp_path / "plan.yaml"
    scenario.write_text(yaml.safe_dump({"roles": {"planner": [PLAN]}}))
    agent = {"command": "uwf-mock", "args": ["--scenario", str(scenario)]}
    configure(
        root,
        agents={"mock": agent},
        defaultAgent="mock",
        limits={"agents": {"mock": {"perMinute": 5}}},
    )
    first, second = new_thread("One"), new_thread("Two")
    ok(cli_proc, "thread", "step", first)
    stem = hashlib.sha256(b"agents/mock").hexdigest()[:16]
    starts = root / "locks" / f"limit-{stem}.starts"
    assert len(json.loads(starts.read_text())) == 1
    starts.write_text('[17958, "not a time"')
    problem = f"{starts} is damaged: it does not hold a list of start times (unix ms); see {REPAIR}"
    r = cli_proc("thread", "step", second)
    assert (r.code, r.err) == (4, f"error: thread {second} is held back: {problem}\n")
    assert "failure" not in show(cli_proc, second)  # held back, not failed
    report = cli_proc("cas", "verify").json()
    assert {"state": "limits", "problem": problem} in report["damaged"]
    starts.unlink()  # the repair: the starts of the last minute are forgotten
    assert ok(cli_proc, "cas", "verify")["ok"] is True
    ok(cli_proc, "thread", "step", second)


@pytest.mark.parametrize("what", ["pipe", "directory"])
def test_something_else_at_a_state_files_path_is_named(
    cli_proc: Any, root: Path, new_thread: Any, what: str
) -> None:
    """A named pipe at `threads.yaml` used to hang every command (its open blocked); a
    directory ended in an internal error."""
    new_thread("One")
    path = root / "threads.yaml"
    path.unlink()
    if what == "pipe":
        os.mkfifo(path)
        kind = "a named pipe"
    else:
        path.mkdir()
        kind = "a directory"
    line = f"error: {path} is damaged: it is {kind}, not a file; see {REPAIR}\n"
    r = cli_proc("thread", "list", timeout=20)
    assert (r.code, r.out, r.err) == (1, "", line)
    report = cli_proc("cas", "verify", timeout=20).json()
    assert {"state": "active", "problem": line[7:-1]} in report["damaged"]


def test_a_state_file_over_its_bound_is_damage_read_no_further(
    cli: Any, root: Path, new_thread: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bounds are far above what uwf writes (256 MiB for threads.yaml): here lowered to
    a few hundred bytes, so that the test need not write 256 MiB."""
    import uwf.backend.fs.mapping as mapping  # the mapping files are read there

    for n in range(6):
        new_thread(f"thread {n}")
    size = (root / "threads.yaml").stat().st_size
    monkeypatch.setattr(mapping, "STATE_LIMIT", size - 1)
    r = cli("thread", "list")
    path = root / "threads.yaml"
    assert (r.code, r.err) == (
        1,
        f"error: {path} is damaged: it holds {size:,} bytes, more than uwf ever writes there "
        f"({size - 1:,}); see {REPAIR}\n",
    )


def test_a_huge_config_yaml_costs_no_memory(cli_proc: Any, root: Path) -> None:
    """Every command reads config.yaml (its `store:`): a 50 MB file was read whole by each."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / "config.yaml"
    path.write_bytes(b"# " + b"x" * 50_000_000 + b"\n")
    code, out, err, mb = peak("thread", "list")
    assert (code, out) == (1, "")
    assert err == f"error: invalid config.yaml: {path} is too large: more than 1048576 bytes\n"
    assert mb < 80, f"thread list: peak RSS {mb:.0f} MB"
