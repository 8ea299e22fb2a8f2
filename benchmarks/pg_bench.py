"""The PostgreSQL rows and the fleet rows (docs/performance.md, "PostgreSQL and fleets").

* Cold ``thread show`` / ``thread list`` / ``thread step`` with the store in PostgreSQL:
  uwf on a ``uwf store copy`` of the roots ``rows_fs`` built (the copy is a row too),
  LangGraph on its ``PostgresSaver`` and Burr on its ``PostgreSQLPersister``, each in a
  database of its own on one server; the statements the server ran per cold step, for each
  (``pg_stat_statements``); uwf's own work per step beyond its agent (``uwf_warm.py own``);
  a warm in-process step on each.
* Fleets: N worker processes (1, 2, 4, 8) stepping threads of the loop until each has
  ``fleet_steps`` steps, ``fleet_runs`` times each: uwf's ``uwf worker`` (which claims threads
  through the store: step locks, skip-locked) on the filesystem and on PostgreSQL; LangGraph
  and Burr on PostgreSQL, sharing threads between processes the way their docs allow — the
  same saver or persister on the same database in every process, each thread stepped by one
  process at a time (neither has a claim of its own: the threads are dealt out to the
  workers in turn). Steps per second of wall time, from the workers' start to the last step.

The server is the one the tests use (``tests/pgserver.py``: a temp directory, loopback, a
free port, ``fsync`` off) with ``pg_stat_statements`` loaded.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import harness
import uwf_bench
import workload
from bench import PEER_NAMES, Bench, Peer, Row, expect_state, n, task_of
from harness import Fig, Job

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

if TYPE_CHECKING:
    from uwf.util.outputs import StepEntry

WORKERS = (1, 2, 4, 8)
IDLE_EXIT = 0.5  # seconds a uwf worker waits for work before it exits


def start_server() -> Any:
    """A local PostgreSQL server (tests/pgserver.py) with pg_stat_statements, or None."""
    import pgserver

    server = pgserver.PgServer()
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
    return server


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


class Statements:
    """Statements the server ran for one database, read through the admin database."""

    def __init__(self, server: Any) -> None:
        self.server = server

    def reset(self) -> None:
        self.server.admin("SELECT pg_stat_statements_reset()")

    def count(self, url: str) -> int:
        import psycopg

        name = url.rsplit("/", 1)[1]
        with psycopg.connect(self.server.url(), autocommit=True) as conn:
            row = conn.execute(
                "SELECT coalesce(sum(s.calls), 0) FROM pg_stat_statements s"
                " JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s",
                (name,),
            ).fetchone()
        return int(row[0]) if row else 0


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

    b.timed(
        "pg-step@small",
        f"PostgreSQL: cold process, one step, {n(counts['uwf'])}-step thread",
        {"uwf": uwf(threads_url, "thread", "step", tr.threads["small"])}
        | {name: p.job("step", "--thread", "small") for name, p in peers.items()},
        {"uwf": uwf_step, **{name: peer_step(name) for name in peers}},
    )
    statements_per_step(b, server, threads_url, peers)
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
        import psycopg

        if json.loads(out)["role"] is None:
            raise harness.CommandFailed(f"uwf's step ran no role: {out.strip()}")
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM uwf_limit_starts").fetchone()
        if (row is not None and row[0] > 0) != limited:
            raise harness.CommandFailed(f"the limit was {'not ' if limited else ''}checked")

    return check


def _steps_are(steps: int) -> Any:
    def check(out: str) -> None:
        if json.loads(out)["steps"] != steps:
            raise harness.CommandFailed(f"thread show: not {steps} steps: {out.strip()[:200]}")

    return check


def statements_per_step(b: Bench, server: Any, url: str, peers: dict[str, Peer]) -> None:
    """The statements the server ran per cold step (the process's start included: schema
    check, connection set-up), each tool on its own database."""
    stats = Statements(server)
    count = b.s.statements
    values: dict[str, Fig] = {}
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
    for tool, (job, db) in jobs.items():
        stats.reset()
        for _ in range(count):
            harness.run(job.argv, job.env, job.cwd)
        values[tool] = Fig(stats.count(db) / count, "statements")
    b.static(
        "pg-statements", f"PostgreSQL: statements per cold step (mean of {count} steps)", values
    )


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


# -- fleets -------------------------------------------------------------------------------------


def _uwf_fleet_store(b: Bench, url: str | None) -> dict[str, str]:
    """A store with the workflow, the benchmark's agent and the fleet's threads; its env."""
    root = Path(tempfile.mkdtemp(prefix="fleet-", dir=b.work))
    if url is None:
        uwf_bench.setup_root(root)
        env = uwf_bench.cli_env(root)
    else:
        (root / "config.yaml").write_text((b.tr.root / "config.yaml").read_text())
        env = pg_env(root, url)
        harness.run(uwf_bench.uwf("workflow", "put", str(uwf_bench.WORKFLOW_FILE)), env, b.cwd)
    for i in range(b.s.fleet_threads):
        start = ("thread", "start", "solve-issue", "-p", task_of(f"fleet-{i}"))
        harness.run(uwf_bench.uwf(*start, "--max-rounds", str(b.s.fleet_steps)), env, b.cwd)
    return env


def uwf_fleet(b: Bench, workers: int, url: str | None) -> float:
    """Steps per second of ``workers`` ``uwf worker`` processes draining the fleet."""
    env = _uwf_fleet_store(b, url)
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            uwf_bench.uwf("worker", "--idle-exit", str(IDLE_EXIT)),
            env=env,
            cwd=b.cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for _ in range(workers)
    ]
    steps = 0
    for proc in procs:
        out, _ = proc.communicate(timeout=3600)
        if proc.returncode != 0:
            raise harness.CommandFailed(f"uwf worker exited {proc.returncode}")
        steps += sum(1 for line in out.splitlines() if '"error"' not in line)
    took = time.perf_counter() - t0 - IDLE_EXIT  # the last worker idles before it exits
    expected = b.s.fleet_threads * b.s.fleet_steps
    if steps != expected:
        raise harness.CommandFailed(f"the uwf fleet ran {steps} steps, not {expected}")
    check_uwf_fleet(b, env)
    return steps / took


def check_uwf_fleet(b: Bench, env: dict[str, str]) -> None:
    """Every thread of the fleet ran its steps and ended at its round limit, each step with
    its answer (read through the library, unmeasured)."""
    from uwf.backend import open_backend
    from uwf.engine.threads import lifecycle

    with open_backend(env.get("UWF_STORE") or env["UNCAGED_WORKFLOW_STORAGE_ROOT"]) as backend:
        ended = {
            t["task"]: t["thread"] for t in lifecycle.list_threads(backend, status="max_rounds")
        }
        for i in range(b.s.fleet_threads):
            task = task_of(f"fleet-{i}")
            steps = cast("list[StepEntry]", lifecycle.steps(backend, ended[task])["steps"][1:])
            answers = [(s["role"], s["output"]) for s in steps]
            expected = [
                (workload.role_at(n), workload.fields(task, workload.role_at(n), n))
                for n in range(1, b.s.fleet_steps + 1)
            ]
            if answers != expected:
                raise harness.CommandFailed(f"the uwf fleet's thread {task!r} is not as expected")


def peer_fleet(b: Bench, peer: Peer, workers: int, url: str, run: int) -> float:
    """Steps per second of ``workers`` processes of a peer, the threads dealt out in turn."""
    threads = [f"fleet{run}-{workers}-{i}" for i in range(b.s.fleet_threads)]
    shares = [threads[w::workers] for w in range(workers)]  # a worker with none: not started
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            peer.argv(
                "fleet-worker",
                "--threads",
                ",".join(share),
                "--steps",
                str(b.s.fleet_steps),
                db=url,
            ),
            env=peer.env,
            cwd=peer.dir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for share in shares
        if share
    ]
    steps = 0
    for proc in procs:
        out, err = proc.communicate(timeout=3600)
        if proc.returncode != 0:
            raise harness.CommandFailed(
                f"{peer.name} fleet worker exited {proc.returncode}: {err[-300:]}"
            )
        steps += json.loads(out)["steps"]
    took = time.perf_counter() - t0
    if steps != b.s.fleet_steps * len(threads):
        raise harness.CommandFailed(f"the {peer.name} fleet ran {steps} steps")
    # every thread holds its last answer, read back through the saver or persister
    found = peer.call("verify-threads", "--threads", ",".join(threads), db=url)
    for thread in threads:
        expect_state(task_of(thread), b.s.fleet_steps)(json.dumps(found[thread]))
    return steps / took


def run_fleet(b: Bench, server: Any | None) -> None:
    s = b.s
    b.section = "fleet"
    b.say(
        f"fleets: {s.fleet_threads} threads × {s.fleet_steps} steps, "
        f"{', '.join(map(str, WORKERS))} workers, {s.fleet_runs} runs each …"
    )
    for workers in WORKERS:
        for key, name, pg in (("fs", "filesystem", False), ("pg", "PostgreSQL", True)):
            if pg and server is None:
                continue
            rates: dict[str, list[float]] = {"uwf": []}
            for run in range(s.fleet_runs):
                url = server.fresh() if pg and server is not None else None
                rates["uwf"].append(uwf_fleet(b, workers, url))
                if pg:
                    for peer_name, peer in b.pg_peers.items():
                        url = peer.fleet_db
                        rates.setdefault(peer_name, []).append(
                            peer_fleet(b, peer, workers, url, run)
                        )
            s_ = "s" if workers > 1 else ""
            b.static(
                f"fleet-{key}@{workers}",
                f"fleet: steps/s, {workers} worker{s_}, {name}",
                {tool: harness.summarise(r, "steps/s") for tool, r in rates.items()},
            )


def run_all(b: Bench) -> None:
    """Everything of this module, on one local server started and stopped here."""
    server = start_server()
    try:
        b.pg_peers = {}
        if server is not None:
            b.extra["pg_version"] = _version(server)
            for name, peer in b.peers.items():
                pg = Peer(name, peer.python, peer.dir, server.fresh(), server.fresh())
                pg.fleet_db = server.fresh()
                b.say(f"building {name} on PostgreSQL …")
                pg.call(
                    "build", "--small", str(b.s.small), "--mid", "0", "--large", "0", "--at", "1"
                )
                pg.call("build-list", "--count", str(b.s.threads_small), db=pg.list_db)
                pg.call("build-list", "--count", "0", db=pg.fleet_db)  # its tables
                b.pg_peers[name] = pg
            run_postgres(b, server)
        run_fleet(b, server)
    finally:
        if server is not None:
            server.close()


def _version(server: Any) -> str:
    import psycopg

    with psycopg.connect(server.url(), autocommit=True) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]).split()[0] if row else "?"


__all__ = ["PEER_NAMES", "run_all"]
