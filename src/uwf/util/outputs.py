"""What every command prints: one ``TypedDict`` per JSON object, the contract that scripts and
agents read (docs/format.md, "Command output", names each with its command).

The engine's functions return these types, so ``mypy --strict`` sees a renamed or missing key;
``tests/test_outputs.py`` drives each command through the real CLI and compares the keys it
prints with its type. Modules that only annotate with them import this module under
``TYPE_CHECKING``: the classes cost nothing at start-up.

A key is ``NotRequired`` when a command prints it only sometimes (``thread show``'s
``waiting`` while a thread waits). Values that are whatever a node holds (a payload, an
output, a detail) are ``Any``.
"""

# No ``from __future__ import annotations`` here: Python 3.11 reads ``NotRequired`` (the
# types' __required_keys__) only from annotations that are evaluated.
from typing import Any, NotRequired, TypedDict

from uwf.util.base32 import NodeHash
from uwf.util.ulid import ThreadId

# -- cost (docs/format.md, "Cost") -------------------------------------------------------------


class Usage(TypedDict):
    """A step's model calls, as the servers reported them."""

    promptTokens: int
    completionTokens: int
    totalTokens: int
    calls: int


class Total(Usage):
    """The sums over a chain up to a step: its duration and its model calls."""

    durationMs: int


class ThreadCost(Total):
    """``thread show``'s and ``thread steps``' ``cost``: the total plus the time from the
    task to the head."""

    elapsedMs: int


# -- workflows ---------------------------------------------------------------------------------


class WorkflowRef(TypedDict):
    """``workflow put``."""

    name: str
    hash: NodeHash


class WorkflowChecked(TypedDict):
    """One file of ``workflow check``: ``hash`` is what ``put`` would give (null: refused)."""

    file: str
    name: str | None
    hash: NodeHash | None
    problems: list[str]


class WorkflowShown(TypedDict):
    """``workflow show``: ``name`` is the registry name pointing at the hash, if any."""

    hash: NodeHash
    name: str | None
    type: NodeHash
    payload: Any
    timestamp: int


class WorkflowListed(TypedDict):
    """One workflow of ``workflow list``: ``origin`` is ``local`` (a project file, hash
    ``(local)``), ``global`` (the registry) or ``paths`` (a file of ``workflowPaths``, hash
    ``(file)``)."""

    name: str
    hash: str
    origin: str


class WorkflowVersion(TypedDict):
    """One version of ``workflow history``."""

    hash: NodeHash
    timestamp: int
    current: bool


class WorkflowRolledBack(TypedDict):
    """``workflow rollback``."""

    name: str
    hash: NodeHash
    previous: NodeHash | None


# -- threads -----------------------------------------------------------------------------------


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


# -- the store ---------------------------------------------------------------------------------


class NodeShown(TypedDict):
    """``cas get``: ``timestamp`` with ``--timestamp``."""

    type: NodeHash
    payload: Any
    timestamp: NotRequired[int]


class Hashed(TypedDict):
    """``cas put``, ``cas put-text``."""

    hash: NodeHash


class Exists(TypedDict):
    """``cas has``."""

    exists: bool


class Refs(TypedDict):
    """``cas refs``."""

    refs: list[NodeHash]


class Walked(TypedDict):
    """``cas walk``."""

    hashes: list[NodeHash]


class Reindexed(TypedDict):
    """``cas reindex`` (``repaired``: pack indexes rebuilt from their packs' records)."""

    status: str
    nodes: int
    types: int
    repaired: NotRequired[int]


class NodeDamage(TypedDict):
    """A damaged node of ``cas verify``."""

    hash: NodeHash
    problem: str


class PackDamage(TypedDict):
    """A pack of ``cas verify`` whose own checksums or order are wrong (listed first)."""

    pack: str
    problem: str


class RootDamage(TypedDict, total=False):
    """A root of ``cas verify`` that does not resolve (docs/reliability.md, "Repairing damaged
    state"): a part of the thread state uwf cannot read as its own (``state``: ``active``,
    ``history`` or ``registry``), or an active or archived thread's head or a registry entry
    (``thread`` / ``workflow``) naming a node that is missing or of another kind."""

    state: str
    thread: str
    workflow: str
    problem: str


class Verified(TypedDict):
    """``cas verify``."""

    scanned: int
    ok: bool
    damaged: list[PackDamage | NodeDamage | RootDamage]


class Packed(TypedDict):
    """``cas pack``: nodes moved, loose nodes left, packs now and their bytes."""

    packed: int
    loose: int
    packs: int
    bytes: int


class Collected(TypedDict):
    """``cas gc``: ``packed`` after a real run, ``dryRun`` instead with ``--dry-run``."""

    scanned: int
    reachable: int
    collected: int
    bytes: int
    locks: int
    tempFiles: int
    packed: NotRequired[int]
    dryRun: NotRequired[bool]


class SchemaListed(TypedDict):
    """One schema of ``cas schema list``."""

    hash: NodeHash
    title: str


