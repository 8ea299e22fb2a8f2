"""Damaged stores and settings, round two (docs/reliability.md, "Hostile agents" rows 13–22,
and "Repairing damaged state"), each driven through the real CLI in subprocesses, on a real
PostgreSQL server where the store matters.

A node lost in the middle of a chain (a disk fault, a partial restore) must stop `cas gc`,
or the steps behind the gap are collected and restoring the node no longer repairs the
thread. State files are read with a size bound and their damage is reported by the command
that needs them and by `cas verify`. Numbers in settings are finite. A PostgreSQL schema row
that says an older version than the tables are is refused with a clear line. `uwf ui` parses
the `Host` header strictly. A `location` that is not a directory says what it is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import EXAMPLES, Result, take_snapshot

REPAIR = 'docs/reliability.md, "Repairing damaged state"'
LOOP = {
    "name": "loop",
    "description": "One role that goes round until it approves.",
    "roles": {
        "writer": {
            "description": "writes",
            "goal": "Write.",
            "capabilities": [],
            "procedure": "Write.",
            "output": "notes",
            "meta": {
                "type": "object",
                "properties": {
                    "status": {"type": "string", "enum": ["again", "approved"]},
                    "notes": {"type": "string"},
                },
                "required": ["status"],
            },
        }
    },
    "graph": {
        "$START": {"_": {"role": "writer", "prompt": "Start."}},
        "writer": {
            "again": {"role": "writer", "prompt": "Again, after these notes: {{notes}}"},
            "approved": {"role": "$END", "prompt": "Done."},
        },
    },
}
AGAIN = "---\nstatus: again\nnotes: more\n---\nWritten."


def ok(cli_proc: Any, *args: str, **kw: Any) -> Any:
    r: Result = cli_proc(*args, **kw)
    assert r.code == 0, (args, r.out, r.err)
    return r.json() if r.out.startswith(("{", "[")) else r.out


def loop_thread(cli_proc: Any, tmp_path: Path, steps: int) -> str:
    """A thread of the one-role loop workflow with ``steps`` steps."""
    path = tmp_path / "loop.yaml"
    path.write_text(yaml.safe_dump(LOOP))
    ok(cli_proc, "workflow", "put", str(path))
    thread = str(ok(cli_proc, "thread", "start", "loop", "-p", "write")["thread"])
    scenario = tmp_path / "again.yaml"
    scenario.write_text(yaml.safe_dump({"roles": {"writer": [AGAIN] * steps}}))
    agent = f"uwf-mock --scenario {scenario}"
    r = cli_proc("thread", "step", thread, "--agent", agent, "--count", str(steps))
    assert r.code == 0, r.err
    return thread


def chain_of(cli_proc: Any, thread: str) -> list[str]:
    """The thread's steps, head first (through ``prev``)."""
    out = [ok(cli_proc, "thread", "show", thread)["head"]]
    while True:
        payload = ok(cli_proc, "cas", "get", out[-1])["payload"]
        if not payload.get("prev"):
            return out
        out.append(payload["prev"])


class Nodes:
    """Take a node out of the store this test's uwf uses and put it back, as a disk fault
    and a restore from a backup would."""

    def __init__(self, kind: str, root: Path) -> None:
        self.kind, self.root = kind, root

    def count(self) -> int:
        if self.kind == "fs":
            return sum(1 for p in (self.root / "cas" / "objects").rglob("*") if p.is_file())
        with self._connect() as conn:
            row = conn.execute("SELECT count(*) FROM uwf_nodes").fetchone()
            return int(row[0])

    def lose(self, h: str) -> Any:
        if self.kind == "fs":
            path = self.root / "cas" / "objects" / h[:2] / h
            data = path.read_bytes()
            path.unlink()
            return data
        with self._connect() as conn:
            row = conn.execute("SELECT * FROM uwf_nodes WHERE hash = %s", (h,)).fetchone()
            conn.execute("DELETE FROM uwf_nodes WHERE hash = %s", (h,))
            return row

    def restore(self, h: str, saved: Any) -> None:
        if self.kind == "fs":
            path = self.root / "cas" / "objects" / h[:2] / h
            path.write_bytes(saved)
            return
        with self._connect() as conn:
            conn.execute("INSERT INTO uwf_nodes VALUES (%s, %s, %s, %s, %s)", saved)

    @staticmethod
    def _connect() -> Any:
        import psycopg

        return psycopg.connect(os.environ["UWF_STORE"])


# -- 13: a node lost in the middle of a live chain stops gc ----------------------------------


def test_a_lost_middle_node_stops_gc_and_restoring_it_repairs_the_thread(
    any_store: str, cli_proc: Any, root: Path, tmp_path: Path
) -> None:
    thread = loop_thread(cli_proc, tmp_path, 6)
    chain = chain_of(cli_proc, thread)
    assert len(chain) == 6
    lost, referrer = chain[3], chain[2]
    nodes = Nodes(any_store, root)
    saved = nodes.lose(lost)
    report = cli_proc("cas", "verify").json()
    assert report["ok"] is False
    assert {"hash": referrer, "problem": f"it refers to missing node {lost}"} in report["damaged"]
    before, files = nodes.count(), take_snapshot(root / "cas")
    for args in (["cas", "gc", "--grace", "0"], ["cas", "gc", "--grace", "0", "--dry-run"]):
        r = cli_proc(*args)
        assert r.code == 1 and r.out == "", r
        assert r.err == (
            "error: cas gc stopped, nothing was deleted: a chain is broken: "
            f"thread {thread}: node {lost} is missing (node {referrer} refers to it); "
            "the nodes behind a gap would be collected and the chain could never be "
            "repaired: restore the missing nodes from a backup and run cas gc again (uwf cas "
            f"verify lists them; {REPAIR})\n"
        )
    assert nodes.count() == before and take_snapshot(root / "cas") == files
    nodes.restore(lost, saved)  # the backup
    assert ok(cli_proc, "cas", "verify")["ok"] is True
    assert ok(cli_proc, "cas", "gc", "--grace", "0")["collected"] == 0
    assert chain_of(cli_proc, thread) == chain
    shown = ok(cli_proc, "thread", "show", thread)
    assert (shown["head"], shown["steps"]) == (chain[0], 6)
