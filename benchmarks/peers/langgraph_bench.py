"""LangGraph side of the benchmark: the loop on its SQLite or PostgreSQL checkpointer.

    benchmarks/.venv-langgraph/bin/python langgraph_bench.py <operation> --db FILE-or-URL [...]

Used as langgraph-checkpoint's README and langgraph-checkpoint-postgres's README show it:
the saver from ``SqliteSaver.from_conn_string`` / ``PostgresSaver.from_conn_string``
(``.setup()`` once, when the thread store is built), reads through the saver itself
(``get_tuple`` for the latest checkpoint, ``list(config)`` for a thread's checkpoints, with a
metadata ``filter`` to find one step) and no compiled graph; a step compiles the graph with
``interrupt_after`` every node, so that ``invoke(None, config)`` resumes the thread from its
last checkpoint, runs exactly one node, saves and stops. A fork is ``update_state`` on a past
checkpoint (LangGraph's time travel: a new checkpoint branching from it). See ``common.py``
for the workload.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, TypedDict

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

ROLES = ["planner", "developer", "reviewer"]


class LoopState(TypedDict):
    task: str
    step: int
    role: str
    output: dict[str, Any]
    content: str
    status: str


def node(role: str) -> Callable[[LoopState], dict[str, Any]]:
    def run(state: LoopState) -> dict[str, Any]:
        return produce(state["task"], role, state["step"] + 1, state["output"])

    run.__name__ = role
    return run


def route(state: LoopState) -> str:
    from langgraph.graph import END

    return "developer" if state["status"] == "rejected" else END


@contextlib.contextmanager
def saver(db: str, fast: bool = False) -> Iterator[Any]:
    """The checkpointer, as its README opens it. ``fast`` (building only: the file's content
    and size do not depend on it) turns SQLite's fsync off."""
    if fast and not is_url(db):
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(db, check_same_thread=False)
        conn.execute("PRAGMA synchronous=OFF")
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
        return
    if is_url(db):
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(db) as pg:
            yield pg
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver

        with SqliteSaver.from_conn_string(db) as lite:
            yield lite


def compile_graph(checkpointer: Any) -> Any:
    """The loop on a checkpointer, stopping after every node (one node per invoke)."""
    from langgraph.graph import START, StateGraph

    graph = StateGraph(LoopState)
    for role in ROLES:
        graph.add_node(role, node(role))
    graph.add_edge(START, "planner")
    graph.add_edge("planner", "developer")
    graph.add_edge("developer", "reviewer")
    graph.add_conditional_edges("reviewer", route)
    return graph.compile(checkpointer=checkpointer, interrupt_after=ROLES)


def config(thread: str, checkpoint: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"thread_id": thread}
    if checkpoint:
        out |= {"checkpoint_ns": "", "checkpoint_id": checkpoint}
    return {"configurable": out}


def start_input(thread: str) -> LoopState:
    return {
        "task": task_of(thread),
        "step": 0,
        "role": "",
        "output": {},
        "content": "",
        "status": "_",
    }


def step_thread(app: Any, thread: str, first: bool = False) -> dict[str, Any]:
    values: dict[str, Any] = app.invoke(start_input(thread) if first else None, config(thread))
    return values


def checkpoint_at(cp: Any, thread: str, step: int) -> Any:
    """The checkpoint after step ``step``, found by its metadata (the saver's own filter)."""
    found = list(cp.list(config(thread), filter={"step": step, "source": "loop"}, limit=1))
    if not found:
        raise SystemExit(f"no checkpoint at step {step} of {thread}")
    return found[0]


# -- operations ---------------------------------------------------------------------------------


def op_import(args: argparse.Namespace) -> Any:
    import langgraph.graph

    if is_url(args.db):
        import langgraph.checkpoint.postgres
    else:
        import langgraph.checkpoint.sqlite  # noqa: F401
    return {}


def op_build(args: argparse.Namespace) -> Any:
    t0 = time.perf_counter()
    with saver(args.db, fast=True) as cp:
        cp.setup()
        app = compile_graph(cp)
        sizes = {"small": args.small, "mid": args.mid, "large": args.large}
        windows = Windows(args.db, args.small, args.large, args.window)
        for thread in THREADS:
            for k in range(sizes[thread]):
                step_thread(app, thread, first=k == 0)
                windows.after(thread, k + 1)
        known = None
        if 0 < args.at <= args.large:
            known = checkpoint_at(cp, "large", args.at).config["configurable"]["checkpoint_id"]
    return {"seconds": time.perf_counter() - t0, "checkpoint": known, "bytes": windows.result()}


def op_build_list(args: argparse.Namespace) -> Any:
    t0 = time.perf_counter()
    with saver(args.db, fast=True) as cp:
        cp.setup()
        app = compile_graph(cp)
        for i in range(1, args.count + 1):
            step_thread(app, f"t{i:06d}", first=True)
            if i == args.copy_at and args.copy_db and not is_url(args.db):
                copy_sqlite(args.db, args.copy_db)
    return {"seconds": time.perf_counter() - t0, "threads": args.count}


