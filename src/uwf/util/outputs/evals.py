"""What the ``eval`` commands print (docs/evals.md).

One part of ``uwf.util.outputs`` (its docstring says what these types are for)."""

# No ``from __future__ import annotations``: Python 3.11 reads ``NotRequired`` only from
# annotations that are evaluated.
from typing import Any, NotRequired, TypedDict

from uwf.util.base32 import NodeHash
from uwf.util.ulid import ThreadId


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
