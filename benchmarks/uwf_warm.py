"""uwf's warm rows: steps in one process, through the Python API, the agent in process too.

    <uwf venv>/bin/python benchmarks/uwf_warm.py steps --store ROOT-or-URL --batches B --count C
    <uwf venv>/bin/python benchmarks/uwf_warm.py own --store URL --count C --stats ADMIN-URL

``steps``: a new thread of the loop, its first step untimed, then ``B`` batches of ``C``
steps, each ``engine.step.step`` with the benchmark's agent (``mock_agent.WorkloadAgent``) as
a Python agent run in this process (``uwf.testing.InProcessRunner``: the engine's own
in-process runner, docs/api.md) with the same backend instead of spawning it: what uwf costs
per step when nothing starts a process (the peers' warm rows do the same).
Prints ``{"ms": [mean ms per step of each batch], "cpu_ms": [the same in CPU time]}``.

``threads``: ``C`` new threads of the loop, tasks ``benchmark task PREFIX-<i>`` (i from 0000),
each ending after ``--rounds`` steps: a fleet's threads, started as ``uwf thread start
--max-rounds`` starts them (no process per thread). Prints ``{"threads": C}``.

``own`` (PostgreSQL): ``C`` steps as a fleet worker takes them (``engine.step.fleet.step_next``:
claim, plan, run, commit), timing each step and the agent within it, and counting the
statements the server ran for uwf's database (``pg_stat_statements``, read through
``ADMIN-URL``, another database) during each and during the agent: uwf's own work per step,
beyond its agent. Prints ``{"own_ms": [...], "own_statements": [...], "agent_statements": [...]}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mock_agent

from uwf.backend import open_backend
from uwf.backend.base import Backend
from uwf.engine.step import step
from uwf.engine.threads.lifecycle import start
from uwf.model.agentcall import AgentCall
from uwf.testing import InProcessRunner


def in_process(
    backend: Backend, around: Callable[[Callable[[], str]], str] | None = None
) -> InProcessRunner:
    """The engine's runner for the benchmark's agent as a Python agent in this process
    (``mock_agent.inprocess``), each call through ``around`` when given."""

    def agent(call: AgentCall, /) -> str:
        if around is None:
            return mock_agent.inprocess(call)
        return around(lambda: mock_agent.inprocess(call))

    return InProcessRunner(backend, agent)


def new_thread(backend: Backend) -> tuple[str, str]:
    """A new thread of the loop: (its id, its task)."""
    task = f"benchmark task warm-{time.time_ns()}"
    thread: str = start(backend, "solve-issue", task)["thread"]
    return thread, task


def op_steps(args: argparse.Namespace) -> Any:
    from uwf.engine.threads.lifecycle import show

    backend = open_backend(args.store)
    run = in_process(backend)
    thread, task = new_thread(backend)
    step(backend, thread, runner=run)
    out, cpu = [], []
    for _ in range(args.batches):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(args.count):
            result = step(backend, thread, runner=run)
        out.append((time.perf_counter() - t0) * 1000 / args.count)
        cpu.append((time.process_time() - c0) * 1000 / args.count)
    # what the last step stored, read back: checked by the benchmark against workload.py
    steps = show(backend, thread)["steps"]
    output = backend.nodes.require(backend.nodes.require(result.head).payload["output"]).payload
    return {
        "ms": out,
        "cpu_ms": cpu,
        "task": task,
        "steps": steps,
        "role": result.role,
        "output": output,
    }


def op_own(args: argparse.Namespace) -> Any:
    from pgserver import connect
    from uwf.engine.step.fleet import step_next

    backend = open_backend(args.store)
    database = args.store.rsplit("/", 1)[1].split("?", 1)[0]
    stats = connect(args.stats, autocommit=True)

    def statements() -> int:
        row = stats.execute(
            "SELECT coalesce(sum(s.calls), 0) FROM pg_stat_statements s"
            " JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = %s",
            (database,),
        ).fetchone()
        return int(row[0]) if row else 0

    agent_ms: list[float] = []
    agent_statements: list[int] = []

    def around(agent: Callable[[], str]) -> str:
        before = statements()
        t0 = time.perf_counter()
        h = agent()
        agent_ms.append((time.perf_counter() - t0) * 1000)
        agent_statements.append(statements() - before)
        return h

    run = in_process(backend, around)
    new_thread(backend)  # the only thread: step_next takes it
    step_next(backend, runner=run)  # connections opened, schema checked: untimed
    agent_ms.clear()
    agent_statements.clear()
    own_ms, own_statements = [], []
    for _ in range(args.count):
        before = statements()
        t0 = time.perf_counter()
        step_next(backend, runner=run)
        took = (time.perf_counter() - t0) * 1000
        total = statements() - before
        own_ms.append(took - agent_ms[-1])
        own_statements.append(total - agent_statements[-1])
    return {
        "own_ms": own_ms,
        "own_statements": own_statements,
        "agent_statements": agent_statements,
    }


def op_threads(args: argparse.Namespace) -> Any:
    backend = open_backend(args.store)
    for i in range(args.count):
        start(
            backend, "solve-issue", f"benchmark task {args.prefix}-{i:04d}", max_rounds=args.rounds
        )
    return {"threads": args.count}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("operation", choices=["steps", "own", "threads"])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--prefix", default="fleet")
    ap.add_argument("--store", required=True)
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--count", type=int, default=20)
    ap.add_argument("--stats", default="")
    args = ap.parse_args()
    os.environ.pop("UWF_ARTIFACTS_DIR", None)
    ops = {"steps": op_steps, "own": op_own, "threads": op_threads}
    result = ops[args.operation](args)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # pgserver
    main()
