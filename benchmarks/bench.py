"""The benchmark's frame: sizes, the peers' scripts, and the table of figures rows fill in.

A row is a key (``step@small``), a label, the section of docs/performance.md it belongs to
and one figure per tool that ran it. ``Bench.timed`` runs a row's jobs once unmeasured, checks
each tool's output (``checks``: the right step, the right answer — a wrong result stops the
benchmark), then times them interleaved; ``Bench.static`` records figures measured another way
(bytes, rates, warm runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
import uwf_bench
import workload
from harness import Fig, Job

HERE = Path(__file__).resolve().parent
TOOLS = ("uwf", "LangGraph", "Burr")
PEER_NAMES = ("LangGraph", "Burr")
PEER_SCRIPTS = {
    "LangGraph": HERE / "peers" / "langgraph_bench.py",
    "Burr": HERE / "peers" / "burr_bench.py",
}
# the packages the run's header names, of each side's `pip freeze` (recorded whole in the run)
KEY_PACKAGES = {
    "uwf": ("typer", "psycopg2-binary", "xxhash", "PyYAML"),
    "LangGraph": (
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-sqlite",
        "langgraph-checkpoint-postgres",
        "psycopg",
    ),
    "Burr": ("apache-burr", "psycopg2-binary"),
}

Check = Callable[[str], None]
Row = tuple[str, str, dict[str, Job], dict[str, Check] | None]


@dataclass
class Sizes:
    small: int  # steps of the short thread
    mid: int  # steps of the mid thread (full history)
    large: int  # steps of the long thread
    window: int  # real steps measured for the disk a step takes
    threads_small: int
    threads_large: int
    nodes_small: int
    nodes_large: int
    repeat: int
    warm_batches: int  # warm rows: batches of warm_count steps
    warm_count: int
    fleet_threads: int  # fleet rows: threads of fleet_steps steps each
    fleet_steps: int
    fleet_runs: int  # runs of each fleet size (median, spread)
    fleet_workers: tuple[int, ...]  # the fleet sizes
    statements: int  # steps whose PostgreSQL statements are counted

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Sizes:
        quick = args.quick
        large = args.steps or (1_000 if quick else 10_000)
        if large < 20:
            raise SystemExit("--steps must be at least 20")
        threads = args.threads or (1_000 if quick else 10_000)
        nodes = args.nodes_large or (20_000 if quick else 1_000_000)
        return cls(
            small=10,
            mid=max(2, large // 10),
            large=large,
            window=args.window or (20 if quick else 50),
            threads_small=min(100, threads),
            threads_large=threads,
            nodes_small=min(1_000, nodes),
            nodes_large=nodes,
            repeat=args.repeat or (3 if quick else 7),
            warm_batches=3 if quick else 7,
            warm_count=10 if quick else 20,
            # a fleet run is 1,200 steps, so that its window (from the last worker ready)
            # holds 1,000 or more (quick: 120); every side the same threads; one run of each
            # size and side by default
            fleet_threads=args.fleet_threads or (30 if quick else 120),
            fleet_steps=args.fleet_steps or (4 if quick else 10),
            fleet_runs=args.fleet_runs or 1,
            fleet_workers=tuple(
                int(w) for w in (getattr(args, "fleet_workers", "") or "1,2,4,8").split(",")
            ),
            statements=5 if quick else 10,
        )


def n(value: int) -> str:
    return f"{value:,}"


def task_of(name: str) -> str:
    return f"benchmark task {name}"


def peer_pythons(args: argparse.Namespace) -> dict[str, Path]:
    """``--peer NAME=PYTHON`` (repeatable): each peer's interpreter, in its own venv. Not
    resolved: a venv's python is a symlink to the base interpreter."""
    out: dict[str, Path] = {}
    for item in getattr(args, "peer", None) or []:
        name, sep, python = item.partition("=")
        if not sep or name not in PEER_NAMES or not python:
            raise SystemExit(f"--peer takes NAME=PYTHON with NAME one of {PEER_NAMES}: {item!r}")
        out[name] = Path(python).absolute()
    return out


