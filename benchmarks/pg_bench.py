"""The PostgreSQL rows (docs/performance.md, "PostgreSQL"); the fleets are ``fleet.py``'s.

* Cold ``thread show`` / ``thread list`` / ``thread step`` with the store in PostgreSQL:
  uwf on a ``uwf store copy`` of the roots ``rows_fs`` built (the copy is a row too),
  LangGraph on its ``PostgresSaver`` and Burr on its ``PostgreSQLPersister``, each in a
  database of its own on one server; the cold step timed interleaved with uwf's filesystem
  cold step (a target compares the two).
* What a step costs the server (``pgcount.py``: statements, connections, write commits, WAL
  flushes, WAL bytes) for every side: a cold step, and a worker's step with its external
  agent (the marginal step of a long-lived worker).
* uwf's own work per step beyond its agent (``uwf_warm.py own``); a warm in-process step.

The server is tests/pgserver.py's, started **durable** (``PgServer(durable=True)``: ``fsync``,
``synchronous_commit`` and ``full_page_writes`` on, PostgreSQL's defaults — the tests' server
turns fsync off) with ``pg_stat_statements`` loaded and ``pg_walinspect`` created.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import fleet
import harness
import pgcount
import uwf_bench
from bench import PEER_NAMES, Bench, Peer, Row, expect_state, n, task_of
from harness import Fig, Job

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}


def start_server() -> Any:
    """A local, durable PostgreSQL server (tests/pgserver.py) with pg_stat_statements, or
    None when the binaries are missing."""
    import pgserver

    server = pgserver.PgServer(durable=True)
    try:
        server.init()
        with open(server.data / "postgresql.conf", "a") as fh:
            fh.write("shared_preload_libraries = 'pg_stat_statements'\n")
            fh.write("pg_stat_statements.track = top\npg_stat_statements.track_utility = on\n")
        server.start()
        server.admin("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"PostgreSQL rows skipped: {exc}", file=sys.stderr)
        server.close()
        return None
    found = settings(server)
    if {k: found[k] for k in DURABLE} != DURABLE:
        server.close()
        raise harness.CommandFailed(f"the benchmark's server is not durable: {found}")
    return server


def settings(server: Any) -> dict[str, str]:
    """The server's version and the settings that make a commit durable."""
    from pgserver import connect

    names = ("server_version", *DURABLE, "wal_sync_method", "shared_buffers")
    with connect(server.url(), autocommit=True) as conn:
        return {name: str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in names}


def pg_env(root: Path, url: str) -> dict[str, str]:
    env = uwf_bench.cli_env(root)
    env["UWF_STORE"] = url
    return env


def copy_into(b: Bench, src: Path, url: str) -> Fig:
    """``uwf store copy`` of a root into PostgreSQL; nodes per second (one run)."""
    t0 = time.perf_counter()
    out = harness.run(uwf_bench.uwf("store", "copy", str(src), url), uwf_bench.cli_env(src), b.cwd)
    took = time.perf_counter() - t0
    return Fig(json.loads(out)["nodes"]["copied"] / took, "nodes/s", 1.0, [took])


