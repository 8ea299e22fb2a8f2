"""The PostgreSQL rows of the benchmark and the fleet throughput rows (docs/performance.md).

* Cold ``thread show`` / ``thread step`` / ``thread list`` with the store in PostgreSQL, beside
  the filesystem rows of the same run: the roots ``compare.py`` built are moved into a local
  server with ``uwf store copy`` (itself a row), and the peers run their Postgres savers
  (LangGraph's ``PostgresSaver``, Burr's ``PostgreSQLPersister``) on the same server.
* Fleet throughput: ``uwf worker`` processes (1, 2, 4, 8) draining threads of the no-op loop,
  each archived by ``--max-rounds`` after ``FLEET_STEPS`` steps, on both backends: steps per
  second of wall time from the workers' start to the last step.

The server is the one the tests use (``tests/pgserver.py``): a temp directory, loopback, a
free port, ``fsync`` off.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import harness
import uwf_bench
from harness import Fig, Job

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

WORKERS = (1, 2, 4, 8)
FLEET_STEPS = 5  # steps per thread in the fleet rows (--max-rounds)
IDLE_EXIT = 0.5  # seconds a fleet worker waits for work before it exits


def start_server() -> Any:
    """A local PostgreSQL server (tests/pgserver.py), or None when it cannot start."""
    import pgserver

    server = pgserver.PgServer()
    try:
        server.init()
        server.start()
    except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
        print(f"PostgreSQL rows skipped: {exc}", file=sys.stderr)
        server.close()
        return None
    return server


def pg_env(root: Path, url: str) -> dict[str, str]:
    env = uwf_bench.cli_env(root)
    env["UWF_STORE"] = url
    return env


def copy_into(bench: Any, src: Path, url: str) -> Fig:
    """``uwf store copy`` of a root into PostgreSQL; nodes per second (one run)."""
    t0 = time.perf_counter()
    out = harness.run(
        uwf_bench.uwf("store", "copy", str(src), url), uwf_bench.cli_env(src), bench.cwd
    )
    took = time.perf_counter() - t0
    return Fig(json.loads(out)["nodes"]["copied"] / took, "nodes/s", 1.0, [took])


def run_postgres(bench: Any, server: Any) -> None:
    """Cold show, list and step with the store in PostgreSQL, uwf beside the peers' savers."""
    s, tr = bench.s, bench.tr
    threads_url, list_url = server.fresh(), server.fresh()
    bench.say("PostgreSQL: copying the roots into a local server (uwf store copy) …")
    rate = copy_into(bench, tr.root, threads_url)
    copy_into(bench, bench.list_small, list_url)
    bench.static("pg-copy", "uwf store copy, filesystem → PostgreSQL", {"uwf": rate})

    def uwf(url: str, *args: str) -> Job:
        return Job(uwf_bench.uwf(*args), pg_env(tr.root, url), bench.cwd)

    peers = bench.pg_peers
    for size, steps in (("small", s.small), ("large", s.large)):
        jobs = {"uwf": uwf(threads_url, "thread", "show", tr.threads[size])}
        if size == "small":
            jobs |= {name: p.job("show", "--thread", "small") for name, p in peers.items()}
        bench.timed(f"pg-show@{size}", f"PostgreSQL: thread show, {steps:,}-step thread", jobs)
    bench.timed(
        "pg-list@small",
        f"PostgreSQL: thread list, {s.threads_small:,} active threads",
        {"uwf": uwf(list_url, "thread", "list")}
        | {name: p.job("list", db=p.list_db) for name, p in peers.items()},
    )
    bench.timed(
        "pg-step@small",
        f"PostgreSQL: cold process, one step, {s.small}-step thread",
        {"uwf": uwf(threads_url, "thread", "step", tr.threads["small"])}
        | {name: p.job("step", "--thread", "small") for name, p in peers.items()},
    )


