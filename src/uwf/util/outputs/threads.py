"""What the ``thread`` and ``step`` commands print: threads, their steps, their
fan-outs, forks, bulk actions, artifacts and turns, and the fleet's workers.

One part of ``uwf.util.outputs`` (its docstring says what these types are for)."""

# No ``from __future__ import annotations``: Python 3.11 reads ``NotRequired`` only from
# annotations that are evaluated.
from typing import Any, NotRequired, TypedDict

from uwf.util.base32 import NodeHash
from uwf.util.outputs.cost import ThreadCost, Usage
from uwf.util.ulid import ThreadId


class ThreadStarted(TypedDict):
    """``thread start``; with ``--key``, the key and whether the thread existed already
    (docs/format.md, "Start keys")."""

    workflow: NodeHash
    thread: ThreadId
    key: NotRequired[str]
    existing: NotRequired[bool]


class StepLine(TypedDict):
    """One step of ``thread step`` (and ``thread answer``): ``status`` is the thread's after
    the step (``active``, ``completed``, ``max_rounds``, ``killed``)."""

    workflow: NodeHash
    thread: ThreadId
    head: NodeHash
    role: str | None
    done: bool
    status: str
    children: NotRequired[list[ThreadId]]  # the child threads the step started (fan-out)


class RerunLine(StepLine):
    """``thread rerun``: the step's line in the new thread, and the step it reran."""

    rerunOf: NodeHash


class WorkerStep(StepLine):
    """A step of ``uwf worker``: the step's line and how long it took."""

    ms: int


class WorkerFailure(TypedDict):
    """A failed step of ``uwf worker``: the error line and the exit code ``thread step``
    would have given."""

    thread: ThreadId
    error: str
    exit: int
    ms: int


class WorkerListed(TypedDict):
    """A worker of ``uwf worker list`` (docs/scale-out.md, "Seeing the workers"): ``state``
    is ``running``, ``idle``, ``lost`` or ``stopped``; ``steps`` and ``failed`` as of its last
    heartbeat; ``thread`` and ``role`` while it steps; ``stopped`` once it exited."""

    id: str
    host: str
    pid: int
    state: str
    started: int
    heartbeat: int
    steps: int
    failed: int
    thread: NotRequired[ThreadId]
    role: NotRequired[str]
    stopped: NotRequired[int]


class WorkerShown(TypedDict):
    """The ``uwf worker`` stepping a thread (``thread show``): its id and its process."""

    id: str
    pid: NotRequired[int]
    host: NotRequired[str]
    since: NotRequired[int]


class ResumeLine(StepLine):
    """``thread resume``: the step's line; ``resumedFrom`` when it resumed an ended thread
    (the line is then the new thread's)."""

    resumedFrom: NotRequired[ThreadId]


class PokeLine(StepLine):
    """``thread poke``: the step's line; ``poked`` says what the thread was doing
    (``waiting``, ``fanned-out``, ``failing``, ``idle``), ``redid`` the step an idle
    thread's poke did again."""

    poked: str
    redid: NotRequired[NodeHash]


class DryRun(StepLine):
    """``thread step --dry-run``: the plan; ``prompt`` and ``agent`` unless the thread ends,
    ``cwd`` when its agent works in a directory of its own (``--cwd``, ``location``)."""

    prompt: NotRequired[str]
    agent: NotRequired[list[str]]
    cwd: NotRequired[str]
    dryRun: bool


class BackgroundStarted(TypedDict):
    """``thread step --background``: the run that holds the thread, and its log file."""

    thread: ThreadId
    pid: int
    log: str


class BackgroundStopped(TypedDict):
    """``thread stop``."""

    thread: ThreadId
    stopped: bool


class WaitingShown(TypedDict):
    """A thread that waits for a role (``thread show``, ``thread list``)."""

    role: str
    since: int
    reason: NotRequired[str]


class FailureShown(TypedDict):
    """A thread's last failure (``thread show``, ``thread list``: docs/format.md, "Thread
    state"): the attempts that failed at its head since its last step landed."""

    error: str
    code: int
    at: int
    attempts: int
    since: int
    role: NotRequired[str]
    agent: NotRequired[str]
    host: NotRequired[str]
    limit: NotRequired[int]  # the attempts the retry policy allows (docs/format.md, "Retries")
    retryAt: NotRequired[int]  # unix ms: no fleet stepper tries the thread before
    exhausted: NotRequired[bool]  # true: the last allowed attempt failed (status failed)


class Prioritized(TypedDict):
    """``thread priority``: the thread's new priority and the one it had."""

    thread: str
    priority: int
    previous: int


class Retried(TypedDict):
    """``thread retry``: the thread, back to be stepped, and the failure it ended."""

    thread: str
    retried: bool
    failure: FailureShown


class BackgroundShown(TypedDict, total=False):
    """The background run holding a thread (``thread show``), as far as it recorded itself."""

    pid: int
    host: str
    since: int
    log: str


class StartEntry(TypedDict):
    """The StartNode of a chain (``thread steps``, ``thread show --full``)."""

    hash: NodeHash
    workflow: NodeHash
    prompt: str
    timestamp: int


