"""LangGraph on PostgreSQL: the same loop on ``PostgresSaver`` (langgraph-checkpoint-postgres).

    <peer-venv>/bin/python langgraph_pg.py <operation> --db postgresql://… [--thread small]

Operations: ``build`` (the ``small`` thread of ``--small`` steps, then ``--count`` one-step
threads into ``--copy-db``, another database), ``step``, ``show``, ``list``; as in
``langgraph_bench.py``, one node per process.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from common import main
from langgraph_bench import compile_graph, config, start_input


def open_app(url: str) -> tuple[Any, Any]:
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import Connection
    from psycopg.rows import dict_row

    conn = Connection.connect(url, autocommit=True, prepare_threshold=0, row_factory=dict_row)
    saver = PostgresSaver(conn)
    return compile_graph(saver), saver


def op_build(args: argparse.Namespace) -> Any:
    t0 = time.perf_counter()
    app, saver = open_app(args.db)
    saver.setup()
    for k in range(1, args.small + 1):
        app.invoke(start_input("small") if k == 1 else None, config("small"))
    listing, list_saver = open_app(args.copy_db)
    list_saver.setup()
    for i in range(1, args.count + 1):
        listing.invoke(start_input(f"t{i:06d}"), config(f"t{i:06d}"))
    return {"seconds": time.perf_counter() - t0}


def op_step(args: argparse.Namespace) -> Any:
    app, _saver = open_app(args.db)
    app.invoke(None, config(args.thread))
    return {"steps": app.get_state(config(args.thread)).metadata["step"]}


def op_show(args: argparse.Namespace) -> Any:
    app, _saver = open_app(args.db)
    state = app.get_state(config(args.thread))
    return {"steps": state.metadata["step"], "next": list(state.next)}


def op_list(args: argparse.Namespace) -> Any:
    _app, saver = open_app(args.db)
    latest: dict[str, Any] = {}
    for item in saver.list(None):
        latest.setdefault(item.config["configurable"]["thread_id"], item.config)
    return {"count": len(latest)}


if __name__ == "__main__":
    main({"build": op_build, "step": op_step, "show": op_show, "list": op_list})
