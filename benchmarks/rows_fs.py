"""The rows on one machine's disk: uwf's filesystem store beside LangGraph's and Burr's SQLite.

Sections (docs/performance.md): start-up, reads, steps, forks, store size, disk per step,
warm. Every row with a peer does the same work on every side and checks every side's
result against ``workload.py`` or the built chain (``bench.expect_*``).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import harness
import mock_agent
import uwf_bench
import workload
from bench import (
    HERE,
    PEER_NAMES,
    Bench,
    Check,
    Peer,
    Row,
    expect_history,
    expect_state,
    fail,
    n,
    peer_history,
    peer_pythons,
    task_of,
    uwf_history,
)
from harness import Fig, Job, Usage, tree_usage

from uwf.backend.fs import FsBackend
from uwf.util.base32 import NodeHash

# -- build ------------------------------------------------------------------------------------


def build(b: Bench) -> None:
    s = b.s
    b.say(
        f"building uwf roots: threads of {s.small}, {n(s.mid)} and {n(s.large)} steps; "
        f"{n(s.threads_small)} and {n(s.threads_large)} active threads …"
    )
    b.tr = uwf_bench.build_threads_root(b.work / "uwf-threads", s.small, s.mid, s.large)
    b.list_small = b.work / "uwf-list-small"
    b.list_large = b.work / "uwf-list-large"
    t1 = uwf_bench.build_list_root(b.list_small, s.threads_small)
    t2 = uwf_bench.build_list_root(b.list_large, s.threads_large)
    b.say(f"  built in {b.tr.seconds:.1f} s + {t1:.1f} s + {t2:.1f} s")
    b.cas = uwf_bench.setup_cas_root(b.work / "uwf-cas")
    took = uwf_bench.fill(b.cas.root, 0, s.nodes_small)
    b.say(f"  uwf cas root: {n(s.nodes_small)} filler nodes in {took:.1f} s")
    b.counts = {"uwf": {"small": s.small, "large": s.large}}
    pythons = {} if b.args.no_peers else peer_pythons(b.args)
    if not pythons:
        b.say("peers: skipped (--no-peers or no --peer NAME=PYTHON)")
        return
    for name in PEER_NAMES:
        if name not in pythons:
            continue
        home = b.work / name.lower()
        home.mkdir()
        peer = Peer(name, pythons[name], home, str(home / "threads.db"), str(home / "list.db"))
        b.say(f"building {name}: threads of {s.small}, {n(s.mid)}, {n(s.large)} steps …")
        sizes = ("--small", str(s.small), "--mid", str(s.mid), "--large", str(s.large))
        window = ("--window", str(max(1, s.large // 10)))
        built = peer.call("build", *sizes, *window, "--at", str(s.large // 2))
        peer.known = built["checkpoint"]
        b.extra[f"{name}.bytes"] = built["bytes"]
        listed = peer.call(
            "build-list",
            *("--count", str(s.threads_large), "--copy-at", str(s.threads_small)),
            *("--copy-db", peer.list_small_db),
            db=peer.list_db,
        )
        b.say(f"  built in {built['seconds']:.1f} s + {listed['seconds']:.1f} s")
        b.peers[name] = peer
        b.counts[name] = {"small": s.small, "large": s.large}


# -- helpers ----------------------------------------------------------------------------------


def uwf_job(b: Bench, root: Path, *args: str) -> Job:
    return Job(uwf_bench.uwf(*args), uwf_bench.cli_env(root), b.cwd)


def shows_step(b: Bench, head: str, steps: int) -> Check:
    def check(out: str) -> None:
        got = json.loads(out)
        if got["steps"] != steps or got["head"] != head:
            fail(f"thread show: {got['steps']} steps at {got['head']}, not {steps} at {head}")

    return check


def stepped(b: Bench, root: Path, size: str) -> Check:
    """uwf's step printed the new head: its answer is the next one of the thread."""

    def check(out: str) -> None:
        got = json.loads(out)
        step = b.counts["uwf"][size] + 1
        store = FsBackend(root).nodes
        node = store.require(got["head"]).payload
        role = workload.role_at(step)
        if got["role"] != role or node["depth"] != step:
            fail(f"uwf's step is {got['role']} at depth {node['depth']}, not {role} at {step}")
        if store.require(node["output"]).payload != workload.fields(task_of(size), role, step):
            fail(f"uwf's step {step} of the {size} thread does not hold the expected answer")

    return check


