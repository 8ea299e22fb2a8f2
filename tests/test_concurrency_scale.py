"""Concurrency at scale: N processes × M steps on distinct threads, with racing steps on the
same threads, forks and kills at the same time; and ``workflow put`` racing on the registry.

Afterwards every thread's chain is exactly the steps that were reported as done on it (none
lost, none extra), every chain is linear, every archived thread has one history line, and the
store verifies. N = 8 and M = 6 in the stress tier (16 and 25 under ``UWF_LONG=1``); 4 and 4 in
the default run.
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import crashkit
from rootfiles import RootFiles
from support import EXAMPLES, spawn_uwf, tiers

N = crashkit.scaled(8, 16)  # processes, one thread each
M = crashkit.scaled(6, 25)  # steps each of them runs
RACERS = crashkit.scaled(12, 80)  # single steps thrown at random threads meanwhile
FORKS = crashkit.scaled(3, 12)
KILLS = crashkit.scaled(2, 4)
FORK_STEPS = 3
PUTTERS = crashkit.scaled(8, 16)
PUT_ROUNDS = crashkit.scaled(1, 3)


@dataclass
class Job:
    kind: str  # main | racer | fork | forked | kill
    thread: str
    proc: subprocess.Popen[str]
    head: str | None = None  # fork: the head it forks
    result: crashkit.Result | None = None


def _allowed_errors(thread: str) -> dict[str, int]:
    """The only ways a step may fail here, with their exit codes: refused as busy (4), or its
    thread was killed (3) before the step, while its agent ran (the agent is stopped), before
    the head moved, or just before its agent started (which then fails, finding no thread:
    still 3, the thread is not active — never 5, which would make a loop retry)."""
    return {
        f"error: thread {thread} is busy": 4,
        f"error: thread not active: {thread} (status: killed)": 3,
        f"error: thread {thread} ended (killed) while its step ran; the agent was stopped": 3,
        f"error: thread {thread} ended (killed) while its step ran; the step was not recorded": 3,
    }


@tiers("size", (4, 4, 6, 2, 1), (N, M, RACERS, FORKS, KILLS))
def test_n_processes_m_steps_with_racing_steps_forks_and_kills(
    root: Path, tmp_path: Path, size: tuple[int, int, int, int, int]
) -> None:
    n, m, racers, forks, kills = size
    began = time.monotonic()
    agent = crashkit.write_scenario(tmp_path / "loop.yaml", crashkit.loop_roles())
    assert crashkit.cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
    threads = [
        crashkit.cli("thread", "start", "solve-issue", "-p", f"task {i}").json()["thread"]
        for i in range(n)
    ]
    starts = {t: RootFiles(root).head(t) for t in threads}
    jobs = [
        Job("main", t, spawn_uwf("thread", "step", t, "-c", m, "--wait", "--agent", agent))
        for t in threads
    ]
    killed: set[str] = set()
    forks_done = 0
    with crashkit.seeded("concurrency") as rng:
        counts: Counter[str] = Counter()
        while any(j.proc.poll() is None for j in jobs if j.kind == "main"):
            time.sleep(rng.uniform(0.01, 0.15))
            action = rng.choice(["racer", "racer", "racer", "fork", "kill"])
            if action == "racer" and counts["racer"] < racers:
                t = rng.choice(threads)
                jobs.append(Job("racer", t, spawn_uwf("thread", "step", t, "--agent", agent)))
                counts["racer"] += 1
            elif action == "fork" and counts["fork"] < forks:
                active = RootFiles(root).active()
                t = rng.choice(sorted(active))
                jobs.append(Job("fork", t, spawn_uwf("thread", "fork", active[t]), head=active[t]))
                counts["fork"] += 1
            elif action == "kill" and counts["kill"] < kills and time.monotonic() - began > 1:
                t = rng.choice(sorted(set(threads) - killed))
                killed.add(t)
                jobs.append(Job("kill", t, spawn_uwf("thread", "kill", t)))
                counts["kill"] += 1
            for job in jobs:  # a finished fork gets steppers of its own, racing the rest
                if job.kind == "fork" and job.result is None and job.proc.poll() is not None:
                    job.result = crashkit.finish(job.proc)
                    assert job.result.code == 0, job.result.err
                    new = job.result.json()["thread"]
                    forks_done += 1
                    args = ("thread", "step", new, "-c", FORK_STEPS, "--wait", "--agent", agent)
                    jobs.append(Job("forked", new, spawn_uwf(*args), head=job.head))
        for job in jobs:
            if job.result is None:
                job.result = crashkit.finish(job.proc, timeout=300)
            if job.kind == "fork" and job.head is not None and job.result.code == 0:
                new = job.result.json()["thread"]
                if not any(j.kind == "forked" and j.thread == new for j in jobs):
                    forks_done += 1
                    args = ("thread", "step", new, "-c", FORK_STEPS, "--wait", "--agent", agent)
                    jobs.append(Job("forked", new, spawn_uwf(*args), head=job.head))
        for job in jobs:
            if job.result is None:
                job.result = crashkit.finish(job.proc, timeout=300)

        # -- what every process said ------------------------------------------------------
        succeeded: dict[str, list[str]] = defaultdict(list)
        fork_origin: dict[str, str] = {}
        forks_of: Counter[str] = Counter()
        stats: Counter[str] = Counter()
        failed: list[Job] = []
        for job in jobs:
            r = job.result
            assert r is not None
            assert "internal error" not in r.err, r.err
            if job.kind == "kill":
                assert (r.code, r.err) == (0, ""), r.err
                continue
            if job.kind == "fork":
                new = r.json()["thread"]
                fork_origin[new] = r.json()["forkedFrom"]["step"]
                forks_of[fork_origin[new]] += 1
                continue
            if job.kind == "racer":
                heads = [r.json()["head"]] if r.code == 0 else []
            else:
                heads = crashkit.progress_heads(r.err)
                if r.code == 0:
                    expected = m if job.kind == "main" else FORK_STEPS
                    assert [o["head"] for o in r.jsonl()] == heads and len(heads) == expected
            succeeded[job.thread].extend(heads)
            stats["steps"] += len(heads)
            if r.code != 0:
                failed.append(job)
        for job in failed:
            assert job.result is not None
            (line,) = crashkit.error_lines(job.result.err)
            allowed = _allowed_errors(job.thread)
            assert line in allowed and job.result.code == allowed[line], (job.result.code, line)
            stats["busy refusals" if line.endswith("is busy") else "refused by a kill"] += 1

        # -- what the store says ----------------------------------------------------------
        world = crashkit.check_invariants(root)
        assert set(world.archived) == killed
        assert all(e["status"] == "killed" for e in world.archived.values())
        all_threads = [*threads, *fork_origin]
        assert set(world.active) | set(world.archived) == set(all_threads)
        for t in all_threads:
            head = world.active.get(t) or world.archived[t]["head"]
            origin = starts.get(t) or fork_origin[t]
            chain = world.chains[head]
            base = crashkit.depth(root, origin)
            if base:  # a fork: its chain runs through the step it was forked from
                assert chain[base - 1] == origin
            else:
                assert world.steps[chain[0]]["start"] == origin if chain else head == origin
            own = chain[base:]
            # nothing lost, nothing extra: the chain past its origin is exactly the steps
            # the processes reported as done on this thread
            assert sorted(own) == sorted(succeeded[t]), (t, own, succeeded[t])
        # linear: among the steps reachable from any head, a node has two different
        # successors only where a thread was forked from it
        children: dict[str, set[str]] = defaultdict(set)
        for h, payload in world.steps.items():
            children[payload["prev"] or payload["start"]].add(h)
        for parent, kids in children.items():
            assert len(kids) <= 1 + forks_of[parent], (parent, kids)
        stats["processes"] = len(jobs)
        stats["forks"] = forks_done
        stats["kills"] = len(killed)
        print(
            f"concurrency: N={n} M={m} {dict(sorted(stats.items()))} "
            f"in {time.monotonic() - began:.1f}s"
        )
        assert stats["steps"] >= n * m - kills * m


def test_workflow_put_racing_on_the_registry_loses_no_entry(root: Path, tmp_path: Path) -> None:
    """K processes put K different workflows at once (and two versions of one name race):
    every name ends in registry.yaml with the hash its process printed."""
    text = (EXAMPLES / "solve-issue.yaml").read_text()
    names_seen: set[str] = set()
    for round_ in range(PUT_ROUNDS):
        files = []
        for i in range(PUTTERS):
            name = f"wf{round_}x{i}"
            path = tmp_path / f"r{round_}" / f"{name}.yaml"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.replace("name: solve-issue", f"name: {name}"))
            files.append(path)
        same = []
        for v in range(2):
            path = tmp_path / f"r{round_}v{v}" / "shared.yaml"
            path.parent.mkdir(parents=True)
            path.write_text(
                text.replace("name: solve-issue", "name: shared").replace(
                    "End-to-end issue resolution", f"Round {round_} version {v}"
                )
            )
            same.append(path)
        procs = [spawn_uwf("workflow", "put", str(p)) for p in [*files, *same]]
        results = [crashkit.finish(p) for p in procs]
        for r in results:
            assert r.code == 0, r.err
        printed = {r.json()["name"]: r.json()["hash"] for r in results[: len(files)]}
        shared = {r.json()["hash"] for r in results[len(files) :]}
        names_seen |= set(printed)
        registry = RootFiles(root).registry.read()
        for name, h in printed.items():
            assert registry.get(name) == h, name
        assert registry["shared"] in shared
        assert set(registry) == names_seen | {"shared"}
    crashkit.check_invariants(root)
