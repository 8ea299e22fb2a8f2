"""Shared harness of the reliability tests: counts, seeds, processes and the invariant checker.

The crash tests (``test_crash.py``), the fault tests (``test_faults.py``) and the concurrency
tests (``test_concurrency_scale.py``) all end the same way: ``check_invariants(root)`` reads
the storage root directly (file shapes, chains, locks, the type index) and through the CLI
(``cas verify``, ``thread list``, ``thread show``), and fails with a list of every broken
guarantee. ``UWF_LONG=1`` switches every test to its long counts (docs/reliability.md);
``UWF_CRASH_SEED=<n>`` replays a run.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import re
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support import BIN, Result, cli

LONG = os.environ.get("UWF_LONG") == "1"
STATE_FILES = ("threads.yaml", "registry.yaml", "history.jsonl")
HISTORY_KEYS = {"thread", "workflow", "head", "completedAt", "status"}
HISTORY_OPTIONAL = {"task", "cwd", "parent"}  # docs/format.md, "Thread state"
HISTORY_STATUSES = {"completed", "killed", "max_rounds"}
# uwf's line shape: a quoted key, then a quoted string or a one-line JSON object
_QUOTED_LINE = re.compile(r'^"(?:[^"\\]|\\.)*": (?:"(?:[^"\\]|\\.)*"|\{.*\})$')
_PROGRESS = re.compile(r"^step (\d+)/(\d+): (\S+) -> ([0-9A-Z]{13})( \(done\))?$")


def scaled(ci: int, long: int) -> int:
    """The CI count, or the long one under ``UWF_LONG=1``."""
    return long if LONG else ci


# -- seeds --------------------------------------------------------------------------------


@contextlib.contextmanager
def seeded(name: str) -> Iterator[random.Random]:
    """A seeded RNG; the seed is printed, and attached to any failure, for a replay."""
    env = os.environ.get("UWF_CRASH_SEED")
    seed = int(env) if env else random.SystemRandom().randrange(1 << 32)
    print(f"{name}: seed {seed} (replay with UWF_CRASH_SEED={seed})")
    try:
        yield random.Random(seed)
    except BaseException as exc:
        exc.add_note(f"{name}: seed {seed} (replay with UWF_CRASH_SEED={seed})")
        raise


# -- running uwf ----------------------------------------------------------------------------


def finish(proc: subprocess.Popen[str], timeout: float = 120) -> Result:
    out, err = proc.communicate(timeout=timeout)
    return Result(proc.returncode, out, err)


def progress_heads(err: str) -> list[str]:
    """The heads of the steps a ``thread step -c N`` run reported on stderr, in order."""
    return [m.group(4) for line in err.splitlines() if (m := _PROGRESS.match(line))]


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error: ")]


def write_signature(root: Path) -> tuple[Any, ...]:
    """Something that changes with every durable write uwf or an agent makes: the inode of
    each replaced state file, the size of each appended file (history, type index), and the
    packs' directory listing (a step's nodes are one pack)."""
    sig: list[Any] = []
    for name in ("threads.yaml", "registry.yaml"):
        try:
            sig.append(os.stat(root / name).st_ino)
        except FileNotFoundError:
            sig.append(None)
    try:
        sig.append(os.stat(root / "history.jsonl").st_size)
    except FileNotFoundError:
        sig.append(None)
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(root / "cas" / "index"):
            with contextlib.suppress(FileNotFoundError):
                sig.append((entry.name, entry.stat().st_size))
    with contextlib.suppress(FileNotFoundError):  # a step's pack: each of its two renames
        sig.append(tuple(sorted(os.listdir(root / "cas" / "packs"))))
    return tuple(sig)


def sigkill(proc: subprocess.Popen[str]) -> Result:
    """SIGKILL ``proc`` now and reap it; ``code == -9`` tells that the kill landed."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGKILL)
    return finish(proc)


def kill_after(proc: subprocess.Popen[str], delay: float) -> Result:
    time.sleep(delay)
    return sigkill(proc)


