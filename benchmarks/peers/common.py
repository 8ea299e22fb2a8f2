"""What the two peer benchmarks share (standard library only: they run in the peer venv).

Each peer script is a small CLI, ``<script> <operation> --db FILE [...]``, run as a fresh
process by ``benchmarks/compare.py`` exactly like ``uwf`` is, so its figures include the
interpreter start and the imports a cold process pays. Operations print one JSON line.

The workload is the same planner -> developer -> reviewer loop as uwf's (the reviewer always
rejects, so developer and reviewer alternate for ever) with no-op nodes: each node overwrites
two small state fields (``last``, ``status``) and appends nothing, so the state does not grow
with the thread (both peers store the whole state per step and would grow quadratically if
it accumulated).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from collections.abc import Callable
from typing import Any

THREADS = ("small", "mid", "large")


def emit(value: Any) -> None:
    sys.stdout.write(json.dumps(value) + "\n")
    sys.stdout.flush()


def db_usage(conn: sqlite3.Connection, path: str) -> dict[str, int]:
    """The database's durable size: WAL folded in and truncated first, then the files' sizes
    (apparent and blocks allocated) summed with any -wal/-journal left."""
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    apparent = blocks = 0
    for suffix in ("", "-wal", "-journal"):
        try:
            st = os.stat(path + suffix)
        except FileNotFoundError:
            continue
        apparent += st.st_size
        blocks += st.st_blocks * 512
    return {"apparent": apparent, "blocks": blocks}


def per_step(a: dict[str, int], b: dict[str, int], steps: int) -> dict[str, float]:
    return {k: (b[k] - a[k]) / steps for k in ("apparent", "blocks")}


def build_plan(small: int, mid: int, large: int, window: int) -> list[tuple[str, int, set[int]]]:
    """Threads to build, with the step counts after which the large one's size is sampled:
    an early window (steps ``small``..``small+window``) and a late one (``large-window``..)."""
    samples = {small, small + window, large - window, large}
    return [("small", small, set()), ("mid", mid, set()), ("large", large, samples)]


def window_bytes(sizes: dict[int, dict[str, int]], small: int, large: int, window: int) -> Any:
    return {
        "early": per_step(sizes[small], sizes[small + window], window),
        "late": per_step(sizes[large - window], sizes[large], window),
    }


def parser(operations: dict[str, Callable[[argparse.Namespace], Any]]) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser()
    ap.add_argument("operation", choices=sorted(operations))
    ap.add_argument("--db", required=True)
    ap.add_argument("--thread", default="small")
    ap.add_argument("--small", type=int, default=10)
    ap.add_argument("--mid", type=int, default=1000)
    ap.add_argument("--large", type=int, default=10000)
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--count", type=int, default=10000)
    ap.add_argument("--copy-at", type=int, default=100)
    ap.add_argument("--copy-db", default="")
    ap.add_argument("--at", type=int, default=5000)
    ap.add_argument("--bytes", action="store_true", help="fork: also report the bytes it added")
    return ap


def main(operations: dict[str, Callable[[argparse.Namespace], Any]]) -> None:
    args = parser(operations).parse_args()
    emit(operations[args.operation](args))


def copy_db(conn: sqlite3.Connection, dest: str) -> None:
    """A consistent copy of the database (SQLite's online backup)."""
    target = sqlite3.connect(dest)
    try:
        conn.backup(target)
    finally:
        target.close()