class StepSpent(TypedDict):
    """What a step's detail records of its own cost (null where it records nothing)."""

    durationMs: int | None
    usage: Usage | None


class StepEntry(StepSpent):
    """One step of a chain (``thread steps``, ``thread show --full``): its output expanded."""

    hash: NodeHash
    role: str
    output: Any
    detail: str | None
    agent: str
    timestamp: int


class StartAt(StartEntry):
    """``thread steps --at 0``: the StartNode, with its thread and number."""

    thread: ThreadId
    number: int


class StepAt(StepEntry):
    """``thread steps --at N`` (N > 0): step N as ``thread steps`` lists it, with its thread
    and number."""

    thread: ThreadId
    number: int


class ChildShown(TypedDict):
    """A child thread a parent waits for (``thread show``): its status as ``thread list``
    says it (``missing`` when the store has no trace of it)."""

    thread: ThreadId
    status: str


class ThreadShown(TypedDict):
    """``thread show``."""

    workflow: NodeHash
    thread: ThreadId
    head: NodeHash
    done: bool
    status: str
    steps: int
    cwd: NotRequired[str]
    waiting: NotRequired[WaitingShown]
    failure: NotRequired[FailureShown]
    priority: NotRequired[int]  # when not 0 (docs/format.md, "Priorities")
    background: NotRequired[BackgroundShown]
    worker: NotRequired[WorkerShown]
    children: NotRequired[list[ChildShown]]
    cost: ThreadCost
    chain: NotRequired[list[StartEntry | StepEntry]]


class FanOutShown(TypedDict):
    """A parent waiting for the children its fan-out started (``thread list``): how many, and
    how many of them are still active."""

    children: int
    active: int


class ThreadListed(TypedDict):
    """One thread of ``thread list``: ``task`` is the first line of its task (null when it
    cannot be read), ``createdAt`` unix ms from its id."""

    thread: ThreadId
    workflow: str
    head: NodeHash
    status: str
    task: str | None
    createdAt: int | None
    waiting: NotRequired[WaitingShown]
    failure: NotRequired[FailureShown]
    priority: NotRequired[int]  # when not 0
    fanOut: NotRequired[FanOutShown]  # a fan-out parent (its "waiting" role joins them)


class ThreadSteps(TypedDict):
    """``thread steps`` (``step list``): the StartNode, then every step, oldest first."""

    thread: ThreadId
    workflow: NodeHash
    steps: list[StartEntry | StepEntry]
    cost: ThreadCost


class Compacted(TypedDict):
    """``thread compact``: the summary recorded for the step after ``head``."""

    thread: ThreadId
    head: NodeHash
    summary: NodeHash
    characters: int


class ForkedFrom(TypedDict):
    """Where a fork starts; ``edited`` for a fork with an edited output."""

    step: NodeHash
    edited: NotRequired[bool]


class Forked(TypedDict):
    """``thread fork`` (``step fork``)."""

    thread: ThreadId
    forkedFrom: ForkedFrom


class ForkedOnto(Forked):
    """``thread fork --workflow``: the copy's workflow and head."""

    workflow: NodeHash
    head: NodeHash


class ForkedEdited(Forked):
    """``thread fork --output``/``--edit``: the new thread and its new head."""

    head: NodeHash


class Killed(TypedDict):
    """``thread kill``."""

    thread: ThreadId
    killed: bool


BulkResult = Killed | BackgroundStopped | Retried | RerunLine


class BulkLine(TypedDict):
    """One thread of a bulk ``thread kill``, ``stop``, ``retry`` or ``rerun``
    (docs/scale-out.md, "Bulk actions"): the thread as selected, then ``result`` (what the
    single command prints), ``skipped`` (why it was left alone) or ``error`` and ``exit``
    (the code the single command would have exited with); ``dryRun`` with ``--dry-run``."""

    thread: ThreadId
    action: str
    workflow: NotRequired[str]
    status: NotRequired[str]  # when selected, as ``thread list`` says it
    result: NotRequired[BulkResult]
    skipped: NotRequired[str]
    error: NotRequired[str]
    exit: NotRequired[int]
    dryRun: NotRequired[bool]


class Exported(TypedDict):
    """``thread export``."""

    thread: str
    file: str
    bytes: int


class ArtifactListed(TypedDict):
    """One artifact of ``step artifacts`` (docs/format.md, "Artifacts")."""

    path: str
    hash: NodeHash
    size: int


class ArtifactExtracted(ArtifactListed):
    """One artifact of ``step artifacts --extract``: where it was written."""

    file: str


class TurnShown(TypedDict):
    """One turn of a step (``step turns``): an AgentTurn's fields, its text bounded (and
    ``truncated`` then)."""

    index: int
    role: str
    content: str
    toolCalls: NotRequired[list[dict[str, str]]]
    reasoning: NotRequired[str]
    truncated: NotRequired[bool]


class StepTurn(TypedDict):
    """``step turns``: one turn of the thread's step ``step`` (its number) of ``role``;
    ``running`` when read from the step in flight, not from its landed detail."""

    thread: str
    step: int
    role: str
    running: bool
    turn: TurnShown
