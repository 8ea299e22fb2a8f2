"""What the Python API returns (docs/api.md, "Results"): frozen, typed records with
snake_case fields, built from what the engine returns for the CLI's JSON (whose camelCase
keys stay the CLI's). A field added later is added with a default, so that code reading a
record keeps working; none is renamed or removed within a major version.

The step's own record, ``StepResult``, is the engine's (``engine.step.commit``): already a
frozen dataclass of these conventions, shared rather than copied.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from uwf.engine.step.commit import StepResult

__all__ = [
    "Child",
    "Cost",
    "Failure",
    "Forked",
    "Run",
    "Start",
    "Started",
    "Step",
    "StepResult",
    "Steps",
    "ThreadState",
    "ThreadSummary",
    "Usage",
    "Waiting",
    "WorkflowCheck",
    "WorkflowInfo",
    "WorkflowPut",
]


@dataclass(frozen=True)
class Usage:
    """Tokens of a step's (or a chain's) model calls."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    calls: int


@dataclass(frozen=True)
class Cost:
    """What a chain cost (docs/format.md, "Cost"): the agents' time and tokens, and the time
    from the thread's start to its head (``elapsed_ms``)."""

    duration_ms: int
    usage: Usage
    elapsed_ms: int


@dataclass(frozen=True)
class Waiting:
    """Why a thread waits: the role it waits for, since when (unix ms), what the agent said
    (``children`` when it waits for the child threads of a fan-out)."""

    role: str
    since: int
    reason: str | None = None


@dataclass(frozen=True)
class Failure:
    """A thread's last failed step (docs/format.md, "Thread state", "Retries"): its error
    line and exit code, when, how many attempts failed at this head, the retry policy's
    verdict (``retry_at``: no fleet stepper tries before; ``exhausted``: status failed)."""

    error: str
    code: int
    at: int
    attempts: int
    since: int
    role: str | None = None
    agent: str | None = None
    host: str | None = None
    limit: int | None = None
    retry_at: int | None = None
    exhausted: bool = False


@dataclass(frozen=True)
class Child:
    """A child thread a fan-out's parent waits for, and its status."""

    thread: str
    status: str


@dataclass(frozen=True)
class ThreadState:
    """A thread as ``thread show`` sees it: where its head is, its status (``idle``,
    ``running``, ``waiting``, ``failing``, ``failed``; ``completed``, ``killed``,
    ``max_rounds`` once it ended), its steps and cost, and why it waits or failed."""

    thread: str
    workflow: str
    head: str
    done: bool
    status: str
    steps: int
    cost: Cost
    cwd: str | None = None
    priority: int = 0
    waiting: Waiting | None = None
    failure: Failure | None = None
    children: tuple[Child, ...] = ()
    worker: str | None = None  # the ``uwf worker`` stepping it now


@dataclass(frozen=True)
class ThreadSummary:
    """A thread as ``thread list`` lists it."""

    thread: str
    workflow: str
    head: str
    status: str
    task: str | None
    created_at: int | None
    priority: int = 0
    waiting: Waiting | None = None
    failure: Failure | None = None


@dataclass(frozen=True)
class Start:
    """A thread's StartNode: its workflow and task (``prompt``)."""

    hash: str
    workflow: str
    prompt: str
    timestamp: int


@dataclass(frozen=True)
class Step:
    """One step of a chain: the role that ran, its output, the agent, what it cost."""

    number: int  # 1 for the first step
    hash: str
    role: str
    output: Any
    detail: str | None
    agent: str
    timestamp: int
    duration_ms: int | None = None
    usage: Usage | None = None


@dataclass(frozen=True)
class Steps:
    """A thread's chain, oldest first, and its cost (``thread steps``)."""

    thread: str
    workflow: str
    start: Start
    steps: tuple[Step, ...]
    cost: Cost


@dataclass(frozen=True)
class Started:
    """A thread ``start`` created (or, with a start key, found: ``existing``)."""

    thread: str
    workflow: str
    key: str | None = None
    existing: bool = False


@dataclass(frozen=True)
class Forked:
    """A thread ``fork`` created at an existing step (or StartNode)."""

    thread: str
    forked_from: str