def kill_when(
    proc: subprocess.Popen[str], ready: Any, jitter: float, timeout: float = 60
) -> Result:
    """SIGKILL ``proc`` ``jitter`` seconds after ``ready()`` first holds (or once it exits)."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and not ready() and time.monotonic() < deadline:
        time.sleep(0.0002)
    if jitter:
        time.sleep(jitter)
    return sigkill(proc)


def kill_after_writes(
    proc: subprocess.Popen[str], root: Path, writes: int, jitter: float, baseline: Any
) -> Result:
    """SIGKILL ``proc`` ``jitter`` seconds after it (or its agent) made its ``writes``-th
    durable write since ``baseline`` (0: at the first sign of one): aims at the writes."""
    seen, last = 0, baseline
    while proc.poll() is None:
        sig = write_signature(root)
        if sig != last:
            seen, last = seen + 1, sig
            if seen > writes:
                break
        time.sleep(0.0002)
    if jitter:
        time.sleep(jitter)
    return sigkill(proc)


# -- agents ---------------------------------------------------------------------------------

PLAN = "---\nstatus: _\nplan: do it\nsteps: [one, two]\n---\nThe plan."
DEV = "---\nstatus: _\nfilesChanged: [a.py]\nsummary: did it\n---\nImplemented."
REJECT = "---\nstatus: rejected\ncomments: add tests\n---\nNeeds tests."
APPROVE = "---\nstatus: approved\ncomments: ok\n---\nLGTM."


def loop_roles(sleep: float = 0.0) -> dict[str, Any]:
    """uwf-mock roles for solve-issue where the reviewer always rejects: a thread never ends
    by itself, so a chain can grow as long as a test needs."""

    def entry(text: str) -> Any:
        return {"output": text, "sleep": sleep} if sleep else text

    return {"planner": [entry(PLAN)], "developer": [entry(DEV)], "reviewer": [entry(REJECT)]}


def write_scenario(path: Path, roles: dict[str, Any]) -> str:
    """Write a uwf-mock scenario; return the ``--agent`` command line."""
    import yaml

    path.write_text(yaml.safe_dump({"roles": roles}))
    return f"{BIN / 'uwf-mock'} --scenario {path}"


def marker_agent(directory: Path, roles: dict[str, Any], name: str = "agent") -> tuple[str, Path]:
    """An agent that appends "<parent pid> <pid>" to a marker file and then becomes uwf-mock
    (``exec``: same pid, same process group), so a test knows when the agent of a given uwf
    process started, and can kill its group."""
    scenario = directory / f"{name}.yaml"
    write_scenario(scenario, roles)
    marker = directory / f"{name}.pids"
    script = directory / f"{name}.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"echo $PPID $$ >> '{marker}'\n"
        f"exec '{BIN / 'uwf-mock'}' --scenario '{scenario}' \"$@\"\n"
    )
    script.chmod(0o755)
    return str(script), marker


def thread_marker_agent(directory: Path, roles: dict[str, Any]) -> tuple[str, Path]:
    """uwf-mock behind a script that appends "<thread> <role>" to a file as it starts, so a
    test counts the agents that ran (and for which step)."""
    scenario = directory / "marked.yaml"
    write_scenario(scenario, roles)
    marker = directory / "agent-starts"
    script = directory / "marked.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"echo \"$1 $2\" >> '{marker}'\n"
        f"exec '{BIN / 'uwf-mock'}' --scenario '{scenario}' \"$@\"\n"
    )
    script.chmod(0o755)
    return str(script), marker


def lines_of(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def marker_pids(marker: Path, parent: int) -> list[int]:
    """The pids of the agents that the uwf process ``parent`` started."""
    try:
        lines = marker.read_text().splitlines()
    except FileNotFoundError:
        return []
    pairs = [line.split() for line in lines]
    return [int(p[1]) for p in pairs if len(p) == 2 and int(p[0]) == parent]


# -- the invariant checker ------------------------------------------------------------------


@dataclass
class World:
    """What the checker read: the reader's view of the state and a few counters."""

    active: dict[str, str]  # thread -> head, as readers see it
    archived: dict[str, dict[str, Any]]  # thread -> its history line
    registry: dict[str, str]
    leftover: str | None  # a thread still in threads.yaml although archived (crash window)
    temp_files: int  # fsio temp files a crash left behind (never read as anything)
    torn_lines: int  # history.jsonl fragments readers skip
    chains: dict[str, list[str]] = field(default_factory=dict)  # head -> step hashes, oldest first
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)  # step hash -> payload


