"""Apache Burr side of the benchmark: the planner -> developer -> reviewer loop on its
SQLitePersister.

    <peer-venv>/bin/python burr_bench.py <operation> --db FILE [--thread ID] [...]

One action per process, like ``uwf thread step``: the application is built with
``initialize_from(persister, resume_at_next_action=True)`` (it loads the thread's latest
state and position), runs ``app.step()`` once (which persists the new state) and exits.
See ``common.py`` for the workload.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from typing import Any

from common import THREADS, build_plan, copy_db, db_usage, main, window_bytes

TABLE = "burr_state"


def actions() -> dict[str, Any]:
    from burr.core import State, action

    @action(reads=[], writes=["last", "status"])
    def planner(state: State) -> State:
        return state.update(last="no-op plan", status="_")

    @action(reads=[], writes=["last", "status"])
    def developer(state: State) -> State:
        return state.update(last="no-op change", status="_")

    @action(reads=[], writes=["last", "status"])
    def reviewer(state: State) -> State:
        return state.update(last="again", status="rejected")

    return {"planner": planner, "developer": developer, "reviewer": reviewer}


def persister(db: str, fast: bool = False) -> tuple[Any, sqlite3.Connection]:
    from burr.core.persistence import SQLitePersister

    conn = sqlite3.connect(db)
    if fast:  # building only: the file's content and size do not depend on it
        conn.execute("PRAGMA synchronous=OFF")
    p = SQLitePersister(db, table_name=TABLE, connection=conn)
    p.initialize()
    return p, conn


def application(p: Any, app_id: str, partition_key: str | None = None, **fork: Any) -> Any:
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
            default_state={"task": f"benchmark task {app_id}", "last": "", "status": "_"},
            default_entrypoint="planner",
            **fork,
        )
        .with_state_persister(p)
        .with_identifiers(app_id=app_id, partition_key=partition_key)
        .build()
    )


def op_build(args: argparse.Namespace) -> Any:
    p, conn = persister(args.db, fast=True)
    t0 = time.perf_counter()
    sizes: dict[int, dict[str, int]] = {}
    for thread, steps, samples in build_plan(args.small, args.mid, args.large, args.window):
        app = application(p, thread)
        for k in range(1, steps + 1):
            app.step()
            if k in samples:
                sizes[k] = db_usage(conn, args.db)
        assert p.load("", thread)["sequence_id"] == steps - 1
    return {
        "seconds": time.perf_counter() - t0,
        "bytes": window_bytes(sizes, args.small, args.large, args.window),
        "threads": list(THREADS),
    }


def op_build_list(args: argparse.Namespace) -> Any:
    p, conn = persister(args.db, fast=True)
    t0 = time.perf_counter()
    for i in range(1, args.count + 1):
        application(p, f"t{i:06d}").step()
        if i == args.copy_at and args.copy_db:
            copy_db(conn, args.copy_db)
    return {"seconds": time.perf_counter() - t0, "threads": args.count}


def op_step(args: argparse.Namespace) -> Any:
    p, _conn = persister(args.db)
    action, _result, state = application(p, args.thread).step()
    return {"action": action.name, "steps": state["__SEQUENCE_ID"] + 1}


def op_show(args: argparse.Namespace) -> Any:
    p, _conn = persister(args.db)
    loaded = p.load("", args.thread)
    return {"steps": loaded["sequence_id"] + 1, "position": loaded["position"]}


def op_history(args: argparse.Namespace) -> Any:
    """Burr's persister has no history call; raw SQL over its table, each state decoded."""
    from burr.core import State

    p, conn = persister(args.db)
    rows = conn.execute(
        f"SELECT sequence_id, position, status, state, created_at FROM {TABLE} "
        "WHERE partition_key = ? AND app_id = ? ORDER BY sequence_id",
        (p.PARTITION_KEY_DEFAULT, args.thread),
    ).fetchall()
    states = [(seq, pos, State.deserialize(json.loads(blob))) for seq, pos, _s, blob, _c in rows]
    return {"rows": len(states)}


def op_fork(args: argparse.Namespace) -> Any:
    """Burr's documented fork: a new application initialised from step ``--at`` of the thread
    (``fork_from_sequence_id``; sequence ids start at 0). It persists nothing until the new
    application takes its first step."""
    p, conn = persister(args.db)
    before = db_usage(conn, args.db) if args.bytes else None
    new_id = f"fork-{time.time_ns()}"
    app = application(p, new_id, fork_from_app_id=args.thread, fork_from_sequence_id=args.at - 1)
    out: dict[str, Any] = {"app": new_id, "sequence": app.state["__SEQUENCE_ID"]}
    if before is not None:
        after = db_usage(conn, args.db)
        out["bytes"] = after["apparent"] - before["apparent"]
        out["blocks"] = after["blocks"] - before["blocks"]
    return out


def op_list(args: argparse.Namespace) -> Any:
    p, _conn = persister(args.db)
    return {"count": len(p.list_app_ids(None))}


if __name__ == "__main__":
    main(
        {
            "build": op_build,
            "build-list": op_build_list,
            "step": op_step,
            "show": op_show,
            "history": op_history,
            "fork": op_fork,
            "list": op_list,
        }
    )
