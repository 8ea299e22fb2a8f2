"""Running a planned step's agent, and reading what it answered.

The default runner spawns the agent through ``uwf.adapters.process`` (no shell, own process
group, watched by uwf's watchdog, live stderr, bounded stdout, timeout). Tests pass a runner of
their own (any callable with the same signature) to drive the step in-process.

Each run gets a fresh, empty directory in ``$UWF_ARTIFACTS_DIR`` (``artifacts_dir``): the
agent leaves the files it produced there, the agent kit stores them before it writes the
StepNode (docs/format.md, "Artifacts"), and the directory is removed when the run ends,
whatever its outcome. It is ``<root>/cache/artifacts/<thread>``: only the holder of the
thread's step lock uses it, and what a step killed with SIGKILL left there is removed when
the next step of the thread begins.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Protocol

from uwf.adapters import process
from uwf.adapters.process import Finished
from uwf.backend.base import Backend, Waiting
from uwf.config.envfile import load_dotenv
from uwf.engine.step.plan import StepPlan
from uwf.model import live
from uwf.model.artifacts import ENV as ARTIFACTS_ENV
from uwf.util.base32 import NodeHash, is_hash
from uwf.util.errors import AgentFailed, Deferred, UwfError, oneline
from uwf.util.log import ProcessLog
from uwf.util.secrets import redact
from uwf.util.ulid import now_ms

TTY_ENV = "UWF_TTY"
PROMPT_ENV = "UWF_EDGE_PROMPT"
PROMPT_FILE_ENV = "UWF_EDGE_PROMPT_FILE"  # set instead when the prompt is too long for it
CHILDREN_ENV = "UWF_CHILDREN"
ATTEMPTS_ENV = "UWF_PREVIOUS_ATTEMPTS"  # uwf.model.attempts.ENV (not imported by every step)


class Runner(Protocol):
    """Runs a plan's agent to its end; ``should_stop`` is polled while it runs."""

    def __call__(
        self, plan: StepPlan, env: dict[str, str], should_stop: Callable[[], bool]
    ) -> Finished: ...


def process_runner(
    plan: StepPlan,
    env: dict[str, str],
    should_stop: Callable[[], bool],
    *,
    serve: tuple[int, Callable[[], bool]] | None = None,
    pass_fds: tuple[int, ...] = (),
) -> Finished:
    """The agent as a real process (docs/format.md, "The agent protocol"); ``serve`` and
    ``pass_fds``: the store relay (``engine.step.relay``)."""
    return process.run(
        plan.argv,
        env,
        timeout=plan.timeout,
        stderr_prefix=f"{os.path.basename(plan.argv[0])}: ",
        should_stop=should_stop,
        what="agent command",
        cwd=plan.cwd,
        serve=serve,
        pass_fds=pass_fds,
    )


def check_workdir(plan: StepPlan, workdir: str | None = None) -> None:
    """The agent's working directory exists on this machine, or the step fails (exit 5)
    before anything runs: a thread started elsewhere (``thread start`` records where it ran,
    or its ``--cwd``), a ``location`` missing here. When the directory missing is the
    thread's own (``workdir``), the line says what to do (docs/scale-out.md, "Running a
    fleet"): step it where the directory exists, or go on without it in a forked thread."""
    if plan.cwd is None or os.path.isdir(plan.cwd):
        return
    import socket

    what = (
        f"thread {plan.thread}: the working directory {oneline(plan.cwd)} of {plan.role} "
        f"{_what_is(plan.cwd)} on this machine ({socket.gethostname()}); the step was not run"
    )
    if plan.cwd == workdir:
        what += (
            ". It is the directory the thread records (its --cwd, else where it was started): "
            "step the thread on a machine that has it, or go on without it in a new thread "
            f"(uwf thread fork {plan.head} --no-cwd, or --cwd DIR; then uwf thread kill "
            f"{plan.thread}). In a fleet whose machines do not share paths, start threads "
            "with --no-cwd or a --cwd every machine has"
        )
    raise AgentFailed(what)