def _read_quoted_mapping(path: Path, problems: list[str], key_ok: Any) -> dict[str, str]:
    """Parse a uwf-written YAML mapping both ways: the exact quoted line shape, and PyYAML."""
    import yaml

    from uwf.util.base32 import is_hash

    if not path.exists():
        return {}
    text = path.read_text()
    if text and not text.endswith("\n"):
        problems.append(f"{path.name} does not end with a newline (half-written?)")
    lines = [x for x in text.splitlines() if x.strip() and not x.startswith("#")]
    for line in lines:
        if not _QUOTED_LINE.match(line):
            problems.append(f"{path.name}: line not in uwf's shape: {line!r}")
    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problems.append(f"{path.name} does not parse: {exc}")
        return {}
    if loaded is None:
        loaded = {}
    if not isinstance(loaded, dict):
        problems.append(f"{path.name} is not a mapping")
        return {}
    if len(loaded) != len(lines):
        problems.append(f"{path.name}: {len(lines)} lines but {len(loaded)} keys")
    out: dict[str, str] = {}
    for k, v in loaded.items():
        head = v.get("head") if isinstance(v, dict) else v  # threads.yaml: {head, workflow, task}
        if not (isinstance(k, str) and key_ok(k) and isinstance(head, str) and is_hash(head)):
            problems.append(f"{path.name}: bad entry {k!r}: {v!r}")
        out[str(k)] = str(head)
    return out


def _read_history(path: Path, problems: list[str], allow_torn: bool) -> tuple[list[Any], int]:
    if not path.exists():
        return [], 0
    data = path.read_bytes()
    if data and not data.endswith(b"\n") and not allow_torn:
        problems.append("history.jsonl ends in a torn line")
    entries, torn = [], 0
    for raw in data.decode().splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            torn += 1
            if not allow_torn:
                problems.append(f"history.jsonl: line is not JSON: {raw!r}")
            continue
        if not isinstance(entry, dict) or set(entry) - HISTORY_OPTIONAL != HISTORY_KEYS:
            problems.append(f"history.jsonl: not a history line: {raw!r}")
            continue
        if entry["status"] not in HISTORY_STATUSES:
            problems.append(f"history.jsonl: unknown status: {raw!r}")
        entries.append(entry)
    return entries, torn


def _walk(store: Any, head: str, problems: list[str], world: World) -> None:
    """Walk ``head`` back to its StartNode: every link present, same start, depth = position."""
    from uwf.protocol import schemas

    h = schemas.hashes()
    steps: list[str] = []
    current: str | None = head
    seen: set[str] = set()
    start_hash: str | None = None
    while current is not None:
        if current in seen:
            problems.append(f"chain of {head} has a cycle at {current}")
            return
        seen.add(current)
        node = store.get(current)
        if node is None:
            problems.append(f"chain of {head}: node {current} is missing")
            return
        if node.type == h.start:
            start_hash = current
            if steps and world.steps[steps[-1]]["prev"] is not None:
                problems.append(f"chain of {head}: {steps[-1]} has a StartNode as prev")
            break
        if node.type != h.step:
            problems.append(f"chain of {head}: {current} is neither a StepNode nor a StartNode")
            return
        world.steps[current] = node.payload
        steps.append(current)
        prev = node.payload.get("prev")
        current = prev if prev is not None else node.payload.get("start")
    steps.reverse()
    for i, s in enumerate(steps, 1):
        payload = world.steps[s]
        if payload.get("start") != start_hash:
            problems.append(f"chain of {head}: {s} names start {payload.get('start')}")
        if payload.get("depth") not in (None, i):
            problems.append(f"chain of {head}: {s} has depth {payload.get('depth')}, is at {i}")
        if i == 1 and payload.get("prev") is not None:
            problems.append(f"chain of {head}: first step {s} has prev {payload.get('prev')}")
    if start_hash is not None:
        start = store.get(start_hash)
        wf = store.get(start.payload["workflow"])
        if wf is None or wf.type != h.workflow:
            problems.append(f"chain of {head}: workflow {start.payload['workflow']} is missing")
    world.chains[head] = steps