#: Why ``Store.run`` returned: the thread ended, it waits (a person, a deferral, a fan-out's
#: children), or the steps asked for ran.
Outcome = Literal["done", "waiting", "count"]


@dataclass(frozen=True)
class Run:
    """The steps ``Store.run`` ran, oldest first, and why it stopped."""

    thread: str
    steps: tuple[StepResult, ...]
    outcome: Outcome
    waiting: Waiting | None = None  # outcome "waiting": why

    @property
    def status(self) -> str:
        """The thread's status after the last step (``active`` when none ran)."""
        if self.outcome == "waiting":
            return "waiting"
        return self.steps[-1].status if self.steps else "active"


@dataclass(frozen=True)
class WorkflowPut:
    """A workflow file stored: the name the registry now points at this hash."""

    name: str
    hash: str
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkflowCheck:
    """A workflow file checked, nothing written: the hash ``put`` would give, or the problems
    that refuse it."""

    file: str
    name: str | None
    hash: str | None
    problems: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class WorkflowInfo:
    """A workflow ``start`` can run: a project file (``origin`` local, ``hash`` "(local)")
    or a registry entry (``global``)."""

    name: str
    hash: str
    origin: str


# -- from the engine's JSON shapes --------------------------------------------------------------


def usage_of(raw: Mapping[str, Any]) -> Usage:
    return Usage(raw["promptTokens"], raw["completionTokens"], raw["totalTokens"], raw["calls"])


def cost_of(raw: Mapping[str, Any]) -> Cost:
    return Cost(raw["durationMs"], usage_of(raw), raw.get("elapsedMs", 0))


def waiting_of(raw: Mapping[str, Any] | None) -> Waiting | None:
    return None if raw is None else Waiting(raw["role"], raw["since"], raw.get("reason"))


def failure_of(raw: Mapping[str, Any] | None) -> Failure | None:
    if raw is None:
        return None
    return Failure(
        raw["error"],
        raw["code"],
        raw["at"],
        raw["attempts"],
        raw["since"],
        raw.get("role"),
        raw.get("agent"),
        raw.get("host"),
        raw.get("limit"),
        raw.get("retryAt"),
        bool(raw.get("exhausted", False)),
    )


def state_of(raw: Mapping[str, Any]) -> ThreadState:
    worker = raw.get("worker")
    return ThreadState(
        thread=raw["thread"],
        workflow=raw["workflow"],
        head=raw["head"],
        done=raw["done"],
        status=raw["status"],
        steps=raw["steps"],
        cost=cost_of(raw["cost"]),
        cwd=raw.get("cwd"),
        priority=raw.get("priority", 0),
        waiting=waiting_of(raw.get("waiting")),
        failure=failure_of(raw.get("failure")),
        children=tuple(Child(c["thread"], c["status"]) for c in raw.get("children", ())),
        worker=worker["id"] if worker is not None else None,
    )


def summary_of(raw: Mapping[str, Any]) -> ThreadSummary:
    return ThreadSummary(
        thread=raw["thread"],
        workflow=raw["workflow"],
        head=raw["head"],
        status=raw["status"],
        task=raw["task"],
        created_at=raw["createdAt"],
        priority=raw.get("priority", 0),
        waiting=waiting_of(raw.get("waiting")),
        failure=failure_of(raw.get("failure")),
    )


def start_of(raw: Mapping[str, Any]) -> Start:
    return Start(raw["hash"], raw["workflow"], raw["prompt"], raw["timestamp"])


def step_of(number: int, raw: Mapping[str, Any]) -> Step:
    usage = raw.get("usage")
    return Step(
        number=number,
        hash=raw["hash"],
        role=raw["role"],
        output=raw["output"],
        detail=raw["detail"],
        agent=raw["agent"],
        timestamp=raw["timestamp"],
        duration_ms=raw.get("durationMs"),
        usage=usage_of(usage) if usage is not None else None,
    )


def steps_of(raw: Mapping[str, Any]) -> Steps:
    start, *rest = raw["steps"]
    return Steps(
        thread=raw["thread"],
        workflow=raw["workflow"],
        start=start_of(start),
        steps=tuple(step_of(n, entry) for n, entry in enumerate(rest, 1)),
        cost=cost_of(raw["cost"]),
    )