def _what_is(path: str) -> str:
    """What is at a working directory's path that is not a directory, as the end of a
    sentence: ``does not exist``, ``is a file, not a directory``, …"""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "is a symbolic link to nothing" if os.path.islink(path) else "does not exist"
    except NotADirectoryError:
        return "does not exist (a part of its path is a file)"
    except OSError as exc:
        return f"cannot be reached ({exc.strerror or exc})"
    kinds = [
        (stat.S_ISREG, "a file"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ]
    kind = next((name for test, name in kinds if test(mode)), "not a directory")
    return f"is {kind}, not a directory"


@contextlib.contextmanager
def artifacts_dir(backend: Backend, plan: StepPlan) -> Iterator[str]:
    """A fresh, empty directory for the artifacts of one run of ``plan.thread``, removed with
    what it holds after it. The caller holds the thread's step lock.

    Whatever an agent left at that path — the directory, files in it, or a symbolic link it
    put in its place (which is removed, never followed) — is gone before the run starts, so
    that no step inherits another's files and a link cannot wedge the thread."""
    parent = backend.root / "cache" / "artifacts"
    path = parent / plan.thread
    try:
        _private_dir(parent)
        _fresh(path, lambda: path.mkdir(mode=0o700))
    except OSError as exc:
        raise UwfError(f"cannot create {path}: {exc.strerror or exc}") from None
    try:
        yield str(path)
    finally:
        with contextlib.suppress(OSError):
            _remove(path)


def _private_dir(path: Path) -> None:
    """``path`` as a real directory of ours (a symbolic link there is replaced, not used):
    one ``lstat`` when it is one already."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):  # lstat: a link to a directory is no directory
            return
    except FileNotFoundError:
        pass
    if path.is_symlink():
        path.unlink()
    path.mkdir(mode=0o700, parents=True, exist_ok=True)


def _fresh(path: Path, create: Callable[[], object]) -> None:
    """``create()`` something new at ``path``, which fails when something is there already:
    what a step killed before it could clean up left there, or an agent's link, is then
    removed first (``_remove``) and ``create`` tried again."""
    try:
        create()
    except FileExistsError:
        _remove(path)
        create()


def _remove(path: Path) -> None:
    """Remove ``path`` whatever it is, never following a symbolic link."""
    try:
        os.rmdir(path)  # the usual case, one call: nothing there, or the empty directory
        return  # a run left (rmdir never follows a link: it fails on one)
    except FileNotFoundError:
        return
    except OSError:
        pass  # a directory with files in it, a link, a file
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)


@contextlib.contextmanager
def live_turns(backend: Backend, plan: StepPlan) -> Iterator[str | None]:
    """The file the agent appends its turns to as it goes (``uwf.model.live``): created
    fresh, private, with its first line naming the step, and removed after the run. None when
    it cannot be made: a live view is never a reason for a step to fail."""
    from uwf.util.jsonfmt import dumps

    path = live.path_of(backend.root, plan.thread)
    first = {"head": plan.head, "role": plan.role, "step": plan.depth + 1}
    try:
        _private_dir(path.parent)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        made: list[int] = []
        _fresh(path, lambda: made.append(os.open(path, flags, 0o600)))
        try:
            os.write(made[0], (dumps(first) + "\n").encode())
        finally:
            os.close(made[0])
    except OSError:
        with contextlib.suppress(OSError):
            path.unlink()  # a file without its first line names no step: none at all
        yield None
        return
    try:
        yield str(path)
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


@contextlib.contextmanager
def prompt_file(backend: Backend, plan: StepPlan) -> Iterator[str | None]:
    """The path of a file holding the edge prompt when it is too long for an environment
    variable (Linux takes at most 128 KiB per ``NAME=value``), else None; the file is private
    to the user and removed after the run (docs/format.md, "The agent protocol")."""
    if process.fits_env(PROMPT_ENV, plan.prompt):
        yield None
        return
    directory = backend.root / "cache" / "prompts"
    path = directory / plan.thread
    try:
        _private_dir(directory)
        _remove(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(plan.prompt.encode("utf-8", "surrogateescape"))
    except OSError as exc:
        raise UwfError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        yield str(path)
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


def agent_env(
    backend: Backend,
    plan: StepPlan,
    artifacts: str | None = None,
    prompt: str | None = None,
    turns: str | None = None,
) -> dict[str, str]:
    """uwf's environment, plus ``<root>/.env`` where unset, plus the step's own variables
    (``artifacts``: the run's directory from ``artifacts_dir``; ``prompt``: the file of an
    edge prompt too long for ``UWF_EDGE_PROMPT``, from ``prompt_file``; ``turns``: the file
    of its live turns, from ``live_turns``)."""
    env = dict(os.environ)
    for key, value in load_dotenv(backend.root).items():
        env.setdefault(key, value)
    env.update(backend.env())
    env.pop(PROMPT_ENV, None)
    env.pop(PROMPT_FILE_ENV, None)  # never one of another step (a uwf run by an agent)
    if prompt is None:
        env[PROMPT_ENV] = plan.prompt
    else:
        env[PROMPT_FILE_ENV] = prompt
    if plan.cwd is not None:
        env["PWD"] = plan.cwd  # the agent starts there, not where uwf was run
    env.pop(CHILDREN_ENV, None)  # never those of another step (a uwf run by an agent)
    if plan.children is not None:  # the join of a fan-out (docs/format.md, "Fan-out and join")
        env[CHILDREN_ENV] = ",".join(plan.children)
    env.pop(TTY_ENV, None)
    tty = terminal()
    if tty is not None:
        env[TTY_ENV] = tty
    env.pop(ARTIFACTS_ENV, None)  # never one of another step (a uwf run by an agent)
    if artifacts is not None:
        env[ARTIFACTS_ENV] = artifacts
    env.pop(live.ENV, None)  # never the file of another step (a uwf run by an agent)
    if turns is not None:
        env[live.ENV] = turns
    env.pop(ATTEMPTS_ENV, None)  # never those of another step (a uwf run by an agent)
    if plan.previous_attempts is not None:  # docs/format.md, "Previous attempts"
        from uwf.util.jsonfmt import dumps  # not json: a step pays for neither otherwise

        env[ATTEMPTS_ENV] = dumps(dict(plan.previous_attempts))
    return env


def terminal() -> str | None:
    """The path of uwf's terminal when its stdin is one (a person runs the step), else None.

    Agents run with stdin closed in a session of their own; an agent that talks to a person
    (``uwf-human``) opens this path instead (docs/format.md, "The agent protocol")."""
    try:
        return os.ttyname(0) if os.isatty(0) else None
    except OSError:
        return None


def defer(backend: Backend, plan: StepPlan, run: Finished, log: ProcessLog) -> Deferred:
    """The agent deferred its step (exit 75): record that the thread waits at its head for the
    role (since the first deferral at this head) and return the error the step fails with.

    A reason that starts ``$SUSPEND:`` is an agent that suspended its step (the agent kit
    says so for an output whose status is ``$SUSPEND``). The reason is stored with any
    secret the agent printed masked (``uwf.util.secrets``)."""
    reason = redact(stderr_summary(run.stderr_tail, 300).removeprefix("error: ")) or None
    if reason is not None and reason.startswith(SUSPENDED):
        return suspend(backend, plan, reason.removeprefix(SUSPENDED).strip() or None, log)
    _wait(backend, plan, reason)
    log.write("D7W2K9M4", f"agent deferred role={plan.role} reason={reason}")
    return Deferred(waits_message(plan.thread, plan.role, reason))


#: How a waiting thread's reason starts when its agent suspended the step.
SUSPENDED = "$SUSPEND:"


def suspend(backend: Backend, plan: StepPlan, reason: str | None, log: ProcessLog) -> Deferred:
    """The agent's output was ``$SUSPEND``: the thread waits for the role, with the reason
    it gave (docs/format.md, "Suspending and resuming"); the error the step fails with."""
    said = " ".join((reason or "no reason given").split())
    said = said if len(said) <= 300 else said[:299] + "…"
    _wait(backend, plan, f"{SUSPENDED} {said}")
    log.write("S4W8P2N6", f"agent suspended role={plan.role} reason={said}")
    return Deferred(waits_message(plan.thread, plan.role, f"{SUSPENDED} {said}"))


def waits_message(thread: str, role: str | None, reason: str | None) -> str:
    """What a step that left ``thread`` waiting for ``role`` fails with, from the reason
    recorded with the wait (``Waiting.reason``; a suspension's starts ``$SUSPEND:``), so that
    who reads the wait later (``uwf eval run --fleet``) says what the step said."""
    if reason is not None and reason.startswith(SUSPENDED):
        said = reason.removeprefix(SUSPENDED).strip()
        return (
            f"thread {thread} waits for {role}: the agent suspended the step ({said}); "
            f"resume it with uwf thread resume {thread} -p <the answer>, "
            f"or answer it with uwf thread answer {thread}"
        )
    said = f" ({reason})" if reason else ""
    return (
        f"thread {thread} waits for {role}: the agent deferred the step{said}; "
        f"answer it with uwf thread answer {thread}, or step it again later"
    )


def _wait(backend: Backend, plan: StepPlan, reason: str | None) -> None:
    """Record that the thread waits at the plan's head for its role (since the first time it
    waited there for it). A joining role that defers or suspends keeps the children it joins
    (docs/format.md, "Fan-out and join")."""
    assert plan.role is not None
    record = backend.threads.get(plan.thread)
    known = record.waiting if record is not None else None
    since = now_ms()
    if known is not None and known.head == plan.head and known.role == plan.role:
        since = known.since
    children = known.children if known is not None and known.head == plan.head else None
    backend.threads.wait(plan.thread, Waiting(plan.role, since, plan.head, reason, children))


def stderr_summary(text: str, limit: int = 500) -> str:
    """What to quote of an agent's stderr: its last ``error:`` line (head kept, so the part
    that says what failed survives a long quote), else the tail of everything."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("error: "):
            flat = " ".join(line.split())
            return flat if len(flat) <= limit else flat[: limit - 1] + "…"
    flat = " ".join(" ".join(lines).split())
    return flat if len(flat) <= limit else "…" + flat[-(limit - 1) :]


def answered_hash(plan: StepPlan, run: Finished) -> NodeHash:
    """The StepNode hash the agent printed, or AgentFailed saying why there is none."""
    command = plan.argv[0]
    if run.timed_out and plan.python is not None:  # a thread cannot be killed (engine.step.inproc)
        raise AgentFailed(
            f"agent timed out after {plan.timeout:g}s ({command}); it was told to stop and "
            "whatever it answers now is ignored"
        )
    if run.timed_out:
        raise AgentFailed(
            f"agent timed out after {plan.timeout:g}s ({command}); its process group was killed"
        )
    if run.code != 0:
        tail = stderr_summary(run.stderr_tail)
        what = "Python agent failed" if plan.python is not None else "agent command failed"
        raise AgentFailed(
            f"{what} ({command}) with exit code {run.code}" + (f": {tail}" if tail else "")
        )
    lines = run.stdout.strip().splitlines()
    last = lines[-1].strip() if lines else ""
    if is_hash(last):
        return last
    shown = last[:80] if last else "(empty)"
    raise AgentFailed(f"agent stdout is not a valid CAS hash: {shown}")
