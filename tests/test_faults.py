"""Write-path faults: a failing fsync, rename, link or write (ENOSPC, EIO, a short write) on the
n-th call, for every n of a command's writes, and a real full disk (a small tmpfs).

After each fault: the command failed with one clean ``error: cannot write <file>: <reason>``
line (never ``internal error``), or succeeded because the fault was harmless (a directory
fsync after the rename, or a short write to a temp file that the writer completes); no temp
file is left or read back; ``cas verify`` passes; the three state files are exactly those of
a prefix of the command's atomic writes (before, after, or a consistent point in between);
and running the command again reaches the state of an undisturbed run.

The engine runs in-process (``uwf.cli.main.run``), so patching ``os`` reaches its writes; an
agent is a process of its own, so the agent kit's writes are faulted by running
``uwf.agent_kit.runner.main`` in-process with the uwf-mock agent object.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import itertools
import os
import re
import shutil
import stat
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import crashkit
from rootfiles import RootFiles, without_failures
from support import EXAMPLES, tiers
from uwf.util import fsio

FUNCTIONS = ("fsync", "replace", "link", "write")
ERRORS = {"ENOSPC": errno.ENOSPC, "EIO": errno.EIO}
MAX_N = crashkit.scaled(6, 1000)  # faulted positions per (function, error); all in long mode
SMOKE_N = 2  # the default run: the first and the last call of each (function, error)
ERROR_LINE = re.compile(r"^error: cannot write (\S+): (.+)\n$")


# -- the fault injector ---------------------------------------------------------------------


def _no_fsync(fd: int) -> None:
    """Skipped: these tests are about error paths, not power loss, and a real fsync costs
    milliseconds on the test machine's disk."""


