"""What the two peer benchmarks share (standard library only: they run in the peer venv).

Each peer script is a small CLI, ``<script> <operation> --db FILE-or-URL [...]``, run as a
fresh process by ``benchmarks/compare.py`` exactly like ``uwf`` is, so its figures include
the interpreter start and the imports a cold process pays. Operations print one JSON line,
which the benchmark checks against ``workload.py`` (the right step, the right answer).

The workload is uwf's loop: planner -> developer -> reviewer, the reviewer always rejecting.
Each node produces the answer ``workload.py`` gives for (task, role, step) — a different,
realistic one at every step, the same one uwf's agent writes — and keeps it in the state:
``output`` (the answer's structured fields), ``content`` (its markdown body), ``status``,
``role`` and ``step``. Nodes overwrite these fields; nothing accumulates, so the state does
not grow with the thread (both peers store the whole state per step and would grow
quadratically if it did). With ``--external`` a node instead runs the same small agent
program ``uwf-cmd`` runs in uwf's external-agent row (``benchmarks/agent.py``), giving it a
prompt on stdin and parsing the frontmatter of what it prints.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/: workload

import workload

THREADS = ("small", "mid", "large")
AGENT = Path(__file__).resolve().parent.parent / "agent.py"


def task_of(thread: str) -> str:
    """The task of a benchmark thread: the key of its answers, on every side."""
    return f"benchmark task {thread}"


def is_url(db: str) -> bool:
    return db.startswith(("postgresql://", "postgres://"))


def emit(value: Any) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


# -- the nodes' work ----------------------------------------------------------------------------

EXTERNAL: dict[str, Any] = {"on": False, "python": sys.executable}


def produce(task: str, role: str, step: int, last: dict[str, Any] | None) -> dict[str, Any]:
    """The state update of step ``step``: the answer's fields and body, in process or from the
    external agent program (``--external``)."""
    if EXTERNAL["on"]:
        fields, body = run_agent(task, role, step, last)
    else:
        fields, body = workload.fields(task, role, step), workload.body(task, role, step)
    return {
        "step": step,
        "role": role,
        "output": fields,
        "content": body,
        "status": fields["status"],
    }


def run_agent(
    task: str, role: str, step: int, last: dict[str, Any] | None
) -> tuple[dict[str, Any], str]:
    """Run ``agent.py`` as uwf-cmd does (prompt on stdin, answer on stdout) and parse the
    frontmatter of its answer with the safe YAML loader, as uwf's fast path does."""
    import yaml

    prompt = f"## Task\n{task}\n\n## Last output\n{json.dumps(last or {})}\n"
    env = dict(os.environ, BENCH_TASK=task, BENCH_ROLE=role, BENCH_STEP=str(step))
    proc = subprocess.run(
        [str(EXTERNAL["python"]), str(AGENT)],
        input=prompt.encode(),
        stdout=subprocess.PIPE,
        env=env,
        check=True,
    )
    raw = proc.stdout.decode()
    _, block, body = raw.split("---\n", 2)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(block, Loader=loader), body


# -- checks and sizes ---------------------------------------------------------------------------


def state_summary(values: dict[str, Any]) -> dict[str, Any]:
    """What an operation prints of a state: its step number and answer (checked by the
    benchmark against workload.py)."""
    return {
        "steps": values.get("step", 0),
        "role": values.get("role"),
        "output": values.get("output"),
    }