def peer_stepped(b: Bench, name: str, size: str) -> Check:
    def check(out: str) -> None:
        expect_state(task_of(size), b.counts[name][size] + 1)(out)

    return check


def advance(b: Bench, size: str, tools: Any) -> None:
    """A step row ran ``repeat + 1`` steps of the thread on each tool."""
    for tool in tools:
        b.counts[tool][size] += b.s.repeat + 1


# -- start-up ---------------------------------------------------------------------------------


def startup(b: Bench) -> None:
    """The interpreter, Typer's import (plain and frozen), start-up without work and the
    10- and the long ``thread show``, timed interleaved run by run (the start-up targets and
    "show at 10,000 vs 10 steps" are ratios between rows)."""
    s, tr = b.s, b.tr
    b.section = "start"
    env = dict(os.environ)
    py_jobs: dict[str, Job] = {"uwf": Job([sys.executable, "-c", "pass"], env, b.cwd)}
    for name, p in b.peers.items():
        py_jobs[name] = Job([str(p.python), "-c", "pass"], p.env, b.cwd)
    typer = Job([sys.executable, "-c", "import typer"], env, b.cwd)
    frozen = Job([sys.executable, "-c", "import typer, gc; gc.freeze()"], env, b.cwd)
    rows: list[Row] = [
        ("python", "interpreter start (python -c pass)", py_jobs, None),
        ("typer", 'Typer import (python -c "import typer")', {"uwf": typer}, None),
        (
            "typer-frozen",
            'Typer import, frozen (python -c "import typer, gc; gc.freeze()"): the baseline',
            {"uwf": frozen},
            None,
        ),
        (
            "help",
            "start-up without work (uwf --help; peers: importing what a step imports)",
            {"uwf": uwf_job(b, tr.root, "--help")} | b.peer_jobs("import"),
            None,
        ),
        show_row(b, "small", s.small),
        show_row(b, "large", s.large),  # a target compares it with the 10-step show
    ]
    b.no_ratio.update({"python", "help"})  # the same interpreter, but different imports
    b.sections["show@large"] = "read"
    b.timed_together(rows)


def show_row(b: Bench, size: str, steps: int) -> Row:
    tr = b.tr
    checks: dict[str, Check] = {"uwf": shows_step(b, tr.steps[size][-1], steps)}
    checks |= {name: expect_state(task_of(size), steps) for name in b.peers}
    label = f"latest state (uwf thread show), {n(steps)}-step thread"
    return thread_row(b, f"show@{size}", label, size, "show", checks)


def thread_row(b: Bench, key: str, label: str, size: str, op: str, checks: dict[str, Check]) -> Row:
    """A row of one thread of the threads root: ``uwf thread OP <thread>`` beside each peer's
    ``OP --thread SIZE`` (the peers name their operations as uwf's subcommands)."""
    uwf = uwf_job(b, b.tr.root, "thread", "steps" if op == "history" else op, b.tr.threads[size])
    return (key, label, {"uwf": uwf} | b.peer_jobs(op, "--thread", size), checks)


# -- reads ------------------------------------------------------------------------------------


