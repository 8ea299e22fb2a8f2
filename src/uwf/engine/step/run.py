"""Running a planned step's agent, and reading what it answered.

The default runner spawns the agent through ``uwf.adapters.process`` (no shell, own process
group, parent-death signal, live stderr, bounded stdout, timeout). Tests pass a runner of
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
from collections.abc import Callable, Iterator
from typing import Protocol

from uwf.adapters import process
from uwf.adapters.process import Finished
from uwf.backend.base import Backend, Waiting
from uwf.config.config import load_dotenv
from uwf.engine.step.plan import StepPlan
from uwf.model.artifacts import ENV as ARTIFACTS_ENV
from uwf.util.base32 import NodeHash, is_hash
from uwf.util.errors import AgentFailed, Deferred, UwfError
from uwf.util.log import ProcessLog
from uwf.util.ulid import now_ms

TTY_ENV = "UWF_TTY"
CHILDREN_ENV = "UWF_CHILDREN"


class Runner(Protocol):
    """Runs a plan's agent to its end; ``should_stop`` is polled while it runs."""

    def __call__(
        self, plan: StepPlan, env: dict[str, str], should_stop: Callable[[], bool]
    ) -> Finished: ...


def process_runner(
    plan: StepPlan, env: dict[str, str], should_stop: Callable[[], bool]
) -> Finished:
    """The agent as a real process (docs/format.md, "The agent protocol")."""
    return process.run(
        plan.argv,
        env,
        timeout=plan.timeout,
        stderr_prefix=f"{os.path.basename(plan.argv[0])}: ",
        should_stop=should_stop,
        what="agent command",
    )


@contextlib.contextmanager
def artifacts_dir(backend: Backend, plan: StepPlan) -> Iterator[str]:
    """A fresh, empty directory for the artifacts of one run of ``plan.thread``, removed with
    what it holds after it. The caller holds the thread's step lock."""
    path = backend.root / "cache" / "artifacts" / plan.thread
    shutil.rmtree(path, ignore_errors=True)  # a step killed before it could clean up
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700)
    except OSError as exc:
        raise UwfError(f"cannot create {path}: {exc.strerror or exc}") from None
    try:
        yield str(path)
    finally:
        shutil.rmtree(path, ignore_errors=True)


def agent_env(backend: Backend, plan: StepPlan, artifacts: str | None = None) -> dict[str, str]:
    """uwf's environment, plus ``<root>/.env`` where unset, plus the step's own variables
    (``artifacts``: the run's directory from ``artifacts_dir``)."""
    env = dict(os.environ)
    for key, value in load_dotenv(backend.root).items():
        env.setdefault(key, value)
    env.update(backend.env())
    env["UWF_EDGE_PROMPT"] = plan.prompt
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
    role (since the first deferral at this head) and return the error the step fails with."""
    assert plan.role is not None
    reason = stderr_summary(run.stderr_tail, 300).removeprefix("error: ") or None
    record = backend.threads.get(plan.thread)
    known = record.waiting if record is not None else None
    since = now_ms()
    if known is not None and known.head == plan.head and known.role == plan.role:
        since = known.since
    # a joining role that defers keeps the children it joins (docs/format.md, "Fan-out and join")
    children = known.children if known is not None and known.head == plan.head else None
    backend.threads.wait(plan.thread, Waiting(plan.role, since, plan.head, reason, children))
    log.write("D7W2K9M4", f"agent deferred role={plan.role} reason={reason}")
    said = f" ({reason})" if reason else ""
    return Deferred(
        f"thread {plan.thread} waits for {plan.role}: the agent deferred the step{said}; "
        f"answer it with uwf thread answer {plan.thread}, or step it again later"
    )


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
    if run.timed_out:
        raise AgentFailed(
            f"agent timed out after {plan.timeout:g}s ({command}); its process group was killed"
        )
    if run.code != 0:
        tail = stderr_summary(run.stderr_tail)
        raise AgentFailed(
            f"agent command failed ({command}) with exit code {run.code}"
            + (f": {tail}" if tail else "")
        )
    lines = run.stdout.strip().splitlines()
    last = lines[-1].strip() if lines else ""
    if is_hash(last):
        return last
    shown = last[:80] if last else "(empty)"
    raise AgentFailed(f"agent stdout is not a valid CAS hash: {shown}")