def _locks_free(root: Path, problems: list[str], patience: float = 2.0) -> None:
    """Every lock file can be taken: no dead process left a lock behind. (A live process may
    hold one for a moment, e.g. an orphaned agent writing a node holds the store's shared
    writers' lock; a lock of a dead process would never come free, so waiting a little
    still proves the point.)"""
    for lock in [*root.glob("*.lock"), *root.glob("locks/*.lock")]:
        fd = os.open(lock, os.O_RDWR)
        try:
            deadline = time.monotonic() + patience
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        problems.append(f"lock {lock.relative_to(root)} is held")
                        break
                    time.sleep(0.01)
        finally:
            os.close(fd)


def check_invariants(root: Path, *, allow_torn: bool = False, locks: bool = True) -> World:
    """Check every reliability guarantee on ``root``; raise AssertionError listing all breaks.

    - ``threads.yaml`` and ``registry.yaml`` parse (fast-path shape and PyYAML agree);
      ``history.jsonl`` and the type index are whole lines (fragments of a failed append,
      which readers skip, only with ``allow_torn``);
    - every active and archived head is a StartNode or StepNode whose chain is linear back to
      its StartNode; every registry entry is a Workflow node;
    - every archived thread has exactly one history line; no thread is both active and
      archived for a reader (on disk, only the LAST history line's thread may still be in
      threads.yaml: the documented crash window between the two writes of an archive);
    - ``cas verify`` passes; every type-index line names an existing node of that type;
      temp files are never named like nodes;
    - no lock is held (``locks``: only when no uwf process should be running);
    - the CLI agrees: ``thread list`` shows exactly the active threads with their heads,
      ``thread list --all`` each thread once, ``thread show`` every active thread.
    """
    from rootfiles import RootFiles, open_store
    from uwf.protocol import schemas
    from uwf.util.base32 import is_hash
    from uwf.util.ulid import is_thread_id

    problems: list[str] = []
    raw_threads = _read_quoted_mapping(root / "threads.yaml", problems, is_thread_id)
    registry = _read_quoted_mapping(root / "registry.yaml", problems, bool)
    history, torn = _read_history(root / "history.jsonl", problems, allow_torn)

    per_thread = Counter(e["thread"] for e in history)
    for thread, n in per_thread.items():
        if n != 1:
            problems.append(f"thread {thread} has {n} history lines")
    archived = {e["thread"]: e for e in history}
    last = history[-1]["thread"] if history else None
    both = set(raw_threads) & set(archived)
    leftover = None
    if both - {last}:
        problems.append(f"threads both active and archived: {sorted(both - {last})}")
    if last in both:
        leftover = last
    active = {t: h for t, h in raw_threads.items() if t not in archived}
    if RootFiles(root).active() != active:
        problems.append("State.active() disagrees with the files")

    temp_files = 0
    objects = root / "cas" / "objects"
    if objects.exists():
        for fan in objects.iterdir():
            for f in fan.iterdir():
                if f.name.startswith(".tmp-"):
                    temp_files += 1
                elif not (is_hash(f.name) and f.name[:2] == fan.name):
                    problems.append(f"unexpected file in the store: {f.relative_to(root)}")
    temp_files += sum(1 for f in root.glob(".tmp-*"))
    temp_files += sum(1 for f in root.glob("cas/packs/.tmp-*"))  # a killed step's pack

    store = open_store(root)
    world = World(active, archived, registry, leftover, temp_files, torn)
    h = schemas.hashes()
    for thread, head in [*active.items(), *((t, e["head"]) for t, e in archived.items())]:
        node = store.get(head)
        if node is None:
            problems.append(f"thread {thread}: head {head} is not in the store")
        elif node.type not in (h.start, h.step):
            problems.append(f"thread {thread}: head {head} is not a StartNode or StepNode")
        elif head not in world.chains:
            _walk(store, head, problems, world)
    for name, wf in registry.items():
        node = store.get(wf)
        if node is None or node.type != h.workflow:
            problems.append(f"registry entry {name}: {wf} is not a Workflow node")

    index_dir = root / "cas" / "index"
    if index_dir.exists():
        for index in index_dir.iterdir():
            for line in index.read_text().splitlines():
                if not is_hash(line):
                    if not allow_torn:
                        problems.append(f"index {index.name}: torn line {line!r}")
                    continue
                node = store.get(line)
                if node is None or node.type != index.name:
                    problems.append(f"index {index.name}: {line} is not a node of that type")

    verify = cli("cas", "verify")
    if verify.code != 0 or verify.json()["ok"] is not True:
        problems.append(f"cas verify failed: {verify.out or verify.err}")
    listed = cli("thread", "list")
    if listed.code != 0:
        problems.append(f"thread list failed: {listed.err}")
    elif {t["thread"]: t["head"] for t in listed.json()} != active:
        problems.append("thread list does not show exactly the active threads")
    listed_all = cli("thread", "list", "--all")
    if listed_all.code != 0:
        problems.append(f"thread list --all failed: {listed_all.err}")
    else:
        ids = [t["thread"] for t in listed_all.json()]
        if sorted(ids) != sorted({*active, *archived}):
            problems.append("thread list --all does not list every thread exactly once")
    for thread, head in active.items():
        shown = cli("thread", "show", thread)
        if shown.code != 0 or shown.json()["head"] != head or shown.json()["done"]:
            problems.append(f"thread show {thread}: {shown.out or shown.err}")
    if locks:
        _locks_free(root, problems)
    if problems:
        raise AssertionError("invariants broken:\n  " + "\n  ".join(problems))
    return world