def reads(b: Bench) -> None:
    s, tr = b.s, b.tr
    b.section = "read"
    read_rows: list[Row] = []
    for size, steps in (("small", s.small), ("large", s.large)):

        def has_last(out: str, steps: int = steps) -> None:
            if f"## Step {steps}:" not in out:
                fail(f"thread read does not show step {steps}")

        read_rows.append(
            (
                f"read@{size}",
                f"uwf thread read (default quota), {n(steps)}-step thread",
                {"uwf": uwf_job(b, tr.root, "thread", "read", tr.threads[size])},
                {"uwf": has_last},
            )
        )
    b.timed_together(read_rows)
    history(b, "-loose", "loose files, before any cas pack")
    pack(b)
    history(b, "", "packed")
    for key, root, count, db in (
        ("list@small", b.list_small, s.threads_small, "list_small_db"),
        ("list@large", b.list_large, s.threads_large, "list_db"),
    ):

        def listed(out: str, count: int = count) -> None:
            got = json.loads(out)
            got = len(got) if isinstance(got, list) else got["count"]
            if got != count:
                fail(f"thread list gave {got} threads, not {count}")

        b.timed(
            key,
            f"thread list, {n(count)} active threads",
            {"uwf": uwf_job(b, root, "thread", "list")} | b.peer_jobs("list", db=db),
            dict.fromkeys(("uwf", *b.peers), listed),
        )
    verify(b)


def history(b: Bench, suffix: str, state: str) -> None:
    """Full history of the mid and the long thread, timed interleaved, every side."""
    s = b.s
    rows: list[Row] = []
    for size, steps in (("mid", s.mid), ("large", s.large)):
        checks = {"uwf": expect_history(task_of(size), steps, uwf_history)}
        checks |= {p: expect_history(task_of(size), steps, peer_history) for p in b.peers}
        label = f"full history (uwf thread steps), {n(steps)}-step thread, uwf's store {state}"
        rows.append(thread_row(b, f"history@{size}{suffix}", label, size, "history", checks))
    b.timed_together(rows)


def pack(b: Bench) -> None:
    """``uwf cas pack`` of the threads root (one cold run, timed): every later row reads it
    packed."""
    job = uwf_job(b, b.tr.root, "cas", "pack")
    t0 = time.perf_counter()
    report = json.loads(harness.run(job.argv, job.env, job.cwd))
    took = (time.perf_counter() - t0) * 1000
    b.static(
        "pack",
        f"uwf cas pack: {n(report['packed'])} loose nodes into one pack (one run)",
        {"uwf": Fig(took, "ms")},
    )


def verify(b: Bench) -> None:
    """cas verify: the time on the threads root and on the small cas root; the rate is the
    marginal one (extra nodes / extra time), so that the start-up does not dilute it."""
    scanned: dict[str, int] = {}

    def verified(name: str) -> Check:
        def check(out: str) -> None:
            report = json.loads(out)
            if not report["ok"]:
                fail(f"cas verify found damage: {report['damaged'][:2]}")
            scanned[name] = report["scanned"]

        return check

    timed = b.timed_together(  # the rate divides their difference: interleaved
        [
            (
                "verify-base",
                "uwf cas verify, the small store",
                {"uwf": uwf_job(b, b.cas.root, "cas", "verify")},
                {"uwf": verified("base")},
            ),
            (
                "verify-time",
                "uwf cas verify, the threads' store",
                {"uwf": uwf_job(b, b.tr.root, "cas", "verify")},
                {"uwf": verified("full")},
            ),
        ]
    )
    base, full = timed["verify-base"]["uwf"], timed["verify-time"]["uwf"]
    extra_nodes = scanned["full"] - scanned["base"]
    extra_ms = full.value - base.value
    rate = extra_nodes / (extra_ms / 1000) if extra_nodes > 0 and extra_ms > 0 else 0.0
    label = (
        f"uwf cas verify rate ({n(extra_nodes)} more nodes than a "
        f"{n(scanned['base'])}-node store / the extra time)"
    )
    b.static("verify", label, {"uwf": Fig(rate, "nodes/s", max(full.spread, base.spread))})


# -- steps ------------------------------------------------------------------------------------


