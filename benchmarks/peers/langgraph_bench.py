"""LangGraph side of the benchmark: the planner -> developer -> reviewer loop on SqliteSaver.

    <peer-venv>/bin/python langgraph_bench.py <operation> --db FILE [--thread ID] [...]

One node per process, like ``uwf thread step``: the graph is compiled with
``interrupt_after`` every node, so ``invoke(None, config)`` resumes the thread from its last
checkpoint, runs exactly one node, saves and stops. See ``common.py`` for the workload.
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from typing import Any, TypedDict

from common import THREADS, build_plan, copy_db, db_usage, main, window_bytes

ROLES = ["planner", "developer", "reviewer"]


class LoopState(TypedDict):
    task: str
    last: str
    status: str


def planner(state: LoopState) -> dict[str, str]:
    return {"last": "no-op plan", "status": "_"}


def developer(state: LoopState) -> dict[str, str]:
    return {"last": "no-op change", "status": "_"}


def reviewer(state: LoopState) -> dict[str, str]:
    return {"last": "again", "status": "rejected"}


def route(state: LoopState) -> str:
    from langgraph.graph import END

    return "developer" if state["status"] == "rejected" else END


def open_app(db: str, fast: bool = False) -> tuple[Any, Any, sqlite3.Connection]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(db, check_same_thread=False)
    if fast:  # building only: the file's content and size do not depend on it
        conn.execute("PRAGMA synchronous=OFF")
    saver = SqliteSaver(conn)
    return compile_graph(saver), saver, conn


def compile_graph(saver: Any) -> Any:
    """The loop on a checkpointer, stopping after every node (one node per process)."""
    from langgraph.graph import END, START, StateGraph

    graph = StateGraph(LoopState)
    graph.add_node("planner", planner)
    graph.add_node("developer", developer)
    graph.add_node("reviewer", reviewer)
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "developer")
    graph.add_edge("developer", "reviewer")
    graph.add_conditional_edges("reviewer", route, ["developer", END])
    return graph.compile(checkpointer=saver, interrupt_after=ROLES)


def config(thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


def start_input(thread: str) -> LoopState:
    return {"task": f"benchmark task {thread}", "last": "", "status": "_"}


def op_build(args: argparse.Namespace) -> Any:
    app, _saver, conn = open_app(args.db, fast=True)
    t0 = time.perf_counter()
    sizes: dict[int, dict[str, int]] = {}
    counts = {"small": args.small, "mid": args.mid, "large": args.large}
    for thread, steps, samples in build_plan(args.small, args.mid, args.large, args.window):
        cfg = config(thread)
        for k in range(1, steps + 1):
            app.invoke(start_input(thread) if k == 1 else None, cfg)
            if k in samples:
                sizes[k] = db_usage(conn, args.db)
        assert app.get_state(cfg).metadata["step"] == counts[thread]
    return {
        "seconds": time.perf_counter() - t0,
        "bytes": window_bytes(sizes, args.small, args.large, args.window),
        "threads": list(THREADS),
    }


def op_build_list(args: argparse.Namespace) -> Any:
    app, _saver, conn = open_app(args.db, fast=True)
    t0 = time.perf_counter()
    for i in range(1, args.count + 1):
        thread = f"t{i:06d}"
        app.invoke(start_input(thread), config(thread))
        if i == args.copy_at and args.copy_db:
            copy_db(conn, args.copy_db)
    return {"seconds": time.perf_counter() - t0, "threads": args.count}


def op_step(args: argparse.Namespace) -> Any:
    app, _saver, _conn = open_app(args.db)
    app.invoke(None, config(args.thread))
    return {"steps": app.get_state(config(args.thread)).metadata["step"]}


def op_show(args: argparse.Namespace) -> Any:
    app, _saver, _conn = open_app(args.db)
    state = app.get_state(config(args.thread))
    return {"steps": state.metadata["step"], "next": list(state.next), "values": state.values}


def op_history(args: argparse.Namespace) -> Any:
    app, _saver, _conn = open_app(args.db)
    return {"checkpoints": len(list(app.get_state_history(config(args.thread))))}


def op_fork(args: argparse.Namespace) -> Any:
    """Time travel as LangGraph documents it: find the checkpoint after step ``--at`` (by its
    metadata, the cheapest lookup the API offers), then ``update_state`` on it, which writes a
    new checkpoint (a copy of the whole state) branching from there. ``--bytes`` reports the
    payload bytes of the rows the fork added (file growth is hidden by SQLite's page slack)."""
    app, _saver, conn = open_app(args.db)
    found = next(
        iter(
            app.get_state_history(
                config(args.thread), filter={"step": args.at, "source": "loop"}, limit=1
            )
        )
    )
    forked = app.update_state(found.config, {"last": "forked"})
    out: dict[str, Any] = {"step": found.metadata["step"], "fork": forked["configurable"]}
    if args.bytes:
        key = (args.thread, forked["configurable"]["checkpoint_id"])
        where = "WHERE thread_id = ? AND checkpoint_id = ?"
        size = "COALESCE(SUM(length(checkpoint) + length(metadata)), 0)"
        (rows,) = conn.execute(f"SELECT {size} FROM checkpoints {where}", key).fetchone()
        (writes,) = conn.execute(
            f"SELECT COALESCE(SUM(length(value)), 0) FROM writes {where}", key
        ).fetchone()
        out["bytes"] = rows + writes
    return out


def op_list(args: argparse.Namespace) -> Any:
    """The threads with their latest checkpoint: the saver has no thread index, so this is
    ``list(None)`` (every checkpoint, newest first) keeping the first per thread."""
    _app, saver, _conn = open_app(args.db)
    latest: dict[str, Any] = {}
    for item in saver.list(None):
        latest.setdefault(item.config["configurable"]["thread_id"], item.config)
    return {"count": len(latest)}


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
