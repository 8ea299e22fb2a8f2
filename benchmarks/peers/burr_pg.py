"""Burr on PostgreSQL: the same loop on ``PostgreSQLPersister`` (psycopg2).

    <peer-venv>/bin/python burr_pg.py <operation> --db postgresql://… [--thread small]

Operations as in ``langgraph_pg.py``: ``build``, ``step``, ``show``, ``list``.
"""

from __future__ import annotations

import argparse
import time
from typing import Any
from urllib.parse import urlsplit

from burr_bench import TABLE
from burr_bench import application as _application
from common import main

PARTITION = ""  # Burr's Postgres table needs one (SQLite's takes NULL)


def application(p: Any, app_id: str) -> Any:
    return _application(p, app_id, partition_key=PARTITION)


def persister(url: str) -> Any:
    from burr.integrations.persisters.b_psycopg2 import PostgreSQLPersister

    u = urlsplit(url)
    return PostgreSQLPersister.from_values(
        db_name=u.path.lstrip("/"),
        user=u.username,
        password=u.password,
        host=u.hostname,
        port=u.port,
        table_name=TABLE,
    )


def op_build(args: argparse.Namespace) -> Any:
    t0 = time.perf_counter()
    p = persister(args.db)
    p.initialize()
    app = application(p, "small")
    for _ in range(args.small):
        app.step()
    listing = persister(args.copy_db)
    listing.initialize()
    for i in range(1, args.count + 1):
        application(listing, f"t{i:06d}").step()
    return {"seconds": time.perf_counter() - t0}


def op_step(args: argparse.Namespace) -> Any:
    action, _result, state = application(persister(args.db), args.thread).step()
    return {"action": action.name, "steps": state["__SEQUENCE_ID"] + 1}


def op_show(args: argparse.Namespace) -> Any:
    loaded = persister(args.db).load(PARTITION, args.thread)
    return {"steps": loaded["sequence_id"] + 1, "position": loaded["position"]}


def op_list(args: argparse.Namespace) -> Any:
    return {"count": len(persister(args.db).list_app_ids(PARTITION))}


if __name__ == "__main__":
    main({"build": op_build, "step": op_step, "show": op_show, "list": op_list})