def steps(b: Bench) -> None:
    """A cold step on each tool; then one whose agent is an external process everywhere."""
    s, tr = b.s, b.tr
    b.section = "step"
    rows: list[Row] = []
    for size, count in (("small", s.small), ("large", s.large)):
        checks: dict[str, Check] = {"uwf": stepped(b, tr.root, size)}
        checks |= {name: peer_stepped(b, name, size) for name in b.peers}
        label = f"cold process, one step, {n(count)}-step thread (uwf: thread step + its agent)"
        rows.append(thread_row(b, f"step@{size}", label, size, "step", checks))
    b.timed_together(rows)  # a target compares them: interleaved
    for size in ("small", "large"):
        advance(b, size, ("uwf", *b.peers))
    agent = uwf_bench.EXTERNAL  # python: uwf-cmd, config.yaml's alias (uwf_bench.setup_root)
    checks = {"uwf": stepped(b, tr.root, "small")}
    checks |= {name: peer_stepped(b, name, "small") for name in b.peers}
    b.timed(
        "ext-step@small",
        "cold process, one step, its agent an external program (uwf: thread step running "
        "uwf-cmd in its process + agent.py; peers: a node running agent.py)",
        {"uwf": uwf_job(b, tr.root, "thread", "step", tr.threads["small"], "--agent", agent)}
        | b.peer_jobs("step", "--thread", "small", "--external", "--agent-python", sys.executable),
        checks,
    )
    advance(b, "small", ("uwf", *b.peers))
    inprocess_step(b)
    limit_check(b)


# The benchmark's agent as a Python agent: what the in-process fleet rows run too.
INPROCESS_AGENT = mock_agent.REFERENCE


def inprocess_step(b: Bench) -> None:
    """A cold step whose agent runs in the stepping process: one process on every side, as a
    peer's cold step always is (its node runs in its process), so this row compares the same
    work; the ``step@`` rows add the agent's own process on uwf's side."""
    tr = b.tr
    argv = uwf_bench.uwf("thread", "step", tr.threads["small"], "--agent", INPROCESS_AGENT)
    job = Job(argv, mock_agent.importable(uwf_bench.cli_env(tr.root)), b.cwd)
    checks = {"uwf": stepped(b, tr.root, "small")}
    checks |= {name: peer_stepped(b, name, "small") for name in b.peers}
    b.timed(
        "step-inproc@small",
        f"cold process, one step, {n(b.s.small)}-step thread, one process on every side (uwf: "
        f"thread step, its agent in process: --agent {INPROCESS_AGENT})",
        {"uwf": job} | b.peer_jobs("step", "--thread", "small"),
        checks,
    )
    advance(b, "small", ("uwf", *b.peers))


LIMITS = "limits:\n  agents:\n    mock: {concurrency: 4, perMinute: 1000000}\n"


def limit_check(b: Bench) -> None:
    """The fleet limits' check (docs/format.md, "Limits"): the same cold step in two roots of
    one thread each, one whose config.yaml caps the agent alias (a slot ``flock`` and the
    minute's starts file per step), one without; interleaved, uwf only."""
    rows: list[Row] = []
    for key, root, thread, limited in limit_roots(b):
        what = "a `limits:` entry for its agent" if limited else "no `limits:`"
        label = f"cold process, one step, config.yaml with {what} (uwf: thread step + its agent)"
        job = uwf_job(b, root, "thread", "step", thread)
        rows.append((f"{key}@small", label, {"uwf": job}, {"uwf": limit_stepped(root, limited)}))
    b.timed_together(rows)


def limit_roots(b: Bench) -> list[tuple[str, Path, str, bool]]:
    """The roots of the limit rows (built once): key, root, its one thread, limited."""
    roots: list[tuple[str, Path, str, bool]] = []
    for key, limited in (("step-unlimited", False), ("step-limited", True)):
        root = b.work / f"uwf-{key}"
        if not root.exists():
            uwf_bench.build_list_root(root, 1)
            if limited:
                with (root / "config.yaml").open("a", encoding="utf-8") as config:
                    config.write(LIMITS)
        roots.append((key, root, FsBackend(root).threads.active()[0].thread, limited))
    return roots