def freeze(python: Path | str) -> list[str]:
    """``pip freeze`` of the environment of ``python``: the versions a run used."""
    proc = subprocess.run(
        [str(python), "-m", "pip", "freeze", "--all", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
    )
    lines = proc.stdout.splitlines() if proc.returncode == 0 else []
    return [line for line in lines if line and not line.startswith("#")]


def key_versions(tool: str, frozen: list[str]) -> dict[str, str]:
    """The versions of ``KEY_PACKAGES[tool]`` in a freeze (``name==version`` lines)."""
    found = {}
    for line in frozen:
        name, sep, version = line.partition("==")
        if sep:
            found[name.lower().replace("_", "-")] = version
    return {p: found[p.lower()] for p in KEY_PACKAGES[tool] if p.lower() in found}


class Peer:
    """One peer's script, run as fresh processes of the peer venv's python, on a SQLite file
    or a PostgreSQL database (``db``)."""

    known = ""  # the id of the long thread's middle step (a checkpoint id, a sequence id)

    def __init__(self, name: str, python: Path, work: Path, db: str, list_db: str) -> None:
        self.name = name
        self.python = python
        self.script = PEER_SCRIPTS[name]
        self.dir = work
        self.db = db
        self.list_db = list_db
        self.list_small_db = list_db + "-small" if not list_db.startswith("postgres") else ""
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        # tracing off; checkpoint deserialization restricted to known types, as
        # langgraph-checkpoint's README asks of new applications
        self.env.update(
            LANGCHAIN_TRACING_V2="false", LANGSMITH_TRACING="false", LANGGRAPH_STRICT_MSGPACK="true"
        )

    def argv(self, op: str, *extra: str, db: str | None = None) -> list[str]:
        return [str(self.python), str(self.script), op, "--db", db or self.db, *extra]

    def job(self, op: str, *extra: str, db: str | None = None) -> Job:
        return Job(self.argv(op, *extra, db=db), self.env, self.dir)

    def call(self, op: str, *extra: str, db: str | None = None) -> Any:
        return json.loads(harness.run(self.argv(op, *extra, db=db), self.env, self.dir))


class Bench:
    # filled in by rows_fs.build and pg_bench.run_all
    tr: uwf_bench.ThreadsRoot  # the threads root: small, mid and large threads
    list_small: Path  # roots of threads_small and threads_large one-step threads
    list_large: Path
    cas: uwf_bench.CasRoot  # the root of the store-size rows
    counts: dict[str, dict[str, int]]  # tool -> thread -> its steps so far
    pg_peers: dict[str, Peer]

    def __init__(self, args: argparse.Namespace, sizes: Sizes, work: Path) -> None:
        self.args = args
        self.s = sizes
        self.work = work
        self.figs: dict[str, dict[str, Fig]] = {}
        self.rows: list[tuple[str, str, str]] = []  # (key, label, section) in table order
        self.no_ratio: set[str] = set()  # rows whose sides do different work: no ratio shown
        self.sections: dict[str, str] = {}  # a row's section when not the current one
        self.section = "start"
        self.peers: dict[str, Peer] = {}
        self.extra: dict[str, Any] = {}
        self.cwd = work / "cwd"
        self.cwd.mkdir()

    def say(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    # -- rows ---------------------------------------------------------------------------
    def timed(
        self, key: str, label: str, jobs: dict[str, Job], checks: dict[str, Check] | None = None
    ) -> dict[str, Fig]:
        """One row: each tool's job once unmeasured (its output checked), then timed."""
        return self.timed_together([(key, label, jobs, checks)])[key]

    def timed_together(self, rows: list[Row]) -> dict[str, dict[str, Fig]]:
        """Rows whose runs are interleaved (each sample of every job, then the next), so
        that ratios between them (the start-up targets) compare the same moments."""
        active: dict[str, Job] = {}
        for key, _label, jobs, checks in rows:
            for tool, job in jobs.items():
                out = harness.run(job.argv, job.env, job.cwd)
                if checks and tool in checks:
                    try:
                        checks[tool](out)
                    except (KeyError, ValueError, TypeError, IndexError) as exc:
                        raise harness.CommandFailed(
                            f"{key}, {tool}: unexpected output ({exc!r}): {out[:300]}"
                        ) from None
                active[f"{key}\t{tool}"] = job
        measured = harness.measure(active, self.s.repeat)
        for key, label, jobs, _checks in rows:
            self.record(key, label, {tool: measured[f"{key}\t{tool}"] for tool in jobs})
        return {key: self.figs[key] for key, *_ in rows}

    def static(self, key: str, label: str, values: dict[str, Fig], ratio: bool = True) -> None:
        if not ratio:
            self.no_ratio.add(key)
        self.record(key, label, values)

    def record(self, key: str, label: str, values: dict[str, Fig]) -> None:
        if key in self.figs:
            raise RuntimeError(f"row {key} measured twice")
        self.figs[key] = values
        self.rows.append((key, label, self.sections.get(key, self.section)))
        shown = " | ".join(f"{t} {f.text()}" for t, f in values.items())
        self.say(f"  {label}: {shown}")

    def peer_jobs(self, op: str, *extra: str, db: str = "") -> dict[str, Job]:
        return {
            name: p.job(op, *extra, db=getattr(p, db) if db else None)
            for name, p in self.peers.items()
        }


# -- checks: every tool's result, against workload.py -----------------------------------------


def fail(what: str) -> None:
    raise harness.CommandFailed(what)


def expect_state(task: str, steps: int) -> Check:
    """A peer's state summary ``{"steps","role","output"}`` is step ``steps`` of ``task``."""

    def check(out: str) -> None:
        got = json.loads(out)
        if got["steps"] != steps:
            fail(f"expected step {steps}, got {got['steps']}")
        role = workload.role_at(steps)
        if got["role"] != role or got["output"] != workload.fields(task, role, steps):
            fail(f"step {steps} of {task!r} does not hold the expected answer")

    return check


def expect_history(task: str, steps: int, of: Callable[[Any], list[tuple[str, Any]]]) -> Check:
    """A history lists every step's (role, output) in order; ``of`` extracts them."""

    def check(out: str) -> None:
        got = of(json.loads(out))
        if len(got) != steps:
            fail(f"the history lists {len(got)} steps, not {steps}")
        for k, (role, output) in enumerate(got, start=1):
            if role != workload.role_at(k) or output != workload.fields(task, role, k):
                fail(f"step {k} of the history of {task!r} is not the expected answer")

    return check


def peer_history(data: Any) -> list[tuple[str, Any]]:
    return [(s["role"], s["output"]) for s in data["steps"]]


def uwf_history(data: Any) -> list[tuple[str, Any]]:
    return [(s["role"], s["output"]) for s in data["steps"][1:]]
