"""uwf next to LangGraph and Apache Burr, on the same loop, in one run, in one table.

    bash benchmarks/run.sh [--quick] [--repeat N] [--nodes-large N] [--no-peers] ...

(``run.sh`` sets up ``.venv`` for uwf and ``benchmarks/.peer-venv`` for the peers, then runs
this file with ``--peer-python benchmarks/.peer-venv/bin/python``.)

The workload is a planner -> developer -> reviewer loop whose reviewer always rejects, with
no-op work: uwf runs ``examples/solve-issue.yaml`` with ``uwf-mock``; LangGraph and Burr run
the same three nodes, each of which overwrites two small state fields (nothing accumulates).
Every figure is the wall time of a fresh process (uwf: the ``uwf`` command, for a step
``uwf`` plus the ``uwf-mock`` it spawns; peers: a Python process of the peer venv doing the
same thing through the library's API), the median of ``--repeat`` runs after one unmeasured
run, flagged ``noisy`` when max/min > 1.5. Long threads, many threads and big stores are
built in-process first (see ``uwf_bench.py`` and ``peers/``) and never timed.

Prints the comparison table and the table of uwf's targets (pass/fail), and writes both as
markdown to ``benchmarks/last-run.md`` (``--md``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
import pg_bench
import uwf_bench
from harness import Fig, Job, Usage, file_usage, tree_usage

HERE = Path(__file__).resolve().parent
PEERS = {
    "LangGraph": HERE / "peers" / "langgraph_bench.py",
    "Burr": HERE / "peers" / "burr_bench.py",
}
TOOLS = ["uwf", "LangGraph", "Burr"]
PEER_PACKAGES = [
    "langgraph",
    "langgraph-checkpoint-sqlite",
    "langgraph-checkpoint-postgres",
    "apache-burr",
    "psycopg2-binary",
]

# one row of the table: key, label, the job of each tool, the output checks of some tools
Row = tuple[str, str, dict[str, Job], dict[str, Callable[[str], None]] | None]


@dataclass
class Sizes:
    small: int  # steps of the short thread
    mid: int  # steps of the mid thread (full history)
    large: int  # steps of the long thread
    window: int  # steps averaged for bytes per step
    threads_small: int
    threads_large: int
    nodes_small: int
    nodes_large: int
    repeat: int

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Sizes:
        large = args.steps or (1_000 if args.quick else 10_000)
        if large < 20:
            raise SystemExit("--steps must be at least 20")
        threads = args.threads or (1_000 if args.quick else 10_000)
        nodes = args.nodes_large or (20_000 if args.quick else 1_000_000)
        return cls(
            small=10,
            mid=max(2, large // 10),
            large=large,
            window=max(1, large // 10),
            threads_small=min(100, threads),
            threads_large=threads,
            nodes_small=min(1_000, nodes),
            nodes_large=nodes,
            repeat=args.repeat or (3 if args.quick else 7),
        )


def n(value: int) -> str:
    return f"{value:,}"


class Peer:
    """One peer's benchmark script, run as fresh processes of the peer venv's python."""

    def __init__(self, name: str, python: Path, work: Path) -> None:
        self.name = name
        self.python = python
        self.script = PEERS[name]
        self.dir = work / name.lower()
        self.dir.mkdir()
        self.db = str(self.dir / "threads.db")
        self.list_db = str(self.dir / "list.db")
        self.list_small_db = str(self.dir / "list-small.db")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        self.env.update(LANGCHAIN_TRACING_V2="false", LANGSMITH_TRACING="false")

    def argv(self, op: str, *extra: str, db: str | None = None) -> list[str]:
        return [str(self.python), str(self.script), op, "--db", db or self.db, *extra]

    def job(self, op: str, *extra: str, db: str | None = None) -> Job:
        return Job(self.argv(op, *extra, db=db), self.env, self.dir)

    def call(self, op: str, *extra: str, db: str | None = None) -> Any:
        return json.loads(harness.run(self.argv(op, *extra, db=db), self.env, self.dir))


class Bench:
    def __init__(self, args: argparse.Namespace, sizes: Sizes, work: Path) -> None:
        self.args = args
        self.s = sizes
        self.work = work
        self.figs: dict[str, dict[str, Fig]] = {}
        self.rows: list[tuple[str, str]] = []  # (key, label) in table order
        self.notes: list[str] = []
        self.peers: dict[str, Peer] = {}
        self.extra: dict[str, Any] = {}
        self.cwd = work / "cwd"
        self.cwd.mkdir()

    # -- helpers ------------------------------------------------------------------------
    def say(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    def timed(
        self,
        key: str,
        label: str,
        jobs: dict[str, Job],
        checks: dict[str, Callable[[str], None]] | None = None,
    ) -> dict[str, Fig]:
        """One row: run each tool's job once unmeasured (its output checked), then timed."""
        return self.timed_together([(key, label, jobs, checks)])[key]

    def timed_together(self, rows: list[Row]) -> dict[str, dict[str, Fig]]:
        """Rows whose runs are interleaved (each sample of every job, then the next), so
        that ratios between them (the start-up targets) compare the same moments."""
        active: dict[str, Job] = {}
        for key, _label, jobs, checks in rows:
            for tool, job in jobs.items():
                out = harness.run(job.argv, job.env, job.cwd)
                if checks and tool in checks:
                    checks[tool](out)
                active[f"{key}\t{tool}"] = job
        measured = harness.measure(active, self.s.repeat)
        for key, label, jobs, _checks in rows:
            figs = {tool: measured[f"{key}\t{tool}"] for tool in jobs}
            self.figs[key] = figs
            self.rows.append((key, label))
            shown = " | ".join(f"{t} {f.text()}" for t, f in figs.items())
            self.say(f"  {label}: {shown}")
        return {key: self.figs[key] for key, *_ in rows}

    def static(self, key: str, label: str, values: dict[str, Fig]) -> None:
        self.figs[key] = values
        self.rows.append((key, label))
        shown = " | ".join(f"{t} {f.text()}" for t, f in values.items())
        self.say(f"  {label}: {shown}")

    def peer_jobs(self, op: str, *extra: str, db: str = "") -> dict[str, Job]:
        return {
            name: p.job(op, *extra, db=getattr(p, db) if db else None)
            for name, p in self.peers.items()
        }

    # -- build --------------------------------------------------------------------------
    def check_disk(self) -> None:
        need = self.s.nodes_large * 4096 * 1.1 + (2 << 30)
        free = shutil.disk_usage(self.work).free
        self.say(
            f"disk: {self.s.nodes_large:,} filler nodes take "
            f"~{self.s.nodes_large * 4096 / 1e9:.1f} GB "
            f"(one 4 KiB block each); {free / 1e9:.1f} GB free in {self.work}"
        )
        if free < need:
            raise SystemExit(
                f"not enough disk space: need ~{need / 1e9:.1f} GB, {free / 1e9:.1f} GB free; "
                "use a smaller --nodes-large or another --workdir"
            )

    def build(self) -> None:
        s = self.s
        self.scenario = uwf_bench.write_scenario(self.work / "scenario.json")
        self.say(
            f"building uwf roots: threads of {s.small}, {n(s.mid)} and {n(s.large)} steps; "
            f"{n(s.threads_small)} and {n(s.threads_large)} active threads …"
        )
        self.tr = uwf_bench.build_threads_root(
            self.work / "uwf-threads", self.scenario, s.small, s.mid, s.large, s.window
        )
        self.list_small = self.work / "uwf-list-small"
        self.list_large = self.work / "uwf-list-large"
        t1 = uwf_bench.build_list_root(self.list_small, self.scenario, s.threads_small)
        t2 = uwf_bench.build_list_root(self.list_large, self.scenario, s.threads_large)
        self.say(f"  built in {self.tr.seconds:.1f} s + {t1:.1f} s + {t2:.1f} s")
        self.cas = uwf_bench.setup_cas_root(self.work / "uwf-cas", self.scenario)
        fill_s = uwf_bench.fill(self.cas.root, 0, s.nodes_small)
        self.say(f"  uwf cas root: {n(s.nodes_small)} filler nodes in {fill_s:.1f} s")

        if self.args.no_peers or self.args.peer_python is None:
            self.say("peers: skipped (--no-peers or no --peer-python)")
            return
        python = Path(self.args.peer_python).absolute()  # not resolved: keep the venv
        for name in PEERS:
            peer = Peer(name, python, self.work)
            self.say(f"building {name}: threads of {s.small}, {n(s.mid)}, {n(s.large)} steps …")
            built = peer.call(
                "build",
                *("--small", str(s.small), "--mid", str(s.mid), "--large", str(s.large)),
                *("--window", str(s.window)),
            )
            listed = peer.call(
                "build-list",
                *("--count", str(s.threads_large), "--copy-at", str(s.threads_small)),
                *("--copy-db", peer.list_small_db),
                db=peer.list_db,
            )
            self.extra[f"{name}.bytes"] = built["bytes"]
            self.say(f"  built in {built['seconds']:.1f} s + {listed['seconds']:.1f} s")
            self.peers[name] = peer
        self.extra["peer_versions"] = json.loads(
            harness.run(
                [
                    str(python),
                    "-c",
                    "import importlib.metadata as m, json; "
                    f"print(json.dumps({{p: m.version(p) for p in {PEER_PACKAGES!r}}}))",
                ],
                dict(os.environ),
                self.cwd,
            )
        )

    # -- measures -----------------------------------------------------------------------
    def uwf_job(self, root: Path, *args: str) -> Job:
        return Job(uwf_bench.uwf(*args), uwf_bench.cli_env(root), self.cwd)

    def run_all(self) -> None:
        s, tr = self.s, self.tr
        tid = tr.threads
        R = tr.root
        self.say(f"measuring: median of {s.repeat} cold runs each")
        self.loose_then_pack()  # every row below reads the threads root packed

        def expect_steps(count: int) -> Callable[[str], None]:
            def check(out: str) -> None:
                got = json.loads(out)["steps"]
                if got != count:
                    raise harness.CommandFailed(f"expected {count} steps, got {got}")

            return check

        def show(size: str, steps: int) -> Row:
            return (
                f"show@{size}",
                f"latest state (uwf thread show), {n(steps)}-step thread",
                {"uwf": self.uwf_job(R, "thread", "show", tid[size])}
                | self.peer_jobs("show", "--thread", size),
                {t: expect_steps(steps) for t in TOOLS},
            )

        # start-up: the interpreter, Typer's import, and the two commands of the start-up
        # targets (measured as multiples of Typer's import), interleaved
        env = dict(os.environ)
        py_jobs: dict[str, Job] = {"uwf": Job([sys.executable, "-c", "pass"], env, self.cwd)}
        for name, p in self.peers.items():
            py_jobs[name] = Job([str(p.python), "-c", "pass"], p.env, self.cwd)
        typer_job = Job([sys.executable, "-c", "import typer"], env, self.cwd)
        self.timed_together(
            [
                ("python", "interpreter start (python -c pass)", py_jobs, None),
                ("typer", 'Typer import (python -c "import typer")', {"uwf": typer_job}, None),
                ("help", "uwf --help", {"uwf": self.uwf_job(R, "--help")}, None),
                show("small", s.small),
            ]
        )
        self.timed(*show("large", s.large))
        for size, steps in (("small", s.small), ("large", s.large)):

            def has_last(out: str, steps: int = steps) -> None:
                if f"## Step {steps}:" not in out:
                    raise harness.CommandFailed(f"thread read does not show step {steps}")

            self.timed(
                f"read@{size}",
                f"uwf thread read (default quota), {n(steps)}-step thread",
                {"uwf": self.uwf_job(R, "thread", "read", tid[size])},
                {"uwf": has_last},
            )
        for size, steps in (("mid", s.mid), ("large", s.large)):

            def all_steps(out: str, steps: int = steps) -> None:
                got = len(json.loads(out)["steps"])
                if got != steps + 1:
                    raise harness.CommandFailed(f"thread steps listed {got} nodes, not {steps + 1}")

            self.timed(
                f"history@{size}",
                f"full history (uwf thread steps), {n(steps)}-step thread",
                {"uwf": self.uwf_job(R, "thread", "steps", tid[size])}
                | self.peer_jobs("history", "--thread", size),
                {"uwf": all_steps},
            )
        for key, root, count, db in (
            ("list@small", self.list_small, s.threads_small, "list_small_db"),
            ("list@large", self.list_large, s.threads_large, "list_db"),
        ):

            def listed(out: str, count: int = count) -> None:
                got = json.loads(out)
                got = len(got) if isinstance(got, list) else got["count"]
                if got != count:
                    raise harness.CommandFailed(f"thread list gave {got} threads, not {count}")

            self.timed(
                key,
                f"thread list, {n(count)} active threads",
                {"uwf": self.uwf_job(root, "thread", "list")} | self.peer_jobs("list", db=db),
                {t: listed for t in TOOLS},
            )

        # cas verify: the time on the threads root and on the small cas root; the rate is the
        # marginal one (extra nodes / extra time), so the process start-up does not dilute it
        scanned: dict[str, int] = {}

        def verified(name: str) -> Callable[[str], None]:
            def check(out: str) -> None:
                report = json.loads(out)
                if not report["ok"]:
                    raise harness.CommandFailed(f"cas verify found damage: {report['damaged'][:2]}")
                scanned[name] = report["scanned"]

            return check

        base = self.timed(
            "verify-base",
            "uwf cas verify (small store)",
            {"uwf": self.uwf_job(self.cas.root, "cas", "verify")},
            {"uwf": verified("base")},
        )["uwf"]
        self.rows.pop()
        full = self.timed(
            "verify-time",
            "uwf cas verify, the threads' store",
            {"uwf": self.uwf_job(R, "cas", "verify")},
            {"uwf": verified("full")},
        )["uwf"]
        self.rows[-1] = ("verify-time", f"uwf cas verify, {n(scanned['full'])} nodes")
        extra_nodes = scanned["full"] - scanned["base"]
        extra_ms = full.value - base.value
        if extra_nodes > 0 and extra_ms > 0:
            rate = extra_nodes / (extra_ms / 1000)
            label = (
                f"uwf cas verify rate ({n(extra_nodes)} more nodes than a "
                f"{n(scanned['base'])}-node store / the extra time)"
            )
        else:  # a tiny store: no margin to measure
            rate = scanned["full"] / (full.value / 1000)
            label = f"uwf cas verify rate ({n(scanned['full'])} nodes / time)"
        self.static("verify", label, {"uwf": Fig(rate, "nodes/s", max(full.spread, base.spread))})

        # steps move the threads forward; everything that reads them ran above
        def stepped(out: str) -> None:
            result = json.loads(out)
            if result.get("done") or result.get("role") not in ("developer", "reviewer"):
                raise harness.CommandFailed(f"unexpected step result: {out.strip()}")

        for size, steps in (("small", s.small), ("large", s.large)):
            before = tree_usage(R)
            threads_before = file_usage(R / "threads.yaml")
            self.timed(
                f"step@{size}",
                f"cold process, one step, {n(steps)}-step thread (uwf: thread step + uwf-mock)",
                {"uwf": self.uwf_job(R, "thread", "step", tid[size])}
                | self.peer_jobs("step", "--thread", size),
                {"uwf": stepped},
            )
            ran = s.repeat + 1
            if size == "large":
                grown = tree_usage(R) - before
                self.extra["uwf.real_step"] = Usage(grown.apparent // ran, grown.blocks // ran, 0)
                yaml = file_usage(R / "threads.yaml") - threads_before
                self.extra["uwf.threads_yaml"] = Usage(yaml.apparent // ran, yaml.blocks // ran, 0)

        # forks, last (LangGraph's fork adds a checkpoint to the thread it forks)
        chain = tr.steps["large"]
        half = s.large // 2
        cas_before = tree_usage(R / "cas")
        harness.run(
            uwf_bench.uwf("thread", "fork", chain[half - 1]), uwf_bench.cli_env(R), self.cwd
        )
        copied = {"uwf": Fig(float((tree_usage(R / "cas") - cas_before).apparent), "B")}
        for name, p in self.peers.items():
            out = p.call("fork", "--thread", "large", "--at", str(half), "--bytes")
            copied[name] = Fig(float(out["bytes"]), "B")
        for key, at in (("fork@1", 1), ("fork@half", half), ("fork@end", s.large)):
            jobs: dict[str, Job] = {"uwf": self.uwf_job(R, "thread", "fork", chain[at - 1])}
            if key == "fork@half":
                jobs |= self.peer_jobs("fork", "--thread", "large", "--at", str(at))
                label = f"find + fork at step {n(at)} of {n(s.large)}"
            else:
                label = f"uwf thread fork at step {n(at)} of {n(s.large)}"
            self.timed(key, label, jobs)
        self.static(
            "fork-bytes",
            "fork: bytes copied (uwf: CAS growth; LangGraph: new checkpoint rows)",
            copied,
        )

        # the store size: cas get and workflow show with few and with many nodes
        cas = self.cas
        for size, count in (("small", s.nodes_small), ("large", s.nodes_large)):
            if size == "large":
                self.say(
                    f"  filling the store to {n(count)} nodes "
                    f"(files written directly, {os.cpu_count()} workers) …"
                )
                took = uwf_bench.fill(cas.root, s.nodes_small, count)
                self.say(f"  filled in {took:.1f} s")
                self.extra["fill_seconds"] = took
            self.timed(
                f"casget@{size}",
                f"uwf cas get, {n(count)} nodes in the store",
                {"uwf": self.uwf_job(cas.root, "cas", "get", cas.text_hash)},
            )
            self.timed(
                f"wfshow@{size}",
                f"uwf workflow show, {n(count)} nodes in the store",
                {"uwf": self.uwf_job(cas.root, "workflow", "show", "solve-issue")},
            )

        self.packed_store_rows()

        # bytes per step
        yaml = self.extra["uwf.threads_yaml"]
        for part, first, last in (
            ("early", s.small, s.small + s.window),
            ("late", s.large - s.window, s.large),
        ):
            engine = tr.engine_bytes[part] + yaml
            for kind in ("apparent", "blocks"):
                what = "apparent size" if kind == "apparent" else "blocks used"
                self.static(
                    f"bytes-{part}-{kind}",
                    f"uwf: bytes per step as loose files, {what}, steps {n(first)}..{n(last)}",
                    {"uwf": Fig(float(getattr(engine, kind)), "B")},
                )
            self.packed_bytes_rows(part, first, last, yaml)
        real = self.extra["uwf.real_step"]
        self.static(
            "bytes-real-apparent",
            "uwf: all files one real step adds, apparent (incl. agent nodes, log)",
            {"uwf": Fig(float(real.apparent), "B")},
        )
        self.static(
            "bytes-real-blocks",
            "uwf: all files one real step adds, blocks used",
            {"uwf": Fig(float(real.blocks), "B")},
        )

    # -- packs (cas pack): the threads root packed, a packed store, disk per step ---------
    def loose_then_pack(self) -> None:
        """The long thread's full history from loose files, then ``uwf cas pack`` on the
        threads root (one cold run, timed) and the disk each step takes once packed."""
        s, tr, R = self.s, self.tr, self.tr.root

        def all_steps(out: str) -> None:
            got = len(json.loads(out)["steps"])
            if got != s.large + 1:
                raise harness.CommandFailed(f"thread steps listed {got} nodes, not {s.large + 1}")

        self.timed(
            "history@large-loose",
            f"uwf thread steps, {n(s.large)}-step thread, loose files (before cas pack)",
            {"uwf": self.uwf_job(R, "thread", "steps", tr.threads["large"])},
            {"uwf": all_steps},
        )
        job = self.uwf_job(R, "cas", "pack")
        t0 = time.perf_counter()
        report = json.loads(harness.run(job.argv, job.env, job.cwd))
        took = (time.perf_counter() - t0) * 1000
        self.static(
            "pack",
            f"uwf cas pack: {n(report['packed'])} loose nodes into one pack (one run)",
            {"uwf": Fig(took, "ms")},
        )
        self.extra["uwf.pack_report"] = report
        for part, (first, last) in {
            "early": (s.small, s.small + s.window),
            "late": (s.large - s.window, s.large),
        }.items():
            steps = tr.steps["large"][first:last]
            self.extra[f"uwf.packed_bytes.{part}"] = uwf_bench.packed_step_bytes(R, steps)

    def packed_bytes_rows(self, part: str, first: int, last: int, yaml: Usage) -> None:
        """Disk per step once packed, next to the peers' database growth per step."""
        packed = self.extra[f"uwf.packed_bytes.{part}"] + yaml
        for kind in ("apparent", "blocks"):
            values = {"uwf": Fig(float(getattr(packed, kind)), "B")}
            for name in self.peers:
                values[name] = Fig(float(self.extra[f"{name}.bytes"][part][kind]), "B")
            what = "apparent size" if kind == "apparent" else "blocks used"
            self.static(
                f"packed-{part}-{kind}",
                f"bytes per step once packed, {what}, steps {n(first)}..{n(last)}",
                values,
            )

    def packed_store_rows(self) -> None:
        """``cas get`` and ``workflow show`` on stores of few and of many nodes, all packed
        (one pack each, built directly: see ``uwf_bench.fill_packed``)."""
        for size, count in (("small", self.s.nodes_small), ("large", self.s.nodes_large)):
            root = self.work / f"uwf-cas-packed-{size}"
            cas = uwf_bench.setup_cas_root(root, self.scenario)
            took = uwf_bench.fill_packed(root, count)
            self.say(f"  packed store of {n(count)} filler nodes built in {took:.1f} s")
            self.timed(
                f"casget-packed@{size}",
                f"uwf cas get, {n(count)} nodes in one pack",
                {"uwf": self.uwf_job(root, "cas", "get", cas.text_hash)},
            )
            self.timed(
                f"wfshow-packed@{size}",
                f"uwf workflow show, {n(count)} nodes in one pack",
                {"uwf": self.uwf_job(root, "workflow", "show", "solve-issue")},
            )

    def pack_targets(self) -> list[tuple[str, str, bool | None]]:
        """The targets of packs, listing and history (issue 14): each (label, measured, ok)."""
        s, f = self.s, self.figs
        out: list[tuple[str, str, bool | None]] = []

        def best_peer(key: str) -> tuple[str, Fig] | None:
            peers = [(t, f[key][t]) for t in ("LangGraph", "Burr") if t in f[key]]
            return min(peers, key=lambda p: p[1].value) if peers else None

        for key, what in (
            ("list@large", f"thread list, {n(s.threads_large)} threads"),
            ("history@large", f"thread steps, {n(s.large)} steps (packed)"),
        ):
            peer = best_peer(key)
            uwf = f[key]["uwf"]
            if peer is None:
                out.append((f"{what} ≤ the best peer", uwf.text() + ", peers not run", None))
            else:
                measured = f"{uwf.text()} vs {peer[0]} {peer[1].text()}"
                out.append((f"{what} ≤ the best peer", measured, uwf.value <= peer[1].value))
        worst = max(f["packed-early-blocks"]["uwf"].value, f["packed-late-blocks"]["uwf"].value)
        out.append(("disk per step once packed ≤ 512 B of blocks", f"{worst:,.0f} B", worst <= 512))
        big, small = f["casget-packed@large"]["uwf"], f["casget-packed@small"]["uwf"]
        r = big.value / small.value
        out.append(
            (
                f"cas get at {n(s.nodes_large)} vs {n(s.nodes_small)} nodes, packed, within 1.2×",
                f"{r:.2f}× ({big.value:.1f} / {small.value:.1f} ms)",
                r <= 1.2,
            )
        )
        behind = []
        for key, label in self.rows:
            if key == "python":  # the interpreter's start, not uwf's
                continue
            peer = best_peer(key)
            ours = f[key].get("uwf")
            if peer is not None and ours is not None and ours.value > peer[1].value:
                behind.append(f"{label} ({ours.value / peer[1].value:.2f}×)")
        if self.peers:
            shown = "; ".join(behind) if behind else "every row"
            out.append(("uwf ≤ the best peer on every row with a peer", shown, not behind))
        else:
            out.append(("uwf ≤ the best peer on every row with a peer", "peers not run", None))
        return out

    # -- tables -------------------------------------------------------------------------
    def table(self) -> tuple[list[str], list[list[str]]]:
        header = ["measure", "uwf", "LangGraph", "Burr", "uwf/best-peer"]
        rows = []
        for key, label in self.rows:
            figs = self.figs[key]
            cells = [figs[t].text() if t in figs else "—" for t in TOOLS]
            peers = [figs[t].value for t in ("LangGraph", "Burr") if t in figs]
            ratio = "—"
            if "uwf" in figs and peers and min(peers) > 0 and figs["uwf"].unit != "nodes/s":
                ratio = f"{figs['uwf'].value / min(peers):.2f}×"
            rows.append([label, *cells, ratio])
        return header, rows

    def startup(self) -> tuple[list[str], list[list[str]]]:
        """uwf's quick commands as multiples of a bare interpreter start and of Typer's
        import, same run."""
        base = self.figs["python"]["uwf"].value
        typer = self.figs["typer"]["uwf"].value
        header = ["uwf command", "median", "× python -c pass", "× import typer"]
        rows = []
        for key, label in (
            ("typer", 'python -c "import typer"'),
            ("help", "uwf --help"),
            ("show@small", "uwf thread show"),
            ("step@small", "uwf thread step + uwf-mock"),
        ):
            fig = self.figs.get(key, {}).get("uwf")
            if fig is not None and base > 0 and typer > 0:
                rows.append(
                    [label, fig.text(), f"{fig.value / base:.1f}×", f"{fig.value / typer:.2f}×"]
                )
        return header, rows

    def targets(self) -> tuple[list[str], list[list[str]]]:
        s, f = self.s, self.figs

        def ms(key: str, tool: str = "uwf") -> float:
            return f[key][tool].value

        out: list[list[str]] = []

        def add(label: str, measured: str, ok: bool | None) -> None:
            out.append([label, measured, "n/a" if ok is None else ("pass" if ok else "FAIL")])

        def ceiling(label: str, key: str, limit: float) -> None:
            add(f"{label} ≤ {limit:g} ms", f[key]["uwf"].text(), ms(key) <= limit)

        def within(label: str, big: str, small: str, limit: float = 1.2) -> None:
            r = ms(big) / ms(small)
            add(
                f"{label} within {limit}×",
                f"{r:.2f}× ({ms(big):.1f} / {ms(small):.1f} ms)",
                r <= limit,
            )

        def over_typer(label: str, key: str, limit: float) -> None:
            r = ms(key) / ms("typer")
            add(
                f'{label} ≤ {limit}× python -c "import typer"',
                f"{r:.2f}× ({ms(key):.1f} / {ms('typer'):.1f} ms)",
                r <= limit,
            )

        over_typer("uwf thread show", "show@small", 1.25)
        over_typer("uwf --help", "help", 1.15)
        ceiling(f"thread show, {n(s.large)} steps", "show@large", 100)
        ceiling(f"thread read (default quota), {n(s.large)} steps", "read@large", 100)
        ceiling(f"thread list, {n(s.threads_small)} threads", "list@small", 100)
        ceiling("thread step with uwf-mock (both processes)", "step@small", 250)
        step = ms("step@small")
        for peer, factor, words in (
            ("Burr", 1.0, "below Burr's cold step"),
            ("Burr", 0.6, "≤ 0.6× Burr's cold step"),
            ("LangGraph", 1 / 3, "under a third of LangGraph's"),
        ):
            if peer in f["step@small"]:
                other = ms("step@small", peer)
                add(
                    f"thread step {words}",
                    f"{step:.1f} vs {other * factor:.1f} ms",
                    step < other * factor,
                )
            else:
                add(f"thread step {words}", "peer not run", None)
        within(f"thread show at {n(s.large)} vs {s.small} steps", "show@large", "show@small")
        within(f"thread step at {n(s.large)} vs {s.small} steps", "step@large", "step@small")
        within(f"thread read at {n(s.large)} vs {s.small} steps", "read@large", "read@small")
        add(
            f"thread steps over {n(s.large)} steps ≤ 1 s",
            f["history@large"]["uwf"].text(),
            ms("history@large") <= 1000,
        )
        worst = max(("fork@1", "fork@half", "fork@end"), key=ms)
        add(
            f"fork anywhere in {n(s.large)} steps ≤ 100 ms (slowest of step 1, middle, head)",
            f[worst]["uwf"].text(),
            ms(worst) <= 100,
        )
        copied = f["fork-bytes"]["uwf"].value
        add("fork copies 0 bytes", f"{copied:,.0f} B", copied == 0)
        within(
            f"cas get at {n(s.nodes_large)} vs {n(s.nodes_small)} nodes",
            "casget@large",
            "casget@small",
        )
        rate = f["verify"]["uwf"]
        add("cas verify ≥ 20,000 nodes/s", rate.text(), rate.value >= 20_000)
        for label, measured, ok in self.pack_targets():
            add(label, measured, ok)
        early = f["bytes-early-apparent"]["uwf"].value
        late = f["bytes-late-apparent"]["uwf"].value
        add(
            "engine-written bytes per step ≤ 600 B (StepNode + index line + threads.yaml Δ)",
            f"{early:,.0f} B early, {late:,.0f} B late",
            max(early, late) <= 600,
        )
        add(
            "… constant in thread length (late / early ≤ 1.05)",
            f"{late / early:.3f}×",
            late / early <= 1.05,
        )
        return ["target", "measured", "pass/fail"], out

    def header_lines(self) -> list[str]:
        s = self.s
        versions = self.extra.get("peer_versions") or {}
        peer_text = ", ".join(f"{k} {v}" for k, v in versions.items()) or "peers not run"
        return [
            f"date: {_dt.datetime.now().astimezone().isoformat(timespec='seconds')}",
            f"machine: {platform.machine()}, {os.cpu_count()} cores, "
            f"Python {platform.python_version()}, uwf {_uwf_version()}; {peer_text}",
            f"sizes: threads of {s.small} / {n(s.mid)} / {n(s.large)} steps; "
            f"{n(s.threads_small)} / {n(s.threads_large)} active threads; "
            f"{n(s.nodes_small)} / {n(s.nodes_large)} store nodes; median of {s.repeat} runs",
            f"load average (1 min) before / after: {self.extra['load_before']:.2f} / "
            f"{self.extra.get('load_after', 0.0):.2f} (a busy machine makes every figure slower)",
            "uwf/best-peer: uwf's figure divided by the better peer's (below 1: uwf is faster "
            "or smaller)",
        ]


NOTES = """\
- Every time is the wall time of a fresh process, median of the runs after one unmeasured run;
  `(noisy)` marks a figure whose slowest run took over 1.5× its fastest.
- Workload: planner → developer → reviewer, reviewer always rejecting; no-op nodes that overwrite
  two small state fields (nothing accumulates, so the peers' per-step state stays constant).
- uwf: the real CLI on roots built with uwf's own code (node for node what `uwf thread step`
  with `uwf-mock` writes); a step is `uwf thread step` plus the `uwf-mock` it spawns. The
  threads root is packed by `uwf cas pack` (one cold run, timed) after its first row, the full
  history read from loose files; every later row reads it packed (new steps are loose files).
- LangGraph: `SqliteSaver`, graph compiled with `interrupt_after` every node, one
  `invoke(None, config)` per process; latest state `get_state`; history
  `list(get_state_history)`; fork = `get_state_history(filter={"step": k})` + `update_state`
  (a new checkpoint in the same thread); thread list = `saver.list(None)`, newest per thread.
- Burr: `SQLitePersister`, `initialize_from(resume_at_next_action=True)` + one `app.step()` per
  process; latest state `persister.load`; history raw SQL over its table (it has no API for
  it), each state decoded; fork = `initialize_from(fork_from_app_id, fork_from_sequence_id)`
  (persists nothing until the fork's first step); thread list = `list_app_ids`.
- PostgreSQL rows (`benchmarks/pg_bench.py`): one local server (loopback, `fsync` off) for
  all three; uwf on a `uwf store copy` of its filesystem roots; LangGraph on `PostgresSaver`
  (psycopg 3), Burr on `PostgreSQLPersister` (psycopg2), the same operations as above.
- Fleet rows: N `uwf worker --idle-exit 0.5` processes draining threads of the loop, each
  archived by `--max-rounds 5`; steps per second of wall time (less the final idle wait).
- Bytes per step: uwf counts what the engine itself writes per step (the StepNode, its
  type-index line, the threads.yaml change), not the agent's output/detail/turn nodes; the
  peers count their database's growth (WAL folded in) over the window. "blocks used" is
  st_blocks × 512. As a loose file each StepNode takes at least one 4 KiB block; once packed
  it takes its compressed record and its 41-byte index entry, and blocks are counted in
  proportion to what the pack's two files take on disk.
- The "in one pack" rows read stores whose nodes, fillers included, were written straight
  into one pack (the records `uwf cas pack` would write; see `uwf_bench.fill_packed`).
- uwf's bytecode is written before anything is measured (as `pip install` does), so no run
  compiles uwf's sources, whatever `PYTHONDONTWRITEBYTECODE` says.
- Start-up targets are multiples of `python -c "import typer"` in uwf's venv; the interpreter,
  Typer import, `uwf --help` and 10-step `thread show` rows are timed interleaved, run by run.
- Filler nodes for the store-size rows are written straight to their files (right names and
  bytes, no fsync); the build of everything is not timed.
"""


def compile_uwf() -> None:
    """Write uwf's bytecode (``__pycache__``), as ``pip install`` does for a wheel.

    An editable install run with ``PYTHONDONTWRITEBYTECODE=1`` (set on some machines) never
    writes it, so every measured process would compile every uwf module it imports (~8 ms
    for ``uwf thread show``), while Typer, the peers and an installed uwf load bytecode.
    """
    import compileall

    import uwf

    compileall.compile_dir(Path(uwf.__file__).parent, quiet=1)


def _uwf_version() -> str:
    from uwf import __version__

    return __version__


def cleanup(bench: Bench, work: Path, keep: bool) -> None:
    """Remove the work directory: at once when small; a store of hundreds of thousands of
    files (minutes of unlinks on a disk mounted with ``discard``) in a detached ``rm -rf``."""
    if keep:
        bench.say(f"work directory kept: {work}")
    elif bench.s.nodes_large > 100_000:
        proc = subprocess.Popen(
            ["rm", "-rf", str(work)],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        bench.say(f"removing the work directory {work} in the background (rm pid {proc.pid})")
    else:
        t1 = time.perf_counter()
        shutil.rmtree(work, ignore_errors=True)
        bench.say(f"work directory removed in {time.perf_counter() - t1:.1f} s")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="uwf vs LangGraph vs Burr on the same no-op loop: one table, one run."
    )
    ap.add_argument(
        "--quick", action="store_true", help="small sizes (1,000 steps, 20,000 nodes, 3 runs)"
    )
    ap.add_argument(
        "--repeat", type=int, default=0, help="timed runs per figure (default 7, quick 3)"
    )
    ap.add_argument(
        "--steps", type=int, default=0, help="steps of the long thread (default 10,000)"
    )
    ap.add_argument(
        "--threads", type=int, default=0, help="active threads for thread list (default 10,000)"
    )
    ap.add_argument(
        "--nodes-large", type=int, default=0, help="nodes of the big store (default 1,000,000)"
    )
    ap.add_argument(
        "--peer-python", default=None, help="python of the venv with the peers installed"
    )
    ap.add_argument("--no-peers", action="store_true", help="measure uwf only")
    ap.add_argument(
        "--no-postgres",
        action="store_true",
        help="skip the PostgreSQL and fleet rows (benchmarks/pg_bench.py)",
    )
    ap.add_argument("--workdir", default=None, help="where to build (default: the temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--md", default=str(HERE / "last-run.md"), help="markdown output ('' for none)")
    args = ap.parse_args(argv)
    sizes = Sizes.from_args(args)

    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="uwf-compare-", dir=args.workdir))
    bench = Bench(args, sizes, work)
    bench.extra["load_before"] = os.getloadavg()[0]
    try:
        bench.check_disk()
        compile_uwf()
        bench.build()
        bench.run_all()
        if not args.no_postgres:
            pg_bench.run_all(bench)
    except harness.CommandFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        bench.extra["load_after"] = os.getloadavg()[0]
        cleanup(bench, work, keep=args.keep)

    header, rows = bench.table()
    t_header, t_rows = bench.targets()
    s_header, s_rows = bench.startup()
    lines = bench.header_lines()
    elapsed = time.perf_counter() - t0
    print()
    print("\n".join(lines))
    print()
    print(harness.aligned(header, rows))
    print()
    print(harness.aligned(t_header, t_rows))
    print()
    print(harness.aligned(s_header, s_rows))
    print()
    print(f"wall time of the benchmark: {elapsed:.0f} s")
    if args.md:
        md = [
            "# uwf vs LangGraph vs Burr — last run",
            "",
            "Written by `bash benchmarks/run.sh"
            + (" --quick" if args.quick else "")
            + "`; do not edit by hand.",
            "",
            *[f"- {line}" for line in lines],
            "",
            harness.markdown(header, rows),
            "",
            "## uwf targets",
            "",
            harness.markdown(t_header, t_rows),
            "",
            "## Start-up, as a multiple of a bare interpreter and of Typer's import",
            "",
            harness.markdown(s_header, s_rows),
            "",
            "## How it is measured",
            "",
            NOTES,
        ]
        Path(args.md).write_text("\n".join(md))
        print(f"markdown: {args.md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