def limit_stepped(root: Path, limited: bool) -> Check:
    """The step landed, and took its limit's slot exactly when configured to."""

    def check(out: str) -> None:
        got = json.loads(out)
        if got["done"] or not got["role"]:
            fail(f"the step of {root.name} did not land: {out[:200]}")
        counted = any((root / "locks").glob("limit-*.starts"))
        if counted != limited:
            fail(f"{root.name}: the limit was {'not ' if limited else ''}checked")

    return check


# -- forks ------------------------------------------------------------------------------------


def forks(b: Bench) -> None:
    """Forks, after every row that reads or steps the long thread (LangGraph's fork adds a
    checkpoint to the thread it forks)."""
    s, tr = b.s, b.tr
    b.section = "fork"
    chain = tr.steps["large"]
    half = s.large // 2
    thread = tr.threads["large"]

    def forked_from(h: str) -> Check:
        def check(out: str) -> None:
            if json.loads(out)["forkedFrom"]["step"] != h:
                fail(f"uwf forked from {out.strip()}, not {h}")

        return check

    peer_checks = {name: expect_state(task_of("large"), half) for name in b.peers}
    # the step index is this machine's cache: the first find after steps walks them once
    shutil.rmtree(tr.root / "cache" / "steps", ignore_errors=True)
    job = uwf_job(b, tr.root, "thread", "steps", thread, "--at", str(half))
    first = harness.once_ms(job.argv, job.env, job.cwd)
    b.static(
        "find-first@half",
        f"uwf thread steps --at {n(half)}, the first find in a {n(s.large)}-step thread "
        "(walks the chain once; one run)",
        {"uwf": Fig(first, "ms")},
    )
    b.timed(
        "find-fork@half",
        f"find step {n(half)} of {n(s.large)} by its number, and fork there "
        "(uwf thread fork <thread> --at N)",
        {"uwf": uwf_job(b, tr.root, "thread", "fork", thread, "--at", str(half))}
        | b.peer_jobs("find-fork", "--thread", "large", "--at", str(half)),
        {"uwf": forked_from(chain[half - 1]), **peer_checks},
    )
    b.timed(
        "fork-known@half",
        f"fork at step {n(half)} of {n(s.large)}, its id known (uwf: a StepNode hash; "
        "LangGraph: a checkpoint id; Burr: a sequence id)",
        {"uwf": uwf_job(b, tr.root, "thread", "fork", chain[half - 1])}
        | {
            name: p.job("fork", "--thread", "large", "--checkpoint", p.known)
            for name, p in b.peers.items()
        },
        {"uwf": forked_from(chain[half - 1]), **peer_checks},
    )
    for key, at in (("fork@1", 1), ("fork@end", s.large)):
        b.timed(
            key,
            f"uwf thread fork at step {n(at)} of {n(s.large)}, hash known",
            {"uwf": uwf_job(b, tr.root, "thread", "fork", chain[at - 1])},
            {"uwf": forked_from(chain[at - 1])},
        )
    cas_before = tree_usage(tr.root / "cas")
    harness.run(uwf_bench.uwf("thread", "fork", chain[half - 1]), uwf_bench.cli_env(tr.root), b.cwd)
    copied = {"uwf": Fig(float((tree_usage(tr.root / "cas") - cas_before).apparent), "B")}
    if "LangGraph" in b.peers:
        out = b.peers["LangGraph"].call("fork-bytes", "--thread", "large", "--at", str(half))
        copied["LangGraph"] = Fig(float(out["bytes"]), "B")
    if "Burr" in b.peers:
        copied["Burr"] = Fig(0.0, "B")  # nothing is persisted before the fork's first step
    b.static(
        "fork-bytes",
        "fork: bytes written to the store (uwf: CAS growth; LangGraph: its new checkpoint rows; "
        "Burr: nothing until the fork's first step)",
        copied,
        ratio=False,  # different work: Burr writes nothing until the fork's first step
    )


# -- the store's size -------------------------------------------------------------------------