def op_step(args: argparse.Namespace) -> Any:
    with saver(args.db) as cp:
        return state_summary(step_thread(compile_graph(cp), args.thread))


def op_show(args: argparse.Namespace) -> Any:
    with saver(args.db) as cp:
        found = cp.get_tuple(config(args.thread))
        return state_summary(found.checkpoint["channel_values"])


def op_history(args: argparse.Namespace) -> Any:
    """Every checkpoint of the thread (``list``), each deserialized; one entry per step."""
    with saver(args.db) as cp:
        seen: dict[int, dict[str, Any]] = {}
        for item in cp.list(config(args.thread)):
            values = item.checkpoint["channel_values"]
            step = values.get("step", 0)
            if step >= 1 and step not in seen:
                seen[step] = {"step": step, "role": values["role"], "output": values["output"]}
        return {"steps": [seen[k] for k in sorted(seen)]}


def _fork(cp: Any, thread: str, found_config: dict[str, Any]) -> dict[str, Any]:
    app = compile_graph(cp)
    forked = app.update_state(found_config, None)
    values = cp.get_tuple(forked).checkpoint["channel_values"]
    return {"fork": forked["configurable"]["checkpoint_id"], **state_summary(values)}


def op_find_fork(args: argparse.Namespace) -> Any:
    """Find the checkpoint after step ``--at`` by its metadata, then fork from it."""
    with saver(args.db) as cp:
        return _fork(cp, args.thread, checkpoint_at(cp, args.thread, args.at).config)


def op_fork(args: argparse.Namespace) -> Any:
    """Fork from a checkpoint whose id the caller knows (``--checkpoint``)."""
    with saver(args.db) as cp:
        return _fork(cp, args.thread, config(args.thread, args.checkpoint))


def op_fork_bytes(args: argparse.Namespace) -> Any:
    """The payload bytes of the rows a fork adds (file growth hides in SQLite's page slack)."""
    with saver(args.db) as cp:
        forked = _fork(cp, args.thread, checkpoint_at(cp, args.thread, args.at).config)
        key = (args.thread, forked["fork"])
        where = "WHERE thread_id = ? AND checkpoint_id = ?"
        size = "COALESCE(SUM(length(checkpoint) + length(metadata)), 0)"
        (rows,) = cp.conn.execute(f"SELECT {size} FROM checkpoints {where}", key).fetchone()
        (writes,) = cp.conn.execute(
            f"SELECT COALESCE(SUM(length(value)), 0) FROM writes {where}", key
        ).fetchone()
        return {"bytes": rows + writes}


def op_list(args: argparse.Namespace) -> Any:
    """The threads and their newest checkpoint. The saver has no thread index (``list(None)``
    would deserialize every checkpoint of every thread): one query over its table instead,
    the cheapest way there is."""
    sql = "SELECT thread_id, max(checkpoint_id) FROM checkpoints GROUP BY thread_id"
    with saver(args.db) as cp:
        rows = cp.conn.execute(sql).fetchall()
    return {"count": len(rows)}


def op_warm(args: argparse.Namespace) -> Any:
    """Steps in one warm process: ``--batches`` batches of ``--count`` steps, the mean ms of
    each (the graph compiled once, the thread started untimed)."""
    with saver(args.db) as cp:
        cp.setup()
        app = compile_graph(cp)
        thread = f"warm-{time.time_ns()}"
        step_thread(app, thread, first=True)
        timed = batches(lambda: step_thread(app, thread), args.batches, args.count)
        last = cp.get_tuple(config(thread)).checkpoint["channel_values"]  # read back: checked
        return {**timed, "task": task_of(thread), **state_summary(last)}


def op_fleet_setup(args: argparse.Namespace) -> Any:
    """A fleet's database: the saver's tables and the claims of ``--count`` threads of
    ``--steps`` steps each."""
    with saver(args.db) as cp:
        cp.setup()
    setup_claims(args.db, fleet_threads(args.prefix, args.count), args.steps)
    return {"threads": args.count}


def op_fleet_worker(args: argparse.Namespace) -> Any:
    """One fleet worker (``common.fleet_loop``): the graph compiled once on the saver, each
    claimed thread resumed from its last checkpoint by ``invoke``."""
    with saver(args.db) as cp:
        app = compile_graph(cp)

        def step(thread: str, done: int) -> None:
            step_thread(app, thread, first=done == 0)

        return fleet_loop(step, args.db, args.max_steps)


def op_verify_threads(args: argparse.Namespace) -> Any:
    """The latest state of each of ``--threads`` (a fleet's), through the saver."""
    with saver(args.db) as cp:
        return {
            t: state_summary(cp.get_tuple(config(t)).checkpoint["channel_values"])
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
            "fork-bytes": op_fork_bytes,
            "list": op_list,
            "warm": op_warm,
            "fleet-setup": op_fleet_setup,
            "fleet-worker": op_fleet_worker,
            "verify-threads": op_verify_threads,
        }
    )
