"""uwf next to LangGraph and Apache Burr, on the same loop and the same work, in one run.

    bash benchmarks/run.sh [--quick] [--repeat N] [--no-peers] [--no-postgres] [--docs] ...

(``run.sh`` sets up ``.venv`` for uwf and one venv per peer, ``benchmarks/.venv-langgraph`` and
``benchmarks/.venv-burr``, pinned by ``peers/constraints.txt``, then runs this file with
``--peer LangGraph=PYTHON --peer Burr=PYTHON``; the run records each environment's ``pip
freeze``.)

The workload is a planner -> developer -> reviewer loop whose reviewer always rejects. Every
step, on every side, produces the answer ``workload.py`` gives for it: a different, realistic
answer (a few hundred to a few thousand bytes) at every step. uwf runs
``examples/solve-issue.yaml`` with its benchmark agent (``mock_agent.py``, uwf-mock answering
from workload.py); LangGraph and Burr run the same three nodes on their checkpointer or
persister (``peers/``). Each row's jobs run once unmeasured, with every side's result checked
(the right step, the right answer), then ``--repeat`` times interleaved; the figure is the
median. Long threads, many threads and big stores are built in-process first and never timed.

The run prints every table and the targets (pass/fail), and writes ``benchmarks/last-run.json``
and ``benchmarks/last-run.md``; ``--docs`` also regenerates docs/performance.md from it
(``report.py`` alone does that from the last run).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness
import instructions
import pg_bench
import report
import rows_fs
import targets
from bench import Bench, Sizes, freeze, key_versions, n, peer_pythons

HERE = Path(__file__).resolve().parent


def check_disk(b: Bench) -> None:
    need = b.s.nodes_large * 4096 * 1.1 + (2 << 30)
    free = shutil.disk_usage(b.work).free
    b.say(
        f"disk: {b.s.nodes_large:,} filler nodes take ~{b.s.nodes_large * 4096 / 1e9:.1f} GB "
        f"(one 4 KiB block each); {free / 1e9:.1f} GB free in {b.work}"
    )
    if free < need:
        raise SystemExit(
            f"not enough disk space: need ~{need / 1e9:.1f} GB, {free / 1e9:.1f} GB free; "
            "use a smaller --nodes-large or another --workdir"
        )


def compile_uwf() -> None:
    """Write uwf's bytecode (``__pycache__``), as ``pip install`` does for a wheel.

    An editable install run with ``PYTHONDONTWRITEBYTECODE=1`` (set on some machines) never
    writes it, so every measured process would compile every uwf module it imports (~8 ms
    for ``uwf thread show``), while Typer, the peers and an installed uwf load bytecode.
    """
    import compileall

    import uwf

    compileall.compile_dir(Path(uwf.__file__).parent, quiet=1)
    compileall.compile_dir(HERE, quiet=1, maxlevels=1)


def uwf_version() -> str:
    from uwf import __version__

    return __version__


def freezes(b: Bench) -> dict[str, list[str]]:
    """``pip freeze`` of uwf's environment and of each peer's."""
    out = {"uwf": freeze(sys.executable)}
    for name, python in peer_pythons(b.args).items():
        if name in b.peers:
            out[name] = freeze(python)
    return out


def header_lines(b: Bench, elapsed: float) -> list[str]:
    s = b.s
    frozen = b.extra.get("freeze") or {}
    envs = "; ".join(
        f"{tool}'s venv: " + ", ".join(f"{k} {v}" for k, v in key_versions(tool, lines).items())
        for tool, lines in frozen.items()
    )
    pg = b.extra.get("pg_settings")
    server = (
        f"; PostgreSQL {b.extra['pg_version']}, durable (fsync {pg['fsync']}, "
        f"synchronous_commit {pg['synchronous_commit']}, full_page_writes "
        f"{pg['full_page_writes']}, wal_sync_method {pg['wal_sync_method']})"
        if pg
        else ""
    )
    return [
        f"date: {_dt.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}, uwf {uwf_version()}{server}",
        f"environments (each its own venv; every package in last-run.json): {envs}"
        + ("" if b.peers else "; peers not run"),
        f"sizes: threads of {s.small} / {n(s.mid)} / {n(s.large)} steps; "
        f"{n(s.threads_small)} / {n(s.threads_large)} active threads; "
        f"{n(s.nodes_small)} / {n(s.nodes_large)} store nodes; {n(s.window)} real steps per "
        f"disk window; median of {s.repeat} runs (warm: {s.warm_batches} batches of "
        f"{s.warm_count} steps; fleets: {s.fleet_runs} run{'s' if s.fleet_runs > 1 else ''} of "
        f"{s.fleet_threads} threads × {s.fleet_steps} steps, "
        f"{n(s.fleet_threads * s.fleet_steps)} steps a run)",
        f"load average (1 min) before / after: {b.extra['load_before']:.2f} / "
        f"{b.extra.get('load_after', 0.0):.2f} (a busy machine makes every figure slower); "
        f"the whole run took {elapsed:.0f} s",
        "uwf/LangGraph, uwf/Burr: uwf's figure over that peer's (for rates, the peer's over "
        "uwf's): below 1, uwf is faster or smaller; no ratio where the work differs",
        *(
            ["a --quick run: small sizes and few runs, for development, not figures to quote"]
            if b.args.quick
            else []
        ),
    ]


def cleanup(b: Bench, work: Path, keep: bool) -> None:
    """Remove the work directory: at once when small; a store of hundreds of thousands of
    files (minutes of unlinks on a disk mounted with ``discard``) in a detached ``rm -rf``."""
    if keep:
        b.say(f"work directory kept: {work}")
    elif b.s.nodes_large > 100_000:
        proc = subprocess.Popen(
            ["rm", "-rf", str(work)],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        b.say(f"removing the work directory {work} in the background (rm pid {proc.pid})")
    else:
        shutil.rmtree(work, ignore_errors=True)


def parse(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description="uwf vs LangGraph vs Burr: one run, every table.")
    ap.add_argument("--quick", action="store_true", help="small sizes, for development")
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
    ap.add_argument("--window", type=int, default=0, help="real steps per disk window (default 50)")
    ap.add_argument(
        "--fleet-threads", type=int, default=0, help="threads of a fleet run (default 120)"
    )
    ap.add_argument(
        "--fleet-steps", type=int, default=0, help="steps of each fleet thread (default 10)"
    )
    ap.add_argument("--fleet-runs", type=int, default=0, help="runs of each fleet size (default 1)")
    ap.add_argument("--fleet-workers", default="1,2,4,8", help="the fleet sizes (default 1,2,4,8)")
    ap.add_argument(
        "--peer",
        action="append",
        default=[],
        metavar="NAME=PYTHON",
        help="a peer (LangGraph, Burr) and the python of its own venv (repeatable)",
    )
    ap.add_argument("--no-peers", action="store_true", help="measure uwf only")
    ap.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL and fleet rows")
    ap.add_argument(
        "--no-instructions", action="store_true", help="skip the instruction counts (valgrind)"
    )
    ap.add_argument("--workdir", default=None, help="where to build (default: the temp dir)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--json", default=str(report.RUN_JSON), help="the run's figures ('' for none)")
    ap.add_argument("--md", default=str(report.RUN_MD), help="the run's tables ('' for none)")
    ap.add_argument("--docs", action="store_true", help="also regenerate docs/performance.md")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    sizes = Sizes.from_args(args)
    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="uwf-compare-", dir=args.workdir))
    b = Bench(args, sizes, work)
    b.extra["load_before"] = os.getloadavg()[0]
    try:
        check_disk(b)
        compile_uwf()
        rows_fs.build(b)
        b.say(f"measuring: median of {sizes.repeat} runs each")
        rows_fs.startup(b)
        if not args.no_instructions:
            instructions.rows(b)
        rows_fs.reads(b)
        rows_fs.steps(b)
        rows_fs.disk(b)
        rows_fs.forks(b)
        rows_fs.store_size(b)
        rows_fs.warm_rows(b)
        if not args.no_postgres:
            pg_bench.run_all(b)
    except harness.CommandFailed as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        b.extra["load_after"] = os.getloadavg()[0]
        cleanup(b, work, keep=args.keep)
    b.extra["freeze"] = freezes(b)
    elapsed = time.perf_counter() - t0
    size_info = {
        "small": sizes.small,
        "large": sizes.large,
        "threads_small": sizes.threads_small,
        "threads_large": sizes.threads_large,
        "nodes_small": sizes.nodes_small,
        "nodes_large": sizes.nodes_large,
        "fleet_steps": sizes.fleet_threads * sizes.fleet_steps,
    }
    judged = targets.judge(b.figs, b.rows, size_info, frozenset(b.no_ratio))
    data: dict[str, Any] = {
        "meta": {
            "lines": header_lines(b, elapsed),
            "quick": args.quick,
            "sizes": size_info,
            "freeze": b.extra["freeze"],
            "pg_settings": b.extra.get("pg_settings"),
            "pg_counts": b.extra.get("pg_counts"),
            "fleet_windows": b.extra.get("fleet_windows"),
        },
        "rows": b.rows,
        "no_ratio": sorted(b.no_ratio),
        "figs": {k: {t: f.as_json() for t, f in v.items()} for k, v in b.figs.items()},
        "targets": targets.shown(judged),
        "next": [list(t) for t in targets.judge_next(b.figs, size_info)],
    }
    run = (
        report.write_run(data, Path(args.json), Path(args.md) if args.md else None)
        if args.json
        else report.Run(data)
    )
    print()
    print(run.printed())
    if args.docs:
        report.main(["--run", args.json])
    return 0


if __name__ == "__main__":
    sys.exit(main())