def run_postgres(b: Bench, server: Any) -> None:
    """Cold show, list and step with the store in PostgreSQL, uwf beside the peers'."""
    s, tr = b.s, b.tr
    b.section = "pg"
    threads_url, list_url = server.fresh(), server.fresh()
    b.say("PostgreSQL: copying the roots into a local server (uwf store copy) …")
    rate = copy_into(b, tr.root, threads_url)
    copy_into(b, b.list_small, list_url)
    b.static("pg-copy", "uwf store copy, filesystem → PostgreSQL", {"uwf": rate})
    peers: dict[str, Peer] = b.pg_peers

    def uwf(url: str, *args: str) -> Job:
        return Job(uwf_bench.uwf(*args), pg_env(tr.root, url), b.cwd)

    counts = {"uwf": b.counts["uwf"]["small"]} | {name: s.small for name in peers}
    for size in ("small", "large"):
        steps = b.counts["uwf"][size]
        jobs = {"uwf": uwf(threads_url, "thread", "show", tr.threads[size])}
        checks: dict[str, Any] = {"uwf": _steps_are(steps)}
        if size == "small":
            jobs |= {name: p.job("show", "--thread", "small") for name, p in peers.items()}
            checks |= {name: expect_state(task_of("small"), s.small) for name in peers}
        b.timed(f"pg-show@{size}", f"PostgreSQL: thread show, {n(steps)}-step thread", jobs, checks)

    def listed(out: str) -> None:
        got = json.loads(out)
        got = len(got) if isinstance(got, list) else got["count"]
        if got != s.threads_small:
            raise harness.CommandFailed(f"thread list gave {got} threads, not {s.threads_small}")

    b.timed(
        "pg-list@small",
        f"PostgreSQL: thread list, {n(s.threads_small)} active threads",
        {"uwf": uwf(list_url, "thread", "list")}
        | {name: p.job("list", db=p.list_db) for name, p in peers.items()},
        dict.fromkeys(("uwf", *peers), listed),
    )

    def peer_step(name: str) -> Any:
        def check(out: str) -> None:
            expect_state(task_of("small"), counts[name] + 1)(out)

        return check

    def uwf_step(out: str) -> None:
        if json.loads(out)["role"] is None:
            raise harness.CommandFailed(f"uwf's step ran no role: {out.strip()}")

    import rows_fs

    fs_step = rows_fs.uwf_job(b, tr.root, "thread", "step", tr.threads["small"])
    b.timed_together(
        [
            (
                "pg-step@small",
                f"PostgreSQL: cold process, one step, {n(counts['uwf'])}-step thread",
                {"uwf": uwf(threads_url, "thread", "step", tr.threads["small"])}
                | {name: p.job("step", "--thread", "small") for name, p in peers.items()},
                {"uwf": uwf_step, **{name: peer_step(name) for name in peers}},
            ),
            (
                "pg-fs-step@small",
                "the same cold step on the filesystem (uwf; timed interleaved with the row "
                "above, for the target that compares them)",
                {"uwf": fs_step},
                {"uwf": rows_fs.stepped(b, tr.root, "small")},
            ),
        ]
    )
    rows_fs.advance(b, "small", ("uwf",))
    counter = pgcount.Counter(server.url())
    try:
        cold_counts(b, counter, threads_url, peers)
        worker_counts(b, server, counter, peers)
    finally:
        counter.close()
    limit_check(b, server)
    own_work(b, server)
    b.section = "pg"
    warm_pg(b, server, peers)


def limit_check(b: Bench, server: Any) -> None:
    """``rows_fs.limit_check`` on PostgreSQL: the same two roots copied in, one whose
    config.yaml caps the agent (a slot's advisory lock and a ``uwf_limit_starts`` row per
    step), stepped interleaved."""
    import rows_fs

    rows: list[Row] = []
    for key, root, thread, limited in rows_fs.limit_roots(b):
        url = server.fresh()
        copy_into(b, root, url)
        what = "a `limits:` entry for its agent" if limited else "no `limits:`"
        job = Job(uwf_bench.uwf("thread", "step", thread), pg_env(root, url), b.cwd)
        label = f"PostgreSQL: cold process, one step, config.yaml with {what}"
        rows.append((f"pg-{key}@small", label, {"uwf": job}, {"uwf": _limit_stepped(url, limited)}))
    b.timed_together(rows)


def _limit_stepped(url: str, limited: bool) -> Any:
    """The step landed, and counted a start of its limit exactly when configured to."""

    def check(out: str) -> None:
        from pgserver import connect

        if json.loads(out)["role"] is None:
            raise harness.CommandFailed(f"uwf's step ran no role: {out.strip()}")
        with connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM uwf_limit_starts").fetchone()
        if (row is not None and row[0] > 0) != limited:
            raise harness.CommandFailed(f"the limit was {'not ' if limited else ''}checked")

    return check


