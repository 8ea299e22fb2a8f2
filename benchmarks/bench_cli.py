"""Wall-time figures of the uwf CLI, each with a ratio, measured in one run.

    .venv/bin/python benchmarks/bench_cli.py [--nodes 100000] [--repeat 15]

1. Store size: ``uwf cas get`` and ``uwf workflow show`` with 1,000 nodes in the store and
   again with ``--nodes`` (default 100,000); the ratio should stay near 1, because no command
   reads the whole store.
2. Start-up and one step: ``uwf --help``, ``uwf thread show`` and one ``uwf thread step`` with
   ``uwf-mock`` (both processes), each also as a ratio to ``python -c pass``.

Filler nodes are written straight to their files (correct names and content, no fsync) so
that filling 100,000 nodes takes seconds; everything measured goes through the real CLI.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from uwf.cas import codec
from uwf.cas.fs import FsStore
from uwf.protocol import schemas
from uwf.util.jsonfmt import dumps

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def uwf(*args: str, env: dict[str, str]) -> str:
    return subprocess.run(
        [str(BIN / "uwf"), *args], env=env, check=True, capture_output=True, text=True
    ).stdout


def timed(
    argv: list[str], env: dict[str, str], repeat: int, setup: list[str] | None = None
) -> tuple[float, float]:
    """Median and spread (max/min) of the wall time of ``argv``, in ms."""
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(
            argv, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples), max(samples) / min(samples)


def fill(store: FsStore, type_hash: str, start: int, stop: int) -> None:
    """Write filler Text nodes ``start..stop`` directly (same bytes the store would write)."""
    for i in range(start, stop):
        payload = f"filler node {i}"
        h = codec.node_hash(type_hash, payload)
        path = store.path(h)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dumps({"type": type_hash, "payload": payload, "timestamp": 0}))


def row(name: str, value: float, ratio: float | None, note: str = "") -> None:
    r = f"{ratio:6.2f}x" if ratio is not None else "       "
    print(f"  {name:<44} {value:9.1f} ms  {r}  {note}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="uwf-bench-"))
    root = work / "root"
    env = dict(
        os.environ,
        UNCAGED_WORKFLOW_STORAGE_ROOT=str(root),
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    (root).mkdir()
    (root / "config.yaml").write_text(
        "agents:\n  mock:\n    command: uwf-mock\n"
        f"    args: ['--scenario', '{REPO / 'examples' / 'solve-issue.mock.yaml'}']\n"
        "defaultAgent: mock\n"
    )
    try:
        wf = json.loads(
            uwf("workflow", "put", str(REPO / "examples" / "solve-issue.yaml"), env=env)
        )
        text = json.loads(uwf("cas", "put-text", "the node we read", env=env))["hash"]
        store = FsStore(root / "cas")
        text_type = schemas.hashes().text

        print(f"uwf CLI benchmark — median of {args.repeat} runs (python {sys.version.split()[0]})")
        print("\n[1] store size (ratio = large store / 1,000 nodes)")
        fill(store, text_type, 0, 1000)
        small = {
            "cas get": timed([str(BIN / "uwf"), "cas", "get", text], env, args.repeat),
            "workflow show": timed(
                [str(BIN / "uwf"), "workflow", "show", wf["name"]], env, args.repeat
            ),
        }
        fill(store, text_type, 1000, args.nodes)
        for name, (ms_small, _) in small.items():
            ms_big, spread = timed(
                [str(BIN / "uwf"), *name.split(), text if name == "cas get" else wf["name"]],
                env,
                args.repeat,
            )
            row(f"uwf {name} @ 1,000 nodes", ms_small, None)
            row(
                f"uwf {name} @ {args.nodes:,} nodes",
                ms_big,
                ms_big / ms_small,
                "noisy" if spread > 2 else "",
            )

        print("\n[2] start-up and one step (ratio = / python -c pass)")
        base, _ = timed([sys.executable, "-c", "pass"], env, args.repeat)
        row("python -c pass", base, 1.0)
        help_ms, _ = timed([str(BIN / "uwf"), "--help"], env, args.repeat)
        row("uwf --help", help_ms, help_ms / base)
        thread = json.loads(uwf("thread", "start", "solve-issue", "-p", "bench", env=env))
        tid = thread["thread"]
        show_ms, _ = timed([str(BIN / "uwf"), "thread", "show", tid], env, args.repeat)
        row("uwf thread show", show_ms, show_ms / base)
        samples = []
        for _ in range(args.repeat):
            t = json.loads(uwf("thread", "start", "solve-issue", "-p", "bench", env=env))
            t0 = time.perf_counter()
            uwf("thread", "step", t["thread"], env=env)
            samples.append((time.perf_counter() - t0) * 1000)
        step_ms = statistics.median(samples)
        row("uwf thread step (uwf + uwf-mock)", step_ms, step_ms / base)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
