"""Apache Burr side of the benchmark: the loop on its SQLite or PostgreSQL persister.

    benchmarks/.venv-burr/bin/python burr_bench.py <operation> --db FILE-or-URL [--thread ID] [...]

Used as Burr's "State Persistence" guide shows it: the persister from ``from_values``
(``SQLitePersister``, or ``PostgreSQLPersister`` from ``burr.integrations.persisters
.b_psycopg2``), ``initialize()`` once when the store is built; an application built with
``initialize_from(persister, resume_at_next_action=True, …)`` and ``with_state_persister``,
so that ``app.step()`` loads the thread's latest state and position, runs one action and
saves the new state; reads through ``persister.load`` and ``list_app_ids`` and no
application; a fork is ``initialize_from(fork_from_app_id=…, fork_from_sequence_id=…)``
(Burr persists nothing for it until the fork's first step). Burr's persister has no call
for a thread's history: one query over its table, each state decoded. See ``common.py``.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from typing import Any
from urllib.parse import urlsplit

from common import (
    THREADS,
    Windows,
    batches,
    copy_sqlite,
    fleet_loop,
    fleet_threads,
    is_url,
    main,
    produce,
    setup_claims,
    state_summary,
    task_of,
)

TABLE = "burr_state"


def partition(db: str) -> str | None:
    """Burr's PostgreSQL table needs a partition key; SQLite's takes None (its default)."""
    return "" if is_url(db) else None


def actions() -> dict[str, Any]:
    from burr.core import State, action

    fields = ["step", "role", "output", "content", "status"]

    def make(role: str) -> Any:
        @action(reads=["task", "step", "output"], writes=fields)
        def run(state: State) -> State:
            return state.update(**produce(state["task"], role, state["step"] + 1, state["output"]))

        return run

    return {role: make(role) for role in ("planner", "developer", "reviewer")}


def persister(db: str, fast: bool = False) -> Any:
    """The persister, as the guide opens it (``fast``: building only, SQLite's fsync off)."""
    if is_url(db):
        from burr.integrations.persisters.b_psycopg2 import PostgreSQLPersister

        u = urlsplit(db)
        return PostgreSQLPersister.from_values(
            db_name=u.path.lstrip("/"),
            user=u.username or "",
            password=u.password or "",
            host=u.hostname or "",
            port=u.port or 5432,
            table_name=TABLE,
        )
    from burr.core.persistence import SQLitePersister

    if fast:
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA synchronous=OFF")
        return SQLitePersister(db, table_name=TABLE, connection=conn)
    return SQLitePersister.from_values(db, table_name=TABLE)


def start_state(app_id: str) -> dict[str, Any]:
    return {
        "task": task_of(app_id),
        "step": 0,
        "role": "",
        "output": {},
        "content": "",
        "status": "_",
    }


def application(p: Any, db: str, app_id: str, **fork: Any) -> Any:
    from burr.core import ApplicationBuilder, when

    return (
        ApplicationBuilder()
        .with_actions(**actions())
        .with_transitions(
            ("planner", "developer"),
            ("developer", "reviewer"),
            ("reviewer", "developer", when(status="rejected")),
        )
        .initialize_from(
            p,
            resume_at_next_action=True,
            default_state=start_state(fork.get("fork_from_app_id", app_id)),
            default_entrypoint="planner",
            **fork,
        )
        .with_state_persister(p)
        .with_identifiers(app_id=app_id, partition_key=partition(db))
        .build()
    )


def step_app(app: Any) -> dict[str, Any]:
    _action, _result, state = app.step()
    return state.get_all()  # type: ignore[no-any-return]


# -- operations ---------------------------------------------------------------------------------


def op_import(args: argparse.Namespace) -> Any:
    import burr.core

    if is_url(args.db):
        import burr.integrations.persisters.b_psycopg2
    else:
        import burr.core.persistence  # noqa: F401
    return {}


def op_build(args: argparse.Namespace) -> Any:
    p = persister(args.db, fast=True)
    p.initialize()
    t0 = time.perf_counter()
    windows = Windows(args.db, args.small, args.large, args.window)
    for thread, steps in zip(THREADS, (args.small, args.mid, args.large), strict=True):
        app = application(p, args.db, thread)
        for k in range(steps):
            app.step()
            windows.after(thread, k + 1)
        if steps:
            assert p.load(partition(args.db), thread)["sequence_id"] == steps - 1
    return {
        "seconds": time.perf_counter() - t0,
        "checkpoint": str(args.at - 1),
        "bytes": windows.result(),
    }


def op_build_list(args: argparse.Namespace) -> Any:
    p = persister(args.db, fast=True)
    p.initialize()
    t0 = time.perf_counter()
    for i in range(1, args.count + 1):
        application(p, args.db, f"t{i:06d}").step()
        if i == args.copy_at and args.copy_db and not is_url(args.db):
            p.connection.commit()
            copy_sqlite(args.db, args.copy_db)
    return {"seconds": time.perf_counter() - t0, "threads": args.count}


def op_step(args: argparse.Namespace) -> Any:
    return state_summary(step_app(application(persister(args.db), args.db, args.thread)))


def op_show(args: argparse.Namespace) -> Any:
    loaded = persister(args.db).load(partition(args.db), args.thread)
    return state_summary(loaded["state"].get_all())


def op_history(args: argparse.Namespace) -> Any:
    """Burr's persister has no history call: its table, one query, each state decoded."""
    from burr.core import State

    p = persister(args.db)
    rows = p.connection.execute(
        f"SELECT sequence_id, state FROM {TABLE} WHERE partition_key = ? AND app_id = ?"
        " ORDER BY sequence_id",
        (p.PARTITION_KEY_DEFAULT, args.thread),
    ).fetchall()
    steps = []
    for _seq, blob in rows:
        values = State.deserialize(json.loads(blob)).get_all()
        steps.append({"step": values["step"], "role": values["role"], "output": values["output"]})
    return {"steps": steps}


def op_find_fork(args: argparse.Namespace) -> Any:
    """Burr's documented fork: a new application initialised from step ``--at`` of the thread
    (``fork_from_sequence_id``: Burr numbers steps, from 0), which finds it by its number."""
    p = persister(args.db)
    new_id = f"fork-{time.time_ns()}"
    app = application(
        p, args.db, new_id, fork_from_app_id=args.thread, fork_from_sequence_id=args.at - 1
    )
    return {"fork": new_id, **state_summary(app.state.get_all())}


def op_fork(args: argparse.Namespace) -> Any:
    """From a known id: for Burr, the sequence id is the step number (``--checkpoint``)."""
    args.at = int(args.checkpoint) + 1
    return op_find_fork(args)


def op_list(args: argparse.Namespace) -> Any:
    return {"count": len(persister(args.db).list_app_ids(partition(args.db)))}


def op_warm(args: argparse.Namespace) -> Any:
    """Steps in one warm process: ``--batches`` batches of ``--count`` steps, the mean ms of
    each (the application built once, its first step untimed)."""
    p = persister(args.db)
    p.initialize()
    thread = f"warm-{time.time_ns()}"
    app = application(p, args.db, thread)
    app.step()
    timed = batches(lambda: step_app(app), args.batches, args.count)
    last = persister(args.db).load(partition(args.db), thread)["state"].get_all()  # checked
    return {**timed, "task": task_of(thread), **state_summary(last)}


def op_fleet_setup(args: argparse.Namespace) -> Any:
    """A fleet's database: the persister's table and the claims of ``--count`` threads of
    ``--steps`` steps each."""
    persister(args.db).initialize()
    setup_claims(args.db, fleet_threads(args.prefix, args.count), args.steps)
    return {"threads": args.count}


def op_fleet_worker(args: argparse.Namespace) -> Any:
    """One fleet worker (``common.fleet_loop``): each claimed thread's application built
    from the persister (``initialize_from``: its latest state, whoever stepped it last),
    then one ``step()``."""
    p = persister(args.db)
    application(p, args.db, "warm-up")  # Burr's imports and its application code, untimed

    def step(thread: str, done: int) -> None:
        application(p, args.db, thread).step()

    return fleet_loop(step, args.db, args.max_steps)


def op_verify_threads(args: argparse.Namespace) -> Any:
    """The latest state of each of ``--threads`` (a fleet's), through the persister."""
    p = persister(args.db)
    return {
        t: state_summary(p.load(partition(args.db), t)["state"].get_all())
        for t in args.threads.split(",")
    }


if __name__ == "__main__":
    main(
        {
            "import": op_import,
            "build": op_build,
            "build-list": op_build_list,
            "step": op_step,
            "show": op_show,
            "history": op_history,
            "find-fork": op_find_fork,
            "fork": op_fork,
            "list": op_list,
            "warm": op_warm,
            "fleet-setup": op_fleet_setup,
            "fleet-worker": op_fleet_worker,
            "verify-threads": op_verify_threads,
        }
    )