def sqlite_usage(path: str) -> dict[str, int]:
    """The database's durable size: WAL folded in and truncated first, then the files' sizes
    (apparent and blocks allocated) summed with any -wal/-journal left."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    apparent = blocks = 0
    for suffix in ("", "-wal", "-journal"):
        try:
            st = os.stat(path + suffix)
        except FileNotFoundError:
            continue
        apparent += st.st_size
        blocks += st.st_blocks * 512
    return {"apparent": apparent, "blocks": blocks}


class Windows:
    """Bytes per step of the large thread while it is built: an early window (steps
    ``small``..``small + window``) and a late one (``large - window``..``large``)."""

    def __init__(self, db: str, small: int, large: int, window: int) -> None:
        self.db = db
        self.small, self.large, self.window = small, large, window
        self.at = {small, small + window, large - window, large}
        self.sizes: dict[int, dict[str, int]] = {}

    def after(self, thread: str, step: int) -> None:
        if thread == "large" and step in self.at and not is_url(self.db):
            self.sizes[step] = sqlite_usage(self.db)

    def result(self) -> dict[str, dict[str, float]]:
        if not self.sizes:
            return {}

        def per(a: int, b: int) -> dict[str, float]:
            first, last = self.sizes[a], self.sizes[b]
            return {k: (last[k] - first[k]) / (b - a) for k in ("apparent", "blocks")}

        s, w, large = self.small, self.window, self.large
        return {"early": per(s, s + w), "late": per(large - w, large)}


def copy_sqlite(source: str, dest: str) -> None:
    """A consistent copy of a database (SQLite's online backup)."""
    src, target = sqlite3.connect(source), sqlite3.connect(dest)
    try:
        src.backup(target)
    finally:
        target.close()
        src.close()


# -- warm runs ----------------------------------------------------------------------------------


def batches(step: Callable[[], object], batches: int, size: int) -> dict[str, list[float]]:
    """Mean milliseconds per call of ``step`` over ``batches`` batches of ``size`` calls: wall
    time (``ms``) and this process's CPU time (``cpu_ms``)."""
    wall, cpu = [], []
    for _ in range(batches):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(size):
            step()
        wall.append((time.perf_counter() - t0) * 1000 / size)
        cpu.append((time.process_time() - c0) * 1000 / size)
    return {"ms": wall, "cpu_ms": cpu}


# -- fleets: the claim ---------------------------------------------------------------------------

CLAIMS = "bench_claims"


def pg_connect(url: str) -> Any:
    """A connection (not autocommit) with the driver this venv has: psycopg 3 (LangGraph's),
    else psycopg2 (Burr's)."""
    try:
        import psycopg
    except ImportError:
        import psycopg2

        return psycopg2.connect(url)
    return psycopg.connect(url)


def fleet_threads(prefix: str, count: int) -> list[str]:
    """A fleet's threads, named in the order they were started (as uwf's ids sort)."""
    return [f"{prefix}-{i:04d}" for i in range(count)]


def setup_claims(url: str, threads: list[str], steps: int) -> None:
    """The fleet's work: every thread, each to be stepped ``steps`` times."""
    conn = pg_connect(url)
    try:
        cur = conn.cursor()
        cur.execute(
            f"CREATE TABLE IF NOT EXISTS {CLAIMS} (thread text PRIMARY KEY,"
            " steps integer NOT NULL DEFAULT 0, target integer NOT NULL)"
        )
        cur.executemany(
            f"INSERT INTO {CLAIMS} (thread, target) VALUES (%s, %s)", [(t, steps) for t in threads]
        )
        conn.commit()
    finally:
        conn.close()


class Claims:
    """Claiming threads from the shared database, as a fleet of processes does without a
    coordinator: the oldest thread with steps left that no other worker holds (``FOR UPDATE
    SKIP LOCKED``), its row locked for the step and its count moved in the same commit.
    Neither peer has a claim of its own; this is the usual queue-table pattern, one row lock
    and one commit per step."""

    def __init__(self, url: str) -> None:
        self.conn = pg_connect(url)
        self.cur = self.conn.cursor()

    def take(self) -> tuple[str, int] | None:
        self.cur.execute(
            f"SELECT thread, steps FROM {CLAIMS} WHERE steps < target"
            " ORDER BY thread LIMIT 1 FOR UPDATE SKIP LOCKED"
        )
        row = self.cur.fetchone()
        if row is None:
            self.conn.commit()
            return None
        return str(row[0]), int(row[1])

    def done(self, thread: str) -> None:
        self.cur.execute(f"UPDATE {CLAIMS} SET steps = steps + 1 WHERE thread = %s", (thread,))
        self.conn.commit()

    def release(self) -> None:
        self.conn.rollback()

    def close(self) -> None:
        self.conn.close()


def fleet_loop(step: Callable[[str, int], object], url: str, max_steps: int) -> dict[str, int]:
    """A fleet worker, its imports and connections done: says it is ready (the timed window
    starts once every worker is), then claims and steps threads until none is left (or
    ``max_steps``), one line per step as it lands. ``step(thread, done)`` runs the thread's
    next step (``done`` steps were taken before)."""
    if EXTERNAL["on"]:
        import yaml  # noqa: F401  # the node's frontmatter parser: an import, done before

    claims = Claims(url)
    emit({"ready": True, "t": time.monotonic()})
    count = 0
    try:
        while not max_steps or count < max_steps:
            got = claims.take()
            if got is None:
                break
            thread, done = got
            try:
                step(thread, done)
            except BaseException:
                claims.release()
                raise
            claims.done(thread)
            count += 1
            emit({"thread": thread, "step": done + 1, "t": time.monotonic()})
    finally:
        claims.close()
    return {"steps": count}


# -- the command line ---------------------------------------------------------------------------


def parser(operations: dict[str, Callable[[argparse.Namespace], Any]]) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("operation", choices=sorted(operations))
    ap.add_argument("--db", required=True, help="a SQLite file, or a postgresql:// URL")
    ap.add_argument("--thread", default="small")
    ap.add_argument("--threads", default="", help="comma-separated (fleet-worker)")
    ap.add_argument("--small", type=int, default=10)
    ap.add_argument("--mid", type=int, default=1000)
    ap.add_argument("--large", type=int, default=10000)
    ap.add_argument("--window", type=int, default=1000, help="build: steps per bytes window")
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--copy-at", type=int, default=100)
    ap.add_argument("--copy-db", default="")
    ap.add_argument("--at", type=int, default=5000)
    ap.add_argument("--checkpoint", default="", help="fork: the checkpoint id to fork from")
    ap.add_argument("--external", action="store_true", help="nodes run agent.py")
    ap.add_argument("--agent-python", default=sys.executable)
    ap.add_argument("--prefix", default="fleet", help="fleet-setup: the threads' names")
    ap.add_argument("--max-steps", type=int, default=0, help="fleet-worker: 0 for all")
    return ap


def main(operations: dict[str, Callable[[argparse.Namespace], Any]]) -> None:
    args = parser(operations).parse_args()
    EXTERNAL["on"] = args.external
    EXTERNAL["python"] = args.agent_python
    emit(operations[args.operation](args))
