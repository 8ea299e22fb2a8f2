"""The fleet rows (docs/performance.md, "Fleets"): N workers doing the same work on every side.

* **The same agent**: every side's worker runs the same small external agent program per step
  (``agent.py``): uwf's ``uwf worker`` through ``uwf-cmd`` run in the worker's process
  (``--agent external``: config.yaml's ``python: uwf-cmd`` alias, ``uwf_bench.setup_root``),
  each peer's node through ``subprocess`` (``--external``). The in-process rows
  run the peers' nodes in their own process, and uwf's agent as a Python agent in its worker
  (``uwf_inprocess_agent``).
* **The same claim**: every side takes threads from the shared database as they become free —
  uwf through its step locks (skip-locked), the peers through a claims table (``FOR UPDATE
  SKIP LOCKED``, ``peers/common.py``) — rather than having them dealt out; the oldest thread
  with steps left first, on every side.
* **The same window**: it opens when every worker is ready — a peer's worker says so once its
  imports, its saver or persister and its claim connection are done; a uwf worker is ready
  when its record is in the store's worker registry (written after its imports and its
  store's opening, before its first step) — and closes when the last step lands (each
  worker's line for it, stamped as it arrives). Steps landed before it opens are left out.
  Each run is ``fleet_threads`` threads of ``fleet_steps`` steps (1,000 steps in the full
  run), on a fresh database per side and run; the sides run interleaved, run by run.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import harness
import mock_agent
import uwf_bench
import workload
from bench import HERE, Bench, Peer, expect_state, task_of

if TYPE_CHECKING:
    from uwf.util.outputs import StepEntry

WORKERS = (1, 2, 4, 8)
IDLE_EXIT = 1.0  # seconds a uwf worker waits for work before it exits (after the window)


def external_agent() -> str:
    """The external agent of a uwf worker: the same program the peers' nodes spawn, through
    uwf-cmd in the worker's own process (config.yaml's alias of ``python: uwf-cmd``)."""
    return uwf_bench.EXTERNAL


# -- uwf's in-process fleet row ---------------------------------------------------------------
#
# A ``uwf worker`` runs the benchmark's agent (``mock_agent.WorkloadAgent``, what
# ``uwf_warm.py`` runs) as a Python agent in its own process (docs/api.md, "Python agents"):
# ``--agent python:mock_agent:inprocess``, the benchmarks' directory on its PYTHONPATH. The
# "fleet-inproc@N" rows then hold uwf beside the peers' in-process fleets, and the issue-36
# target "fleet with in-process agents" is judged (targets.py).
INPROCESS_AGENT = mock_agent.REFERENCE


def uwf_inprocess_agent() -> tuple[str, str] | None:
    """(config.yaml lines to append, the worker's ``--agent``) of the in-process agent."""
    return "", INPROCESS_AGENT


# -- one fleet run -------------------------------------------------------------------------------


@dataclass
class Window:
    """A fleet run: the steps that landed in the timed window and its length."""

    steps: int
    seconds: float
    total: int  # every step the workers ran, the window's and the ones before it

    @property
    def rate(self) -> float:
        """Steps per second in the window (0 when none landed in it: a run too small)."""
        return self.steps / self.seconds if self.seconds > 0 else 0.0


@dataclass
class _Worker:
    proc: subprocess.Popen[str]
    ready: float | None = None
    landed: list[float] = field(default_factory=list)
    final: dict[str, Any] | None = None
    errors: list[str] = field(default_factory=list)


def _read(worker: _Worker) -> None:
    """Stamp each line of a worker: ready, a step, a failed step, its total. A line's own
    ``"t"`` (the worker's ``time.monotonic()`` when it wrote it: one clock for every process
    on Linux) is its stamp, else the moment it is read here. Lines of two workers are read by
    two threads, which a loaded machine can delay differently: the worker's own stamp keeps
    their order (a step written after the last worker said it was ready is in the window)."""
    out = cast(IO[str], worker.proc.stdout)
    for line in out:
        now = time.monotonic()
        try:
            item = json.loads(line)
        except ValueError:
            worker.errors.append(line.strip()[:200])
            continue
        if not isinstance(item, dict):
            worker.errors.append(line.strip()[:200])
            continue
        stamp = item.get("t")
        if isinstance(stamp, float):
            now = stamp
        if item.get("ready"):
            worker.ready = now
        elif "error" in item:
            worker.errors.append(str(item)[:300])
        elif "head" in item or "step" in item:
            worker.landed.append(now)
        elif "steps" in item:
            worker.final = item


def run_workers(
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    count: int,
    ready: Callable[[set[int]], int] | None = None,
) -> Window:
    """Start ``count`` workers; time the window from the moment all are ready (their
    ``{"ready": true}`` line, or ``ready(pids)`` reaching ``count``) to the last step."""
    with contextlib.ExitStack() as stack:
        logs = [stack.enter_context(tempfile.TemporaryFile("w+")) for _ in range(count)]
        workers = [
            _Worker(
                subprocess.Popen(
                    argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=log, text=True
                )
            )
            for log in logs
        ]
        readers = [threading.Thread(target=_read, args=(w,), daemon=True) for w in workers]
        for reader in readers:
            reader.start()
        opened: float | None = None
        if ready is not None:
            pids = {w.proc.pid for w in workers}
            while opened is None and any(w.proc.poll() is None for w in workers):
                if ready(pids) >= count:
                    opened = time.monotonic()
                else:
                    time.sleep(0.01)
        for w in workers:
            w.proc.wait(timeout=3600)
        for reader in readers:
            reader.join()
        for w in workers:
            cast(IO[str], w.proc.stdout).close()
        for w, log in zip(workers, logs, strict=True):
            if w.proc.returncode != 0 or w.errors:
                log.seek(0)
                raise harness.CommandFailed(
                    f"a fleet worker exited {w.proc.returncode}: {w.errors[:2]} {log.read()[-300:]}"
                )
    if ready is None:
        stamps = [w.ready for w in workers]
        if any(s is None for s in stamps):
            raise harness.CommandFailed("a fleet worker never said it was ready")
        opened = max(cast(list[float], stamps))
    if opened is None:
        raise harness.CommandFailed("the fleet's workers never all registered")
    landed = sorted(t for w in workers for t in w.landed)
    inside = [t for t in landed if t >= opened]
    if not inside:  # a run too small for its fleet: every step landed before the last start
        return Window(0, 0.0, len(landed))
    return Window(len(inside), inside[-1] - opened, len(landed))


def _all_ran(b: Bench, window: Window, tool: str) -> Window:
    expected = b.s.fleet_threads * b.s.fleet_steps
    if window.total != expected:
        raise harness.CommandFailed(f"the {tool} fleet ran {window.total} steps, not {expected}")
    return window


# -- uwf -----------------------------------------------------------------------------------------


def _uwf_store(b: Bench, url: str | None, prefix: str, extra_config: str = "") -> dict[str, str]:
    """A store with the workflow, the benchmark's config and the fleet's threads; its env."""
    root = Path(tempfile.mkdtemp(prefix="fleet-", dir=b.work))
    uwf_bench.setup_root(root)  # config.yaml, and the workflow in the root's own store
    if extra_config:
        with (root / "config.yaml").open("a", encoding="utf-8") as config:
            config.write(extra_config)
    env = uwf_bench.cli_env(root)
    store = str(root)
    if url is not None:
        env["UWF_STORE"] = store = url
        harness.run(uwf_bench.uwf("workflow", "put", str(uwf_bench.WORKFLOW_FILE)), env, b.cwd)
    s = b.s
    threads = [sys.executable, str(HERE / "uwf_warm.py"), "threads", "--store", store]
    more = ("--count", str(s.fleet_threads), "--rounds", str(s.fleet_steps), "--prefix", prefix)
    harness.run([*threads, *more], env, b.cwd)
    return env


def uwf_fleet(
    b: Bench, workers: int, url: str | None, prefix: str, agent: str, config: str = ""
) -> Window:
    """``workers`` ``uwf worker`` processes on a store of the fleet's threads; a worker is
    ready once its record is in the store's worker registry."""
    from uwf.backend import open_backend

    env = _uwf_store(b, url, prefix, config)
    if agent.startswith("python:"):  # the worker imports the agent's module from here
        env = mock_agent.importable(env)
    argv = uwf_bench.uwf("worker", "--idle-exit", str(IDLE_EXIT), "--agent", agent)
    with open_backend(env.get("UWF_STORE") or env["UNCAGED_WORKFLOW_STORAGE_ROOT"]) as backend:

        def registered(pids: set[int]) -> int:
            return sum(1 for r in backend.workers.records() if r.pid in pids)

        window = run_workers(argv, env, b.cwd, workers, registered)
    check_uwf_fleet(b, env, prefix)
    return _all_ran(b, window, "uwf")


def check_uwf_fleet(b: Bench, env: dict[str, str], prefix: str) -> None:
    """Every thread ran its steps and ended at its round limit, each step with its answer
    (read through the library, unmeasured)."""
    from uwf.backend import open_backend
    from uwf.engine.threads.listing import list_threads
    from uwf.engine.threads.steplist import steps as thread_steps

    with open_backend(env.get("UWF_STORE") or env["UNCAGED_WORKFLOW_STORAGE_ROOT"]) as backend:
        ended = {t["task"]: t["thread"] for t in list_threads(backend, status="max_rounds")}
        for i in range(b.s.fleet_threads):
            task = task_of(f"{prefix}-{i:04d}")
            if task not in ended:
                raise harness.CommandFailed(f"the uwf fleet did not finish {task!r}")
            steps = cast("list[StepEntry]", thread_steps(backend, ended[task])["steps"][1:])
            answers = [(s["role"], s["output"]) for s in steps]
            expected = [
                (workload.role_at(k), workload.fields(task, workload.role_at(k), k))
                for k in range(1, b.s.fleet_steps + 1)
            ]
            if answers != expected:
                raise harness.CommandFailed(f"the uwf fleet's thread {task!r} is not as expected")


# -- the peers -----------------------------------------------------------------------------------


def external_args() -> tuple[str, ...]:
    return ("--external", "--agent-python", sys.executable)


def peer_fleet(b: Bench, peer: Peer, workers: int, url: str, prefix: str, external: bool) -> Window:
    s = b.s
    sizes = ("--count", str(s.fleet_threads), "--steps", str(s.fleet_steps), "--prefix", prefix)
    peer.call("fleet-setup", *sizes, db=url)
    argv = peer.argv("fleet-worker", *(external_args() if external else ()), db=url)
    window = _all_ran(b, run_workers(argv, peer.env, peer.dir, workers), peer.name)
    threads = [f"{prefix}-{i:04d}" for i in range(s.fleet_threads)]
    found = peer.call("verify-threads", "--threads", ",".join(threads), db=url)
    for thread in threads:  # every thread holds its last answer, read back through the peer
        expect_state(task_of(thread), s.fleet_steps)(json.dumps(found[thread]))
    return window


# -- the rows ------------------------------------------------------------------------------------


def run_fleet(b: Bench, server: Any | None) -> None:
    """Every fleet row, run by run: in each run every size on every side, one after another."""
    s = b.s
    b.section = "fleet"
    b.say(
        f"fleets: {s.fleet_threads} threads × {s.fleet_steps} steps, "
        f"{', '.join(map(str, s.fleet_workers))} workers, {s.fleet_runs} runs each …"
    )
    inproc = uwf_inprocess_agent()
    rates: dict[str, dict[str, list[float]]] = {}
    windows: dict[str, dict[str, list[int]]] = {}

    def add(key: str, tool: str, window: Window) -> None:
        windows.setdefault(key, {}).setdefault(tool, []).append(window.steps)
        if window.steps == 0:  # a run too small for its fleet: no figure rather than 0
            b.say(f"  {key} {tool}: every step landed before the last worker was ready")
            return
        rates.setdefault(key, {}).setdefault(tool, []).append(window.rate)

    for run in range(s.fleet_runs):
        for workers in s.fleet_workers:
            prefix = f"r{run}w{workers}"
            add(f"fleet-fs@{workers}", "uwf", uwf_fleet(b, workers, None, prefix, external_agent()))
            if server is None:
                continue
            url = server.fresh()
            add(f"fleet-pg@{workers}", "uwf", uwf_fleet(b, workers, url, prefix, external_agent()))
            server.drop(url)
            for name, peer in b.pg_peers.items():
                for key, external in (
                    (f"fleet-pg@{workers}", True),
                    (f"fleet-inproc@{workers}", False),
                ):
                    url = server.fresh()
                    add(key, name, peer_fleet(b, peer, workers, url, prefix, external))
                    server.drop(url)
            if inproc is not None:
                url = server.fresh()
                config, agent = inproc
                add(
                    f"fleet-inproc@{workers}",
                    "uwf",
                    uwf_fleet(b, workers, url, prefix, agent, config),
                )
                server.drop(url)
    steps = s.fleet_threads * s.fleet_steps
    for key in sorted(rates, key=_order):
        kind, workers_text = key.split("@")
        workers = int(workers_text)
        what = {
            "fleet-fs": "external agents, filesystem (uwf only: the peers share threads through "
            "a database server)",
            "fleet-pg": "external agents, PostgreSQL",
            "fleet-inproc": "in-process agents, PostgreSQL"
            + ("" if inproc is not None else " (uwf: none)"),
        }[kind]
        least = min(min(w) for w in windows[key].values())
        label = (
            f"fleet: steps/s, {workers} worker{'s' if workers > 1 else ''}, {what}; "
            f"≥ {least:,} of {steps:,} steps in the window"
        )
        b.static(key, label, {t: harness.summarise(r, "steps/s") for t, r in rates[key].items()})
    b.extra["fleet_windows"] = windows
    b.extra["fleet_steps"] = steps
    low = [f"{k} {t}" for k, v in windows.items() for t, w in v.items() if min(w) < 1000]
    if low and not b.args.quick:
        b.say(f"  note: fewer than 1,000 steps in the window of {', '.join(low)}")


def _order(key: str) -> tuple[int, int]:
    kind, workers = key.split("@")
    return (("fleet-fs", "fleet-pg", "fleet-inproc").index(kind), int(workers))


__all__ = ["WORKERS", "Window", "run_fleet", "run_workers", "uwf_inprocess_agent"]
