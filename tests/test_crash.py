"""Crash consistency: SIGKILL ``uwf`` (and its agent) at random moments, then check everything.

Every kill is followed by ``crashkit.check_invariants`` (files parse, heads exist, chains are
linear, no thread active and archived, ``cas verify`` passes, no lock left behind) and by a
``thread step`` that must succeed and extend the chain from the head the files record.

Moments are drawn from three mixes so that all phases get hit: the first 50 ms of the process,
anywhere in its run (before, while and after the agent runs), and just after the k-th durable
write of the uwf process or its agent (the agent writes its nodes, uwf moves the head and may
archive). Each test runs a few kills in the default run and its full count in the stress tier
(``pytest -m stress``); ``UWF_LONG=1`` raises the full counts (docs/reliability.md).
The seed is printed and attached to a failure (``UWF_CRASH_SEED=<n>`` replays it).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import statistics
import time
from collections import Counter
from pathlib import Path

import crashkit
from rootfiles import RootFiles, open_store
from support import EXAMPLES, pid_alive, spawn_uwf, tiers, wait_dead
from uwf.protocol import schemas

STEP_KILLS = crashkit.scaled(22, 130)
PACK_KILLS = crashkit.scaled(6, 60)
AGENT_KILLS = crashkit.scaled(4, 20)
WRITE_KILLS = crashkit.scaled(14, 60)
AGENT_SLEEP = 0.1  # seconds each killed step's agent runs (plus its start-up)
POOL = 3  # active threads kept around


def _put(path: Path) -> str:
    r = crashkit.cli("workflow", "put", str(path))
    assert r.code == 0, r.err
    return str(r.json()["hash"])


def _start(prompt: str, max_rounds: int | None = None) -> str:
    extra = ["--max-rounds", str(max_rounds)] if max_rounds else []
    r = crashkit.cli("thread", "start", "solve-issue", "-p", prompt, *extra)
    assert r.code == 0, r.err
    return str(r.json()["thread"])


def _refill(root: Path, rng: random.Random) -> None:
    """Keep POOL active threads, some of them with a small maxRounds (so steps archive)."""
    while len(RootFiles(root).active()) < POOL:
        _start(f"task {rng.randrange(1 << 30)}", rng.choice([None, None, 2, 3]))


def _head_anywhere(world: crashkit.World, thread: str) -> str:
    if thread in world.active:
        return world.active[thread]
    return str(world.archived[thread]["head"])


def _report(name: str, stats: Counter[str], began: float) -> None:
    print(f"{name}: {dict(sorted(stats.items()))} in {time.monotonic() - began:.1f}s")


@tiers("kills", 6, STEP_KILLS)
def test_sigkill_thread_step_at_random_moments(root: Path, tmp_path: Path, kills: int) -> None:
    """Kill ``thread step`` before, while and after its agent runs and during the writes.

    After each kill: the head is the old one or a StepNode whose prev is the old one; if the
    agent outlived uwf (it runs in its own session), the head did not move; the next step
    continues from the recorded head.
    """
    began = time.monotonic()
    agent, marker = crashkit.marker_agent(tmp_path, crashkit.loop_roles(AGENT_SLEEP))
    fast = crashkit.write_scenario(tmp_path / "fast.yaml", crashkit.loop_roles())
    _put(EXAMPLES / "solve-issue.yaml")
    stats: Counter[str] = Counter()
    durations: list[float] = []
    with crashkit.seeded("step kills") as rng:
        _refill(root, rng)
        calibrate = sorted(RootFiles(root).active())[0]
        t0 = time.monotonic()
        assert crashkit.finish(spawn_uwf("thread", "step", calibrate, "--agent", agent)).code == 0
        durations.append(time.monotonic() - t0)

        for _ in range(kills * 4):
            if stats["kills"] >= kills:
                break
            thread = rng.choice(sorted(RootFiles(root).active()))
            before = RootFiles(root).head(thread)
            assert before is not None
            baseline = crashkit.write_signature(root)
            d = statistics.median(durations)
            mix = rng.random()
            t0 = time.monotonic()
            proc = spawn_uwf("thread", "step", thread, "--agent", agent)
            if mix < 0.1:
                res = crashkit.kill_after(proc, rng.uniform(0, 0.05))
            elif mix < 0.5:
                res = crashkit.kill_after(proc, rng.uniform(0, d))
            else:  # the agent's pack (its index, then its records) and type-index lines,
                # then uwf's head move (and archive)
                writes = rng.choice([0, 1, 2, 2, 3, 4])
                jitter = rng.uniform(0, rng.choice([0.003, 0.04]))
                res = crashkit.kill_after_writes(proc, root, writes, jitter, baseline)
            pids = crashkit.marker_pids(marker, proc.pid)
            if res.code != -signal.SIGKILL:  # it finished first: a whole step, not a kill
                assert res.code == 0, res.err
                durations.append(time.monotonic() - t0)
                stats["finished before the kill"] += 1
                continue
            stats["kills"] += 1
            orphan = bool(pids) and pid_alive(pids[0])
            if not pids:
                stats["killed before the agent started"] += 1
            elif orphan:
                stats["killed while the agent ran"] += 1
                # the lock died with uwf although its agent still runs
                with RootFiles(root).hold_step(thread):
                    pass
                wait_dead(pids[0])
            else:
                stats["killed after the agent exited"] += 1

            world = crashkit.check_invariants(root)
            after = _head_anywhere(world, thread)
            if after != before:
                assert not orphan, "the head moved although uwf never read the agent's answer"
                node = crashkit.step_node(root, after)
                if crashkit.depth(root, before) == 0:
                    assert (node["prev"], node["start"]) == (None, before), (before, node)
                else:
                    assert node["prev"] == before, (before, node)
                stats["head moved before the kill"] += 1
            if thread in world.archived:
                stats["thread archived by the killed step"] += 1
            if world.leftover == thread:
                stats["killed between the two writes of an archive"] += 1
            stats["temp files left"] = world.temp_files

            target = thread if thread in world.active else None
            _refill(root, rng)
            target = target or rng.choice(sorted(RootFiles(root).active()))
            crashkit.assert_continues(root, target, fast)
            _refill(root, rng)
        _report("step kills", stats, began)
    assert stats["kills"] >= kills
    if crashkit.LONG:  # enough kills that every phase must have been hit
        for phase in ("before the agent started", "while the agent ran", "after the agent exited"):
            assert stats[f"killed {phase}"] > 0, stats


@tiers("kills", 2, AGENT_KILLS)
def test_sigkill_of_the_agent_process_group(root: Path, tmp_path: Path, kills: int) -> None:
    """Killing the agent's group alone fails the step with the agent's exit code, cleanly."""
    began = time.monotonic()
    agent, marker = crashkit.marker_agent(tmp_path, crashkit.loop_roles(AGENT_SLEEP))
    fast = crashkit.write_scenario(tmp_path / "fast.yaml", crashkit.loop_roles())
    _put(EXAMPLES / "solve-issue.yaml")
    stats: Counter[str] = Counter()
    with crashkit.seeded("agent kills") as rng:
        _refill(root, rng)
        for _ in range(kills * 4):
            if stats["kills"] >= kills:
                break
            thread = rng.choice(sorted(RootFiles(root).active()))
            before = RootFiles(root).head(thread)
            proc = spawn_uwf("thread", "step", thread, "--agent", agent)
            deadline = time.monotonic() + 30
            while not crashkit.marker_pids(marker, proc.pid):
                assert proc.poll() is None and time.monotonic() < deadline, "agent never started"
                time.sleep(0.001)
            (pid,) = crashkit.marker_pids(marker, proc.pid)
            time.sleep(rng.uniform(0, AGENT_SLEEP + 0.25))  # start-up, sleep, node writes
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            res = crashkit.finish(proc)
            if res.code == 0:
                stats["agent finished before the kill"] += 1
            else:
                stats["kills"] += 1
                assert res.code == 5  # the agent failed (docs/errors.md, "Exit codes")
                assert res.err == f"error: agent command failed ({agent}) with exit code -9\n"
                assert RootFiles(root).head(thread) == before
            world = crashkit.check_invariants(root)
            stats["temp files left"] = world.temp_files
            _refill(root, rng)
            crashkit.assert_continues(root, rng.choice(sorted(RootFiles(root).active())), fast)
            _refill(root, rng)
        _report("agent kills", stats, began)
    assert stats["kills"] >= kills


def test_uwf_killed_while_its_agent_runs_takes_the_agent_with_it(
    root: Path, tmp_path: Path
) -> None:
    """The agent runs in its own session, so a signal to uwf's group does not reach it; uwf's
    watchdog process does: SIGKILL of uwf kills the agent too (no orphan in the
    process table). The lock is free at once, the head does not move, and the next step runs
    the role again."""
    agent, marker = crashkit.marker_agent(tmp_path, crashkit.loop_roles(0.6))
    _put(EXAMPLES / "solve-issue.yaml")
    thread = _start("orphan")
    start = RootFiles(root).head(thread)
    proc = spawn_uwf("thread", "step", thread, "--agent", agent)
    while not crashkit.marker_pids(marker, proc.pid):
        time.sleep(0.001)
    (pid,) = crashkit.marker_pids(marker, proc.pid)
    res = crashkit.sigkill(proc)
    assert res.code == -signal.SIGKILL
    wait_dead(pid, timeout=2)  # the watchdog killed the agent's group
    with RootFiles(root).hold_step(thread):
        pass  # the step lock died with uwf

    crashkit.check_invariants(root)
    assert RootFiles(root).head(thread) == start
    out = crashkit.assert_continues(root, thread, agent)
    assert out["role"] == "planner"


@tiers("kills", 5, WRITE_KILLS)
def test_sigkill_workflow_put_kill_fork_start_at_random_moments(
    root: Path, tmp_path: Path, kills: int
) -> None:
    """Kill the commands that only write state. After each kill the command either happened
    or did not (registry entry old or new; thread active or archived with its head; a new
    thread whole or absent), and the next step continues."""
    began = time.monotonic()
    fast = crashkit.write_scenario(tmp_path / "fast.yaml", crashkit.loop_roles())
    text = (EXAMPLES / "solve-issue.yaml").read_text()
    versions = []
    for i in range(2):
        path = tmp_path / f"v{i}" / "solve-issue.yaml"
        path.parent.mkdir()
        path.write_text(text.replace("End-to-end issue resolution", f"Version {i}"))
        versions.append(path)
    hashes = [_put(p) for p in versions]
    stats: Counter[str] = Counter()
    durations: dict[str, list[float]] = {}
    with crashkit.seeded("write kills") as rng:
        _refill(root, rng)
        for _ in range(kills * 5):
            if stats["kills"] >= kills:
                break
            active = RootFiles(root).active()
            registry = RootFiles(root).registry.read()
            op = rng.choice(["put", "kill", "fork", "start"])
            thread = rng.choice(sorted(active))
            if op == "put":
                which = rng.randrange(2)
                args: tuple[str, ...] = ("workflow", "put", str(versions[which]))
            elif op == "kill":
                args = ("thread", "kill", thread)
            elif op == "fork":
                args = ("thread", "fork", active[thread])
            else:
                args = ("thread", "start", "solve-issue", "-p", "started under fire")
            baseline = crashkit.write_signature(root)
            d = statistics.median(durations.get(op) or [0.3])
            mix = rng.random()
            t0 = time.monotonic()
            proc = spawn_uwf(*args)
            if mix < 0.2:
                res = crashkit.kill_after(proc, rng.uniform(0, 0.05))
            elif mix < 0.5:
                res = crashkit.kill_after(proc, rng.uniform(0, d))
            else:
                res = crashkit.kill_after_writes(
                    proc, root, rng.randrange(3), rng.uniform(0, 0.002), baseline
                )
            if res.code != -signal.SIGKILL:
                assert res.code == 0, res.err
                durations.setdefault(op, []).append(time.monotonic() - t0)
                stats["finished before the kill"] += 1
            else:
                stats["kills"] += 1
                stats[f"kills of {op}"] += 1
            world = crashkit.check_invariants(root)
            stats["temp files left"] = world.temp_files
            new = sorted(set(world.active) - set(active))
            happened = False
            if op == "put":
                assert world.registry["solve-issue"] in (registry["solve-issue"], hashes[which])
                happened = world.registry["solve-issue"] != registry["solve-issue"]
                assert not new
            elif op == "kill":
                assert not new
                if thread in world.archived:
                    entry = world.archived[thread]
                    assert (entry["status"], entry["head"]) == ("killed", active[thread])
                    happened = True
                else:
                    assert world.active[thread] == active[thread]
            else:
                assert len(new) <= 1 and set(active) <= set(world.active)
                happened = bool(new)
                if new and op == "fork":
                    assert world.active[new[0]] == active[thread]
                if new and op == "start":
                    assert crashkit.depth(root, world.active[new[0]]) == 0
            if res.code == -signal.SIGKILL:
                stats[
                    f"killed {op} that had taken effect" if happened else f"killed {op} early"
                ] += 1
            _refill(root, rng)
            target = new[0] if new else rng.choice(sorted(RootFiles(root).active()))
            crashkit.assert_continues(root, target, fast)
        _report("write kills", stats, began)
    assert stats["kills"] >= kills


def _fill(root: Path, rng: random.Random, count: int) -> list[str]:
    """``count`` new loose Text nodes (fsync skipped: the files are the same)."""
    from unittest import mock

    store = open_store(root)
    with mock.patch("os.fsync", lambda fd: None):
        text = schemas.ensure(store).text
        return [store.put(text, f"filler {rng.randrange(1 << 60)}") for _ in range(count)]


def _pack_files(root: Path) -> list[str]:
    try:
        return sorted(os.listdir(root / "cas" / "packs"))
    except FileNotFoundError:
        return []


@tiers("kills", 2, PACK_KILLS)
def test_sigkill_cas_pack_and_gc_at_random_moments(root: Path, tmp_path: Path, kills: int) -> None:
    """Kill ``cas pack`` and ``cas gc`` (which packs what survives) while they write a pack,
    remove the packed loose files or remove the packs a merge replaced: every node stays
    readable (gc's default grace keeps every young node), the store verifies, the next pack
    cleans up after the killed one, and threads step on."""
    began = time.monotonic()
    fast = crashkit.write_scenario(tmp_path / "fast.yaml", crashkit.loop_roles())
    _put(EXAMPLES / "solve-issue.yaml")
    stats: Counter[str] = Counter()
    durations: list[float] = [0.5]
    with crashkit.seeded("pack kills") as rng:
        _refill(root, rng)
        for _ in range(kills * 4):
            if stats["kills"] >= kills:
                break
            _fill(root, rng, rng.randrange(200, 600))
            if rng.random() < 0.3:  # a second pack, so that the next gc merges and removes
                assert crashkit.cli("cas", "pack").code == 0
                _fill(root, rng, 50)
            before = set(open_store(root).iter_hashes())
            files = _pack_files(root)
            args = ("cas", "pack") if rng.random() < 0.6 else ("cas", "gc")
            mix = rng.random()
            t0 = time.monotonic()
            proc = spawn_uwf(*args)
            if mix < 0.3:
                res = crashkit.kill_after(proc, rng.uniform(0, statistics.median(durations)))
            elif mix < 0.6:  # while the pack is written
                res = crashkit.kill_when(
                    proc,
                    lambda: any(f.startswith(".tmp-") for f in _pack_files(root)),
                    rng.uniform(0, 0.01),
                )
            else:  # once the new pack is there: removing loose files, then replaced packs

                def new_index(files: list[str] = files) -> bool:
                    return any(f.endswith(".idx") and f not in files for f in _pack_files(root))

                res = crashkit.kill_when(proc, new_index, rng.uniform(0, rng.choice([0.005, 0.05])))
            if res.code != -signal.SIGKILL:
                assert res.code == 0, res.err
                durations.append(time.monotonic() - t0)
                stats["finished before the kill"] += 1
                continue
            stats["kills"] += 1
            stats[f"kills of {args[1]}"] += 1
            leftovers = [f for f in _pack_files(root) if f.startswith(".tmp-")]
            stats["kills that left temp files"] += bool(leftovers)
            crashkit.check_invariants(root)
            store = open_store(root)
            missing = [h for h in before if store.get(h) is None]
            assert not missing, f"{len(missing)} nodes lost, e.g. {missing[:3]}"
            out = crashkit.cli("cas", "pack")
            assert out.code == 0, out.err
            left = _pack_files(root)
            assert not [f for f in left if f.startswith(".tmp-")]
            assert {f[:-5] for f in left if f.endswith(".pack")} == {
                f[:-4] for f in left if f.endswith(".idx")
            }  # no records whose index never came
            assert set(open_store(root).iter_hashes()) >= before
            crashkit.assert_continues(root, rng.choice(sorted(RootFiles(root).active())), fast)
        _report("pack kills", stats, began)
    assert stats["kills"] >= kills