def _steps_are(steps: int) -> Any:
    def check(out: str) -> None:
        if json.loads(out)["steps"] != steps:
            raise harness.CommandFailed(f"thread show: not {steps} steps: {out.strip()[:200]}")

    return check


def counted(b: Bench, key: str, label: str, values: dict[str, pgcount.Counts]) -> None:
    """One row per count (statements, connections, write commits, WAL flushes, WAL bytes),
    in the section "pg-count"."""
    section, b.section = b.section, "pg-count"
    for field, what, unit in (
        ("statements", "statements", "count"),
        ("connections", "connections opened", "count"),
        ("write_commits", "write commits (commit records in the WAL)", "count"),
        ("wal_flushes", "WAL flushes (pg_stat_wal.wal_sync)", "count"),
        ("wal_bytes", "WAL bytes", "B"),
    ):
        figs = {tool: Fig(getattr(c, field), unit) for tool, c in values.items()}
        b.static(f"{key}-{field.replace('_', '-')}", f"{label}: {what}", figs)
    b.extra.setdefault("pg_counts", {})[key] = {t: c.as_json() for t, c in values.items()}
    b.section = section


def cold_counts(b: Bench, counter: pgcount.Counter, url: str, peers: dict[str, Peer]) -> None:
    """What one cold step costs the server (the process's start included: connections, a
    schema check), each side on its own database: the median of ``statements`` steps, each
    counted alone."""
    jobs = {
        "uwf": (
            Job(
                uwf_bench.uwf("thread", "step", b.tr.threads["small"]),
                pg_env(b.tr.root, url),
                b.cwd,
            ),
            url,
        )
    }
    jobs |= {name: (p.job("step", "--thread", "small"), p.db) for name, p in peers.items()}
    values: dict[str, pgcount.Counts] = {}
    for tool, (job, db) in jobs.items():

        def step(job: Job = job) -> None:
            harness.run(job.argv, job.env, job.cwd)

        name = pgcount.database(db)
        values[tool] = pgcount.median([counter.around(name, step) for _ in range(b.s.statements)])
    label = f"PostgreSQL: per cold step (median of {b.s.statements})"
    counted(b, "pg-cold", label, values)


def worker_counts(b: Bench, server: Any, counter: pgcount.Counter, peers: dict[str, Peer]) -> None:
    """What one step of a long-lived worker with the external agent costs the server, its
    agent's reads and writes included: ``uwf worker --max-steps K`` (its agent program
    through uwf-cmd in the worker's process, ``python: uwf-cmd``) and each peer's fleet
    worker (its node spawning the agent, the claim included), each run for 1 and for
    1 + ``statements`` steps on one thread; the difference over the extra steps
    (``pgcount.marginal``)."""
    import fleet

    few, many = 1, 1 + b.s.statements
    values: dict[str, pgcount.Counts] = {}
    url = server.fresh()
    root = Path(tempfile.mkdtemp(prefix="count-", dir=b.work))
    uwf_bench.setup_root(root)
    env = pg_env(root, url)
    harness.run(uwf_bench.uwf("workflow", "put", str(uwf_bench.WORKFLOW_FILE)), env, b.cwd)
    warm = [sys.executable, str(Path(__file__).parent / "uwf_warm.py"), "threads"]
    harness.run([*warm, "--store", url, "--count", "1", "--rounds", "1000"], env, b.cwd)
    worker = ("worker", "--agent", fleet.external_agent(), "--heartbeat", "3600")

    def uwf_run(k: int) -> None:
        out = harness.run(uwf_bench.uwf(*worker, "--max-steps", str(k)), env, b.cwd)
        if len(out.splitlines()) != k or '"error"' in out:
            raise harness.CommandFailed(f"uwf worker did not run {k} steps: {out[-300:]}")

    values["uwf"] = pgcount.marginal(counter, pgcount.database(url), uwf_run, few, many)
    for name, peer in peers.items():
        db = server.fresh()
        peer.call("fleet-setup", "--count", "1", "--steps", "1000", "--prefix", "count", db=db)

        def peer_run(k: int, peer: Peer = peer, db: str = db) -> None:
            argv = peer.argv("fleet-worker", *fleet.external_args(), "--max-steps", str(k), db=db)
            last = harness.run(argv, peer.env, peer.dir).strip().splitlines()[-1]
            if json.loads(last)["steps"] != k:
                raise harness.CommandFailed(f"{peer.name}'s worker did not run {k} steps")

        values[name] = pgcount.marginal(counter, pgcount.database(db), peer_run, few, many)
    label = "PostgreSQL: per step of a worker, its external agent included"
    counted(b, "pg-worker", label, values)