def store_size(b: Bench) -> None:
    """``cas get`` and ``workflow show`` with few and with many nodes, loose and packed: a
    root of each size, so that the two sizes are timed interleaved (targets compare them)."""
    s, cas = b.s, b.cas
    b.section = "store"
    b.say(f"  a second store of {n(s.nodes_large)} nodes …")
    large = uwf_bench.setup_cas_root(b.work / "uwf-cas-large")
    took = uwf_bench.fill(large.root, 0, s.nodes_large)
    b.say(f"  filled in {took:.1f} s")
    roots = {"small": (cas, s.nodes_small), "large": (large, s.nodes_large)}
    _store_rows(b, "", "in the store", roots)
    packed = {}
    for size, count in (("small", s.nodes_small), ("large", s.nodes_large)):
        root = b.work / f"uwf-cas-packed-{size}"
        packed[size] = (uwf_bench.setup_cas_root(root), count)
        took = uwf_bench.fill_packed(root, count)
        b.say(f"  packed store of {n(count)} filler nodes built in {took:.1f} s")
    _store_rows(b, "-packed", "in one pack", packed)


def _store_rows(
    b: Bench, suffix: str, where: str, roots: dict[str, tuple[uwf_bench.CasRoot, int]]
) -> None:
    for command, key, args in (
        ("cas get", "casget", lambda c: ("cas", "get", c.text_hash)),
        ("workflow show", "wfshow", lambda c: ("workflow", "show", "solve-issue")),
    ):
        b.timed_together(
            [
                (
                    f"{key}{suffix}@{size}",
                    f"uwf {command}, {n(count)} nodes {where}",
                    {"uwf": uwf_job(b, root.root, *args(root))},
                    None,
                )
                for size, (root, count) in roots.items()
            ]
        )


# -- disk per step ----------------------------------------------------------------------------

PARTS: dict[str, Callable[[str], bool]] = {
    "type index": lambda rel: rel.startswith(os.path.join("cas", "index") + os.sep),
    "state files": lambda rel: (
        os.sep not in rel and rel.split(".")[0] in ("threads", "history", "registry")
    ),
    "debug log": lambda rel: rel.startswith("logs" + os.sep),
}


def _files(root: Path) -> dict[str, Usage]:
    """The files of a root beside its nodes: type index, state files, debug log."""
    return {
        part: tree_usage(root, skip=lambda rel, keep=keep: not keep(rel))  # type: ignore[misc]
        for part, keep in PARTS.items()
    }


def _packed_nodes(root: Path, new: set[NodeHash]) -> Usage:
    """What the nodes ``new`` take once packed: each one's share of its block (in proportion
    to its JSON) and its index entry (``NodeInfo.size``); blocks in proportion to what the
    pack's files take on disk."""
    store = FsBackend(root).nodes
    apparent = 0
    for h in new:
        info = store.info(h)
        if info is None or store.loose_bytes(h) is not None:
            fail(f"node {h} is not packed after cas gc")
        assert info is not None
        apparent += info.size
    files = tree_usage(store.pack_dir)
    return Usage(apparent, round(apparent * files.blocks / max(1, files.apparent)), len(new))