def step_node(root: Path, h: str) -> dict[str, Any]:
    """The payload of StepNode ``h`` (read through the store, so its hash is checked)."""
    from rootfiles import open_store

    node = open_store(root).get(h)
    assert node is not None, f"StepNode {h} is missing"
    return dict(node.payload)


def depth(root: Path, head: str) -> int:
    """Steps in the chain ending at ``head`` (0 for a StartNode)."""
    from rootfiles import open_store
    from uwf.protocol import schemas

    node = open_store(root).get(head)
    assert node is not None
    if node.type == schemas.hashes().start:
        return 0
    return int(node.payload["depth"])


def assert_continues(root: Path, thread: str, agent: str) -> dict[str, Any]:
    """One ``thread step`` on ``thread`` must succeed and extend the chain from its recorded
    head by exactly one StepNode (or archive it there, when the head already ends it)."""
    from rootfiles import RootFiles

    head = RootFiles(root).head(thread)
    assert head is not None, f"thread {thread} is not active"
    r = cli("thread", "step", thread, "--agent", agent)
    assert r.code == 0, f"step after the kill failed: {r.err}"
    out = r.json()
    if out["role"] is None:  # the recorded head already ends the thread: archived there
        assert out["done"] is True and out["head"] == head, out
        return out
    new = step_node(root, out["head"])
    if depth(root, head) == 0:
        assert new["prev"] is None and new["start"] == head, (head, new)
    else:
        assert new["prev"] == head, (head, new)
    assert new["depth"] == depth(root, head) + 1
    return out