@dataclass
class Injector:
    """Wraps ``os.<name>``: counts the calls uwf's own code makes and fails the n-th one."""

    name: str
    fail_at: int | None = None  # 1-based; None counts only
    mode: str = "ENOSPC"  # an errno name, or "short" (write: half the bytes, then success)
    calls: int = 0
    fired: bool = False
    harmless: bool = False  # the fired fault may legitimately not fail the command

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real: Callable[..., Any] = getattr(os, self.name)
        if self.name == "fsync":
            real = _no_fsync

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            caller = sys._getframe(1).f_globals.get("__name__", "")
            if not caller.startswith("uwf.") or caller == "uwf.util.log":
                return real(*args, **kwargs)  # the debug log is best effort: never a fault
            if self.name == "write" and not stat.S_ISREG(os.fstat(args[0]).st_mode):
                return real(*args, **kwargs)  # a pipe (the watchdog's), not the disk
            if self.name == "write" and "/cache/turns/" in os.readlink(f"/proc/self/fd/{args[0]}"):
                return real(*args, **kwargs)  # the live view's file: never a reason to fail
            self.calls += 1
            if self.calls != self.fail_at:
                return real(*args, **kwargs)
            self.fired = True
            if self.name == "fsync" and stat.S_ISDIR(os.fstat(args[0]).st_mode):
                self.harmless = True  # the rename it follows is already visible
            if self.mode == "short":
                fd, data = args
                # a short write to a temp file is completed by the writer's loop; an append
                # must be reported (its fragment stays, and readers skip it)
                self.harmless = not fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND
                return real(fd, bytes(data)[: max(1, len(data) // 2)])
            code = ERRORS[self.mode]
            raise OSError(code, os.strerror(code))

        monkeypatch.setattr(os, self.name, wrapper)


@dataclass
class Reference:
    """An undisturbed run: how many calls of each function, and every state it passed."""

    calls: dict[str, int]
    states: list[tuple[bytes, bytes, bytes]] = field(default_factory=list)
    result: crashkit.Result | None = None
    objects: set[str] = field(default_factory=set)


def state_files(root: Path) -> tuple[Any, bytes, bytes]:
    """threads.yaml (without the threads' last failures: a step a fault made fail records one,
    docs/format.md "Thread state"), registry.yaml and history.jsonl (torn fragments dropped,
    as readers do)."""
    out: list[Any] = []
    for name in crashkit.STATE_FILES:
        data = fsio.read_bytes(root / name) or b""
        if name.endswith(".jsonl"):
            data = b"".join(line for line in data.splitlines(keepends=True) if _json_line(line))
        out.append(without_failures(data) if name == "threads.yaml" else data)
    return out[0], out[1], out[2]


def _json_line(line: bytes) -> bool:
    import json

    try:
        json.loads(line)
    except ValueError:
        return False
    return True


def objects(root: Path) -> set[str]:
    return {p.name for p in (root / "cas" / "objects").glob("*/*")}


def temp_files(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob(".tmp-*")]


# -- scenarios: a prepared root and one command ----------------------------------------------


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Thread ids and archive times that repeat from run to run (so runs compare byte for
    byte); call the returned function before each run."""
    counter = itertools.count()

    def new_id(now_ms: int | None = None) -> str:
        return f"01J0000000000000000000{next(counter):04d}"

    monkeypatch.setattr("uwf.engine.threads.lifecycle.new_thread_id", new_id)
    monkeypatch.setattr("uwf.engine.threads.lifecycle.now_ms", lambda: 1_700_000_000_000)
    monkeypatch.setattr("uwf.engine.step.commit.now_ms", lambda: 1_700_000_000_000)

    def reset() -> None:
        nonlocal counter
        counter = itertools.count(100)

    return reset


@dataclass
class Scenario:
    command: list[str]
    # the thread whose step/kill the command is about (for messages only)
    thread: str | None = None


def _prepare(name: str, root: Path, tmp_path: Path) -> Scenario:
    """Build the storage root a command starts from (in-process, unfaulted)."""
    fast = crashkit.write_scenario(tmp_path / "fast.yaml", crashkit.loop_roles())
    wf = EXAMPLES / "solve-issue.yaml"
    if name == "workflow put into an empty root":
        return Scenario(["workflow", "put", str(wf)])
    assert crashkit.cli("workflow", "put", str(wf)).code == 0
    if name == "workflow put of a new version":
        v2 = tmp_path / "v2" / "solve-issue.yaml"
        v2.parent.mkdir()
        v2.write_text(wf.read_text().replace("End-to-end issue resolution", "Version 2"))
        return Scenario(["workflow", "put", str(v2)])
    if name == "thread start":
        return Scenario(["thread", "start", "solve-issue", "-p", "a task"])
    if name == "cas put":
        from uwf.protocol import schemas

        return Scenario(["cas", "put", schemas.hashes().text, '"a text node"'])
    limit = ["--max-rounds", "1"] if name == "thread step that archives" else []
    other = crashkit.cli("thread", "start", "solve-issue", "-p", "bystander").json()["thread"]
    thread = crashkit.cli("thread", "start", "solve-issue", "-p", "subject", *limit)
    thread_id = thread.json()["thread"]
    assert crashkit.cli("thread", "step", other, "--agent", fast).code == 0
    if name.startswith("thread step"):
        # The agent is a process of its own, out of reach of the patches: what is under test
        # here is the engine's writes. So let uwf-mock write the step's nodes once, undo the
        # state change, and use an agent that just answers that StepNode's hash (2 ms).
        saved = {n: fsio.read_bytes(root / n) for n in crashkit.STATE_FILES}
        answer = crashkit.cli("thread", "step", thread_id, "--agent", fast).json()["head"]
        for n, data in saved.items():
            (root / n).unlink(missing_ok=True)
            if data is not None:
                (root / n).write_bytes(data)
        script = tmp_path / "answer.sh"
        script.write_text(f"#!/bin/sh\necho {answer}\n")
        script.chmod(0o755)
        return Scenario(["thread", "step", thread_id, "--agent", str(script)], thread_id)
    assert crashkit.cli("thread", "step", thread_id, "--agent", fast).code == 0
    if name == "thread kill":
        return Scenario(["thread", "kill", thread_id], thread_id)
    if name == "thread fork":
        head = RootFiles(root).head(thread_id)
        assert head is not None
        return Scenario(["thread", "fork", head], thread_id)
    raise AssertionError(name)


COMMANDS = (
    "workflow put into an empty root",
    "workflow put of a new version",
    "thread start",
    "thread step",
    "thread step that archives",
    "thread kill",
    "thread fork",
    "cas put",
)


@contextlib.contextmanager
def _patched(
    monkeypatch: pytest.MonkeyPatch, injectors: list[Injector]
) -> Iterator[list[Injector]]:
    """Install the injectors (plus a counting, skipping fsync when none fails fsync)."""
    if all(inj.name != "fsync" for inj in injectors):
        injectors = [*injectors, Injector("fsync")]
    with monkeypatch.context() as m:
        for inj in injectors:
            inj.install(m)
        yield injectors


def _restore(base: Path, root: Path) -> None:
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(base, root, symlinks=True)


def _reference(
    monkeypatch: pytest.MonkeyPatch, root: Path, command: list[str], reset: Callable[[], None]
) -> Reference:
    """Run undisturbed, counting calls and recording the state after every atomic write."""
    ref = Reference(calls={})
    ref.states.append(state_files(root))
    real_write, real_append = fsio.atomic_write, fsio.append_line

    def atomic_write(*args: Any, **kwargs: Any) -> None:
        real_write(*args, **kwargs)
        ref.states.append(state_files(root))

    def append_line(*args: Any, **kwargs: Any) -> None:
        real_append(*args, **kwargs)
        ref.states.append(state_files(root))

    counters = [Injector(name) for name in FUNCTIONS]
    reset()
    with _patched(monkeypatch, counters) as _, monkeypatch.context() as m:
        m.setattr(fsio, "atomic_write", atomic_write)
        m.setattr(fsio, "append_line", append_line)
        ref.result = crashkit.cli(*command)
    assert ref.result.code == 0, ref.result.err
    ref.calls = {c.name: c.calls for c in counters}
    ref.objects = objects(root)
    return ref


def _positions(total: int, most: int) -> list[int]:
    """Every call, or at most ``most``: an even spread that always includes the first and the
    last."""
    if total <= most:
        return list(range(1, total + 1))
    step = (total - 1) / (most - 1)
    return sorted({1 + round(i * step) for i in range(most)})


def _check_after_fault(
    root: Path,
    ref: Reference,
    inj: Injector,
    result: crashkit.Result,
    label: str,
) -> None:
    assert inj.fired, f"{label}: call {inj.fail_at} never happened"
    if result.code == 0:
        assert inj.harmless, f"{label}: the fault was swallowed: {result.out}"
    else:
        assert result.code == 1, f"{label}: exit {result.code}: {result.err}"
        m = ERROR_LINE.match(result.err)
        assert m, f"{label}: not one clean error line: {result.err!r}"
        reason = os.strerror(errno.ENOSPC if inj.mode == "short" else ERRORS[inj.mode])
        assert m.group(2) == reason, f"{label}: {result.err!r}"
        assert Path(m.group(1)).is_relative_to(root), f"{label}: {result.err!r}"
    assert temp_files(root) == [], f"{label}: temp files left: {temp_files(root)}"
    assert objects(root) <= ref.objects, f"{label}: nodes the real run never wrote"
    assert state_files(root) in ref.states, f"{label}: state files match no prefix of the run"
    crashkit.check_invariants(root, allow_torn=inj.mode == "short")


@pytest.mark.parametrize("name", COMMANDS)
@tiers("most", SMOKE_N, MAX_N)
def test_failing_write_calls(
    name: str,
    most: int,
    root: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    frozen: Callable[[], None],
) -> None:
    """Fail each os.fsync / os.replace / os.link / os.write call of the command in turn."""
    scenario = _prepare(name, root, tmp_path)
    root.mkdir(parents=True, exist_ok=True)
    base = tmp_path / "base"
    shutil.copytree(root, base, symlinks=True)
    ref = _reference(monkeypatch, root, scenario.command, frozen)
    after_state, after_view = state_files(root), _view()
    runs = 0
    stats: Counter[str] = Counter()
    for function in FUNCTIONS:
        modes = [*ERRORS, "short"] if function == "write" else list(ERRORS)
        for mode, n in itertools.product(modes, _positions(ref.calls[function], most)):
            label = f"{name}: {function} #{n} of {ref.calls[function]} fails with {mode}"
            _restore(base, root)
            inj = Injector(function, n, mode)
            frozen()
            with _patched(monkeypatch, [inj]):
                result = crashkit.cli(*scenario.command)
            _check_after_fault(root, ref, inj, result, label)
            if _view() != after_view:  # it did not take effect: running it again does
                assert result.code != 0, label
                frozen()
                again = crashkit.cli(*scenario.command)
                assert again.code == 0, f"{label}: retry failed: {again.err}"
                assert _view() == after_view, f"{label}: retry did not reach the undisturbed state"
                if inj.mode != "short":
                    assert state_files(root) == after_state, label
            elif result.code:  # e.g. the fsync after a complete append failed
                stats["failed after taking effect"] += 1
            stats["failed cleanly" if result.code else "harmless"] += 1
            runs += 1
    print(f"{name}: {runs} faulted runs {dict(stats)}, calls {ref.calls}")
    assert runs >= 2


def _view() -> dict[str, Any]:
    """What a user sees: every thread with its head and status, the registry, the nodes."""
    root = Path(os.environ["UNCAGED_WORKFLOW_STORAGE_ROOT"])
    threads = crashkit.cli("thread", "list", "--all").json()
    workflows = crashkit.cli("workflow", "list").json()
    return {
        "threads": sorted(threads, key=lambda t: t["thread"]),
        "workflows": workflows,
        "nodes": objects(root),
    }


def test_two_interrupted_archives_never_resurrect_a_thread(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An archive whose threads.yaml rewrite fails after its history line was appended leaves
    the thread in both files; readers treat it as archived because its line is the LAST one.
    If a second archive then fails the same way, the first thread must not become active
    again. It did before the fix in ``State.edit_threads`` (the second history line hid the
    first leftover, which could then be killed a second time)."""
    assert crashkit.cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
    a, b, c = (
        crashkit.cli("thread", "start", "solve-issue", "-p", p).json()["thread"] for p in "abc"
    )
    real = os.replace
    victim = ""

    def replace(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        """Fail exactly the threads.yaml write that would remove the thread being killed."""
        if Path(dst).name == "threads.yaml":
            current = Path(dst).read_text()
            if victim in current and victim not in Path(src).read_text():
                raise OSError(errno.EIO, os.strerror(errno.EIO))
        real(src, dst, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(os, "replace", replace)
        for victim in (a, b):
            r = crashkit.cli("thread", "kill", victim)
            assert r.err == f"error: cannot write {root / 'threads.yaml'}: Input/output error\n"
    world = crashkit.check_invariants(root)
    assert set(world.archived) == {a, b} and world.leftover == b
    assert list(world.active) == [c]
    r = crashkit.cli("thread", "kill", a)
    assert r.err == f"error: thread not active: {a} (status: killed)\n"
    assert crashkit.cli("thread", "kill", c).code == 0
    world = crashkit.check_invariants(root)
    assert set(world.archived) == {a, b, c} and world.active == {} and world.leftover is None


def test_temp_files_left_by_a_crash_are_never_read(root: Path, tmp_path: Path) -> None:
    """A SIGKILL between writing a temp file and linking it leaves ``.tmp-*`` files (whole or
    cut short). Nothing reads them: not the store, not verify, reindex or the state files."""
    fast = crashkit.write_scenario(tmp_path / "fast.yaml", crashkit.loop_roles())
    assert crashkit.cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
    thread = crashkit.cli("thread", "start", "solve-issue", "-p", "x").json()["thread"]
    head = RootFiles(root).head(thread)
    assert head is not None
    node = next((root / "cas" / "objects").glob(f"*/{head}"))
    data = node.read_bytes()
    (node.parent / f".tmp-{head}.1.1").write_bytes(data[: len(data) // 2])
    (root / ".tmp-threads.yaml.1.1").write_bytes(b'"01J0000000000000000000ZZZZ": "')
    (root / ".tmp-registry.yaml.1.1").write_bytes(b"")
    world = crashkit.check_invariants(root)
    assert world.temp_files == 3 and world.active == {thread: head}
    assert crashkit.cli("cas", "reindex").code == 0
    assert crashkit.cli("cas", "get", head).json()["payload"]["prompt"] == "x"
    crashkit.assert_continues(root, thread, fast)
    crashkit.check_invariants(root)


def test_agent_kit_writes_fail_cleanly(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent's own node writes (uwf-mock through the agent kit, in-process): each failing
    call makes the agent exit 1 with one ``error: cannot write …`` line, leaves no temp file,
    changes no state file, and the next real step continues the chain."""
    from uwf.agent_kit import args, runner
    from uwf.agents.mock import MockAgent

    scenario_path = tmp_path / "fast.yaml"
    fast = crashkit.write_scenario(scenario_path, crashkit.loop_roles())
    assert crashkit.cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
    thread = crashkit.cli("thread", "start", "solve-issue", "-p", "x").json()["thread"]
    monkeypatch.setenv("UWF_EDGE_PROMPT", "Plan the work for the task above.")
    base = tmp_path / "base"
    shutil.copytree(root, base, symlinks=True)

    def agent_run(injectors: list[Injector]) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = 0
        with (
            _patched(monkeypatch, injectors),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                runner.main(MockAgent(str(scenario_path)), args.kit([thread, "planner"]))
            except SystemExit as exc:
                code = int(exc.code or 0)
        return code, out.getvalue(), err.getvalue()

    counters = [Injector(name) for name in FUNCTIONS]
    code, out, _ = agent_run(counters)
    assert code == 0
    written = objects(root)
    calls = {c.name: c.calls for c in counters}
    before = state_files(root)
    runs = 0
    for function in FUNCTIONS:
        modes = [*ERRORS, "short"] if function == "write" else list(ERRORS)
        for mode, n in itertools.product(modes, _positions(calls[function], MAX_N)):
            label = f"agent: {function} #{n} of {calls[function]} fails with {mode}"
            _restore(base, root)
            inj = Injector(function, n, mode)
            code, out, err = agent_run([inj])
            if code == 0:
                assert inj.harmless, f"{label}: swallowed"
            else:
                assert code == 1 and out == "", label
                m = ERROR_LINE.match(err)
                assert m, f"{label}: {err!r}"
            assert temp_files(root) == [], label
            assert objects(root) <= written, label
            assert state_files(root) == before, label
            crashkit.check_invariants(root, allow_torn=mode == "short")
            if crashkit.LONG or runs % 4 == 0:  # a real step (agent process) continues
                crashkit.assert_continues(root, thread, fast)
            runs += 1
    print(f"agent kit: {runs} faulted runs, calls {calls}")


# -- a real full disk -----------------------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (needs root and a kernel that lets this process mount; else skipped)."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    try:
        proc = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a small tmpfs: {exc}")
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs: {proc.stderr.strip() or proc.returncode}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(filler: Path, leave_pages: int) -> None:
    """Grow ``filler`` until the filesystem is full, then give back ``leave_pages`` pages."""
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for chunk in (1 << 16, 1 << 12, 1):
            block = b"\0" * chunk
            while True:
                try:
                    os.write(fd, block)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
        os.ftruncate(fd, max(0, os.fstat(fd).st_size - leave_pages * 4096))
    finally:
        os.close(fd)


@tiers("leaves", [0, 1, 2, 4, 8, 16, 32], [0, 0, 1, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32])
def test_full_disk(
    small_fs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leaves: list[int]
) -> None:
    """A small real filesystem, filled up to a few pages short of full before each command
    (engine and agent writing): a command fails with a clean ``No space left on device``
    line or succeeds; nothing half-written is read back; once space is freed, the next step
    continues the chain."""
    root = small_fs / "root"
    monkeypatch.setenv("UNCAGED_WORKFLOW_STORAGE_ROOT", str(root))
    fast = crashkit.write_scenario(tmp_path / "fast.yaml", crashkit.loop_roles())
    text = (EXAMPLES / "solve-issue.yaml").read_text()
    assert crashkit.cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
    threads = [
        crashkit.cli("thread", "start", "solve-issue", "-p", f"t{i}").json()["thread"]
        for i in range(2)
    ]
    filler = small_fs / "filler"
    outcomes: dict[str, int] = {}
    for i, leave in enumerate(leaves * crashkit.scaled(1, 3)):
        op = ["step", "put", "start", "fork", "kill", "step", "step"][i % 7]
        active = sorted(RootFiles(root).active())
        if op == "put":
            v = tmp_path / f"v{i}" / "solve-issue.yaml"
            v.parent.mkdir()
            v.write_text(text.replace("End-to-end issue resolution", f"Version {i}"))
            args = ["workflow", "put", str(v)]
        elif op == "start":
            args = ["thread", "start", "solve-issue", "-p", f"started {i}"]
        elif op == "fork":
            args = ["thread", "fork", RootFiles(root).active()[active[0]]]
        elif op == "kill" and len(active) > 2:
            args = ["thread", "kill", active[-1]]
        else:
            args = ["thread", "step", active[i % len(active)], "--agent", fast]
        _fill(filler, leave)
        r = crashkit.cli(*args)
        filler.unlink()
        key = f"{args[0]} {args[1]}: " + ("ok" if r.code == 0 else "No space left on device")
        outcomes[key] = outcomes.get(key, 0) + 1
        if r.code != 0:  # one error line of uwf's (after any lines passed through)
            agent_failed = "error: agent command failed" in r.err  # exit 5 under the loop contract
            assert r.code == (5 if agent_failed else 1), r.err
            assert len(crashkit.error_lines(r.err)) == 1, r.err
            assert r.err.endswith(": No space left on device\n"), r.err
            assert "internal error" not in r.err, r.err
        crashkit.check_invariants(root, allow_torn=True)
        target = sorted(RootFiles(root).active())[0]
        crashkit.assert_continues(root, target, fast)
    print(f"full disk: {outcomes}")
    assert any(k.endswith("No space left on device") for k in outcomes)
    assert threads