def own_work(b: Bench, server: Any) -> None:
    """uwf's own work per step beyond its agent (claim, plan, commit), in a warm worker."""
    url = server.fresh()
    root = Path(tempfile.mkdtemp(prefix="own-", dir=b.work))
    (root / "config.yaml").write_text((b.tr.root / "config.yaml").read_text())
    env = pg_env(root, url)
    harness.run(uwf_bench.uwf("workflow", "put", str(uwf_bench.WORKFLOW_FILE)), env, b.cwd)
    argv = [sys.executable, str(Path(__file__).parent / "uwf_warm.py"), "own", "--store", url]
    out = json.loads(
        harness.run(
            [*argv, "--count", str(4 * b.s.warm_count), "--stats", server.url()], env, b.cwd
        )
    )
    b.section = "pg-own"
    b.static(
        "pg-own-ms",
        "PostgreSQL: uwf's own work per step beyond its agent (claim, plan, commit), warm worker",
        {"uwf": harness.summarise(out["own_ms"])},
    )
    own = out["own_statements"]
    b.static(
        "pg-own-statements",
        "PostgreSQL: uwf's own statements per step beyond its agent",
        {"uwf": Fig(statistics.median(own), "statements", max(own) / max(1, min(own)), own)},
    )
    agent = out["agent_statements"]
    b.static(
        "pg-agent-statements",
        "PostgreSQL: the statements of the agent's reads and writes per step, run by uwf for it",
        {"uwf": Fig(statistics.median(agent), "statements", 1.0, agent)},
    )


def warm_pg(b: Bench, server: Any, peers: dict[str, Peer]) -> None:
    import rows_fs

    root = Path(tempfile.mkdtemp(prefix="warm-", dir=b.work))
    (root / "config.yaml").write_text((b.tr.root / "config.yaml").read_text())
    url = server.fresh()
    harness.run(
        uwf_bench.uwf("workflow", "put", str(uwf_bench.WORKFLOW_FILE)), pg_env(root, url), b.cwd
    )
    saved = b.peers
    b.peers = peers
    try:
        rows_fs.warm(
            b,
            url,
            "pg-warm",
            "PostgreSQL: warm process, one step, agent in process, per step",
            lambda p: server.fresh(),
        )
    finally:
        b.peers = saved


def run_all(b: Bench) -> None:
    """Everything of this module, on one local server started and stopped here."""
    server = start_server()
    try:
        b.pg_peers = {}
        if server is not None:
            b.extra["pg_settings"] = settings(server)
            b.extra["pg_version"] = b.extra["pg_settings"]["server_version"].split()[0]
            for name, peer in b.peers.items():
                pg = Peer(name, peer.python, peer.dir, server.fresh(), server.fresh())
                b.say(f"building {name} on PostgreSQL …")
                pg.call(
                    "build", "--small", str(b.s.small), "--mid", "0", "--large", "0", "--at", "1"
                )
                pg.call("build-list", "--count", str(b.s.threads_small), db=pg.list_db)
                b.pg_peers[name] = pg
            run_postgres(b, server)
        fleet.run_fleet(b, server)
    finally:
        if server is not None:
            server.close()


__all__ = ["PEER_NAMES", "run_all"]