def disk(b: Bench) -> None:
    """Every byte a step adds to uwf's storage root — its nodes, the type-index lines, the
    state files' growth, the debug log — over ``window`` real steps (uwf thread step, cold):
    as loose files, and once packed (``cas gc`` packs the whole store into one pack before and
    after: a new node's share of its block and its index entry), with packing's time; beside
    the peers' database growth per step (WAL folded in) while their long thread was built (the
    same writes as a cold step's)."""
    s, tr = b.s, b.tr
    b.section = "disk"
    env = uwf_bench.cli_env(tr.root)
    store = FsBackend(tr.root).nodes
    for part, size in (("early", "small"), ("late", "large")):
        harness.run(uwf_bench.uwf("cas", "gc"), env, b.cwd)
        nodes_before = set(store.iter_hashes())
        before, files_before = tree_usage(tr.root), _files(tr.root)
        for _ in range(s.window):
            harness.run(uwf_bench.uwf("thread", "step", tr.threads[size]), env, b.cwd)
        b.counts["uwf"][size] += s.window
        loose = tree_usage(tr.root) - before
        t0 = time.perf_counter()
        report = json.loads(harness.run(uwf_bench.uwf("cas", "pack"), env, b.cwd))
        pack_ms = (time.perf_counter() - t0) * 1000
        harness.run(uwf_bench.uwf("cas", "gc"), env, b.cwd)
        new = set(store.iter_hashes()) - nodes_before
        grown = {part: _files(tr.root)[part] - files_before[part] for part in PARTS}
        nodes = _packed_nodes(tr.root, new)
        others = Usage()
        for usage in grown.values():
            others = others + Usage(usage.apparent, usage.apparent, 0)  # appended files
        packed = nodes + others
        at = f"steps {n(b.counts['uwf'][size] - s.window)}..{n(b.counts['uwf'][size])}"
        for kind in ("apparent", "blocks"):
            what = "apparent size" if kind == "apparent" else "blocks used"
            peers = {
                name: Fig(float(b.extra[f"{name}.bytes"][part][kind]), "B") for name in b.peers
            }
            b.static(
                f"disk-loose-{part}-{kind}",
                f"bytes per step, uwf's store as the steps leave it (a pack per step, merged "
                f"by the automatic packing), every byte a step adds, {what}, {at}",
                {"uwf": Fig(float(getattr(loose.per(s.window), kind)), "B")} | peers,
            )
            values = {"uwf": Fig(float(getattr(packed.per(s.window), kind)), "B")} | peers
            b.static(
                f"disk-packed-{part}-{kind}",
                f"bytes per step, uwf's nodes packed, every byte a step adds, {what}, {at}",
                values,
            )
        parts = {"nodes": nodes, **grown}
        for name, usage in parts.items():
            b.static(
                f"disk-part-{part}-{name}",
                f"uwf: of which {name}, once packed, apparent, {at}",
                {"uwf": Fig(float(usage.per(s.window).apparent), "B")},
            )
        b.static(
            f"pack-window-{part}",
            f"uwf cas pack of {n(s.window)} steps' loose nodes "
            f"({n(report['packed'])} nodes, one run)",
            {"uwf": Fig(pack_ms, "ms")},
        )


# -- warm -------------------------------------------------------------------------------------


def warm(b: Bench, store: str, key: str, label: str, peer_db: Callable[[Peer], str]) -> None:
    """Steps in one warm process on every side: uwf through its Python API with its agent
    in process (``uwf_warm.py``), the peers' warm loops (``warm``); batches, median of their
    means, spread across batches; in wall time (``key``) and in the process's CPU time
    (``key`` with ``-cpu``)."""
    s = b.s
    sizes = ("--batches", str(s.warm_batches), "--count", str(s.warm_count))
    steps = 1 + s.warm_batches * s.warm_count
    values: dict[str, Fig] = {}
    cpu: dict[str, Fig] = {}
    argv = [sys.executable, str(HERE / "uwf_warm.py"), "steps", "--store", store, *sizes]
    outs = {"uwf": json.loads(harness.run(argv, uwf_bench.cli_env(b.tr.root), b.cwd))}
    for name, p in b.peers.items():
        outs[name] = p.call("warm", *sizes, db=peer_db(p))
    for tool, out in outs.items():  # the last step stored the right answer, on every side
        expect_state(out["task"], steps)(json.dumps(out))
        values[tool] = harness.summarise(out["ms"])
        cpu[tool] = harness.summarise(out["cpu_ms"])
    b.static(key, label, values)
    name, at, where = key.partition("@")
    b.static(f"{name}-cpu{at}{where}", f"{label}, CPU time of the process", cpu)


def warm_rows(b: Bench) -> None:
    b.section = "warm"
    root = b.work / "uwf-warm"
    uwf_bench.setup_root(root)
    warm(
        b,
        str(root),
        "warm@fs",
        "warm process, one step, agent in process (uwf: Python API; peers: their loop), per step",
        lambda p: str(p.dir / "warm.db"),
    )