def _fleet_store(bench: Any, url: str | None) -> dict[str, str]:
    """A store with the workflow, uwf-mock configured and the fleet's threads; its env."""
    root = Path(tempfile.mkdtemp(prefix="fleet-", dir=bench.work))
    if url is None:
        uwf_bench.setup_root(root, bench.scenario)
        env = uwf_bench.cli_env(root)
    else:
        (root / "config.yaml").write_text((bench.tr.root / "config.yaml").read_text())
        env = pg_env(root, url)
        harness.run(uwf_bench.uwf("workflow", "put", str(uwf_bench.WORKFLOW_FILE)), env, bench.cwd)
    for i in range(bench.fleet_threads):
        start = ("thread", "start", "solve-issue", "-p", f"task {i}")
        harness.run(uwf_bench.uwf(*start, "--max-rounds", str(FLEET_STEPS)), env, bench.cwd)
    return env


def fleet_rate(bench: Any, workers: int, url: str | None) -> Fig:
    """Steps per second of ``workers`` ``uwf worker`` processes draining the fleet's threads."""
    env = _fleet_store(bench, url)
    t0 = time.perf_counter()
    procs = [
        subprocess.Popen(
            uwf_bench.uwf("worker", "--idle-exit", str(IDLE_EXIT)),
            env=env,
            cwd=bench.cwd,
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
    expected = bench.fleet_threads * FLEET_STEPS
    if steps != expected:
        raise harness.CommandFailed(f"the fleet ran {steps} steps, not {expected}")
    return Fig(steps / took, "steps/s", 1.0, [took])


def run_fleet(bench: Any, server: Any | None) -> None:
    """Fleet throughput rows: 1, 2, 4, 8 workers on each backend."""
    bench.fleet_threads = min(bench.s.threads_small, 8 if bench.args.quick else 24)
    bench.say(
        f"fleet: {bench.fleet_threads} threads × {FLEET_STEPS} steps, "
        f"uwf worker × {', '.join(map(str, WORKERS))} …"
    )
    for workers in WORKERS:
        for key, name, url in (
            ("fs", "filesystem", None),
            ("pg", "PostgreSQL", server.fresh() if server is not None else None),
        ):
            if key == "pg" and url is None:
                continue
            bench.static(
                f"fleet-{key}@{workers}",
                f"fleet: steps/s, {workers} uwf worker{'s' if workers > 1 else ''}, {name}",
                {"uwf": fleet_rate(bench, workers, url)},
            )


PG_PEERS = {
    "LangGraph": Path(__file__).resolve().parent / "peers" / "langgraph_pg.py",
    "Burr": Path(__file__).resolve().parent / "peers" / "burr_pg.py",
}


class PgPeer:
    """One peer's PostgreSQL script, run as fresh processes of the peer venv's python."""

    def __init__(self, name: str, python: Path, env: dict[str, str], server: Any) -> None:
        self.name, self.python, self.env = name, python, env
        self.script = PG_PEERS[name]
        self.db, self.list_db = server.fresh(), server.fresh()

    def argv(self, op: str, *extra: str, db: str | None = None) -> list[str]:
        return [str(self.python), str(self.script), op, "--db", db or self.db, *extra]

    def job(self, op: str, *extra: str, db: str | None = None) -> Job:
        return Job(self.argv(op, *extra, db=db), self.env, Path(self.script).parent)

    def build(self, small: int, count: int) -> float:
        argv = self.argv("build", "--small", str(small), "--count", str(count))
        out = harness.run([*argv, "--copy-db", self.list_db], self.env, Path(self.script).parent)
        return float(json.loads(out)["seconds"])


def run_all(bench: Any) -> None:
    """Everything of this module, on one local server started and stopped here."""
    server = start_server()
    try:
        bench.pg_peers = {}
        if server is not None:
            for name, peer in bench.peers.items():
                pg = PgPeer(name, peer.python, peer.env, server)
                bench.say(f"building {name} on PostgreSQL …")
                took = pg.build(bench.s.small, bench.s.threads_small)
                bench.say(f"  built in {took:.1f} s")
                bench.pg_peers[name] = pg
            run_postgres(bench, server)
        run_fleet(bench, server)
    finally:
        if server is not None:
            server.close()