class CopyCounts(TypedDict):
    """What ``store copy`` copied of one part, and what TO had already."""

    copied: int
    present: int


# "from" is a Python keyword: these two are spelt the functional way.
StoreInitialised = TypedDict("StoreInitialised", {"store": str, "schema": int, "from": int})
StoreInitialised.__doc__ = "``store init``: the store and its schema version, before and now."

StoreCopied = TypedDict(
    "StoreCopied",
    {
        "from": str,
        "to": str,
        "nodes": CopyCounts,
        "registry": CopyCounts,
        "history": CopyCounts,
        "threads": CopyCounts,
        "verified": bool,
    },
)
StoreCopied.__doc__ = "``store copy``."


# -- this machine ------------------------------------------------------------------------------


class ModelCheck(TypedDict):
    """A one-token call to the configured model (``uwf setup``)."""

    ok: bool
    error: NotRequired[str]


class SetupDone(TypedDict):
    """``uwf setup`` with a provider and a model."""

    configPath: str
    envPath: str | None
    provider: str
    model: str
    defaultAgent: str
    validation: ModelCheck


class DefaultAgentSet(TypedDict):
    """``uwf setup --default-agent``."""

    configPath: str
    defaultAgent: str


class LogFile(TypedDict):
    """One file of ``log list``."""

    name: str
    size: int
    date: str


class LogEntry(TypedDict):
    """One entry of ``log show`` (docs/format.md, "The debug log"); an entry may carry more
    string fields than these."""

    ts: str
    pid: str
    tag: str
    msg: str
    thread: NotRequired[str]
    workflow: NotRequired[str]


class LogsCleaned(TypedDict):
    """``log clean``."""

    deleted: int


# -- evals (docs/evals.md) ---------------------------------------------------------------------


class EvalRunLine(TypedDict):
    """One run of ``eval run``, printed as it is recorded: ``judges`` maps each judge's name
    to its score; ``batch`` names the whole ``eval run``; ``workdir`` with
    ``--keep-workdir``."""

    run: NodeHash
    task: str
    batch: str
    thread: ThreadId
    outcome: str
    score: float
    judges: dict[str, float]
    workdir: NotRequired[str]


class EvalListed(TypedDict):
    """One run of ``eval list``."""

    run: NodeHash
    task: str
    batch: str
    workflow: NodeHash
    workflowName: str
    agent: str | None
    thread: str
    outcome: str
    score: float
    startedAt: int
    durationMs: int


class EvalJudged(TypedDict):
    """One judge's verdict in an EvalRun: ``builtin`` or ``command`` says which judge it
    was; ``error`` why a judge scored 0 without judging."""

    name: str
    weight: float
    builtin: NotRequired[str]
    command: NotRequired[str]
    score: float
    data: Any
    error: NotRequired[str]


class EvalRunShown(TypedDict):
    """``eval report <run>``: the EvalRun node's payload, with its hash as ``run``."""

    run: NodeHash
    task: str
    taskFile: NodeHash
    batch: str
    workflow: NodeHash
    workflowName: str
    thread: str
    start: NodeHash
    head: NodeHash
    agent: str | None
    agents: list[str]
    models: list[str]
    outcome: str
    error: NotRequired[str]
    judges: list[EvalJudged]
    score: float
    startedAt: int
    durationMs: int


class EvalStats(TypedDict):
    """Scores summed up: how many, their mean, spread (sample standard deviation), min, max."""

    n: int
    mean: float
    stdev: float
    min: float
    max: float


class EvalGroup(TypedDict):
    """The runs of one task by one workflow version and agent (``eval report <task>``)."""

    workflow: NodeHash
    workflowName: str
    agent: str | None
    runs: int
    outcomes: dict[str, int]
    score: EvalStats
    judges: dict[str, EvalStats]


class EvalTaskReport(TypedDict):
    """``eval report <task>``."""

    task: str
    groups: list[EvalGroup]


class EvalCompared(TypedDict):
    """One score of ``eval diff`` on both sides: B's mean less A's (``delta``), and whether
    it is larger than both spreads together (``clear``)."""

    a: EvalStats
    b: EvalStats
    delta: float
    clear: bool


class EvalTaskDiff(TypedDict):
    """One task both sides of ``eval diff`` ran: its score and each judge's."""

    task: str
    score: EvalCompared
    judges: dict[str, EvalCompared]


class EvalDiff(TypedDict):
    """``eval diff A B``: the tasks both ran, and those only one side ran."""

    a: str
    b: str
    tasks: list[EvalTaskDiff]
    onlyA: list[str]
    onlyB: list[str]


class EvalExported(TypedDict):
    """``eval report --html FILE``."""

    report: str
    file: str
    bytes: int


class ConfigSet(TypedDict):
    """``config set``: the key as problems name it, the value it now holds (null: removed)
    and the one it held before (null: unset), secrets masked."""

    key: str
    value: Any
    previous: Any


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
