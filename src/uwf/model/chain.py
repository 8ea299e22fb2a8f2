"""Reading a thread's chain of nodes, from the head back, only as far as asked.

A head is either a StartNode (no steps yet) or a StepNode; steps link back through ``prev``
(null on the first step) and each names its StartNode in ``start``. ``iter_steps`` yields
newest first and stops where the caller stops, so a bounded read costs bounded I/O.

A StartNode (resume) continues an ended thread (docs/format.md, "Resuming an ended thread"):
its ``resumes`` is that thread's last head, so the walk goes on through it — the steps of the
ended thread come before the first step after the resume, and depths count on from them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from uwf.cas.store import Node, Store
from uwf.protocol import schemas
from uwf.protocol.workflow import Workflow
from uwf.util.base32 import NodeHash, check_hash
from uwf.util.errors import InvalidInput, NotFound
from uwf.util.tuples import NamedTuple


class Step(NamedTuple):
    hash: NodeHash
    payload: dict[str, Any]
    timestamp: int

    @property
    def role(self) -> str:
        return str(self.payload["role"])

    @property
    def prev(self) -> NodeHash | None:
        prev = self.payload.get("prev")
        return NodeHash(prev) if isinstance(prev, str) else None

    @property
    def start(self) -> NodeHash:
        return NodeHash(str(self.payload["start"]))

    @property
    def depth(self) -> int | None:
        value = self.payload.get("depth")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def compact(self) -> NodeHash | None:
        """The Text node summarising every step before this one (docs/format.md,
        "Compaction"), or None."""
        value = self.payload.get("compact")
        return NodeHash(value) if isinstance(value, str) else None


class Start(NamedTuple):
    hash: NodeHash
    payload: dict[str, Any]
    timestamp: int

    @property
    def workflow(self) -> NodeHash:
        return NodeHash(str(self.payload["workflow"]))

    @property
    def prompt(self) -> str:
        return str(self.payload.get("prompt", ""))

    @property
    def max_rounds(self) -> int | None:
        value = self.payload.get("maxRounds")
        return value if isinstance(value, int) else None

    @property
    def resumes(self) -> NodeHash | None:
        """The head of the ended thread this start resumes, or None for a new thread."""
        value = self.payload.get("resumes")
        return NodeHash(value) if isinstance(value, str) else None

    @property
    def resume_text(self) -> str:
        """What the person who resumed the thread wrote (``thread resume -p``)."""
        value = self.payload.get("resumeText")
        return value if isinstance(value, str) else ""


def require_step(store: Store, h: str) -> Step:
    """The StepNode a user named by hash: checked before it becomes a path, refused when it
    is missing or not a StepNode."""
    step_hash = check_hash(h)
    node = store.get(step_hash)
    if node is None:
        raise NotFound(f"CAS node not found: {h}{store.missing_hint(h)}")
    if node.type not in schemas.hashes().steps:
        raise InvalidInput(f"node {h} is not a StepNode")
    return Step(step_hash, node.payload, node.timestamp)


def load_head(store: Store, head: NodeHash) -> Start | Step:
    """The node a thread head points at: a StartNode or a StepNode."""
    h = schemas.hashes()
    node = store.get(head)
    if node is None:
        raise NotFound(f"CAS node not found: {head}{store.missing_hint(head)}")
    if node.type in h.starts:
        return Start(head, node.payload, node.timestamp)
    if node.type in h.steps:
        return Step(head, node.payload, node.timestamp)
    raise InvalidInput(f"node {head} is not a StartNode or StepNode")


def load_start(store: Store, h: NodeHash) -> Start:
    node = store.get(h)
    if node is None or node.type not in schemas.hashes().starts:
        raise NotFound(f"StartNode not found: {h}{store.missing_hint(h)}")
    return Start(h, node.payload, node.timestamp)


def start_of(store: Store, head: Start | Step) -> Start:
    return head if isinstance(head, Start) else load_start(store, head.start)


def _resumed(store: Store, start: NodeHash | Start) -> Step | None:
    """The last step of the ended thread a StartNode (resume) continues, else None."""
    node = start if isinstance(start, Start) else _start_or_none(store, start)
    if node is None or node.resumes is None:
        return None
    resumed = load_head(store, node.resumes)
    return resumed if isinstance(resumed, Step) else None


def _start_or_none(store: Store, h: NodeHash) -> Start | None:
    node = store.get(h)
    if node is None or node.type not in schemas.hashes().starts:
        return None
    return Start(h, node.payload, node.timestamp)


def iter_steps(store: Store, head: Start | Step, *, keep: bool = True) -> Iterator[Step]:
    """The steps of the chain ending at ``head``, newest first (through a resume, on into
    the steps of the thread it resumed). ``keep=False``: the steps read are not kept by the
    process (``Store.get``): a walk of the whole chain."""
    current = _resumed(store, head) if isinstance(head, Start) else head
    step_types = schemas.hashes().steps
    while current is not None:
        yield current
        prev = current.payload.get("prev")  # ``Step.prev``, without a call per step
        if not isinstance(prev, str):
            # only a step after a resume has no prev and a depth above 1: a plain first step
            # (depth 1) costs no read of its StartNode
            resumed = current.depth is None or current.depth > 1
            current = _resumed(store, current.start) if resumed else None
            continue
        node = store.get(prev, keep=keep)
        if node is None:
            raise NotFound(
                f"CAS node not found while walking chain: {prev}{store.missing_hint(prev)}"
            )
        if node.type not in step_types:
            return
        current = Step(NodeHash(prev), node.payload, node.timestamp)


def steps_oldest_first(store: Store, head: Start | Step) -> list[Step]:
    steps = list(iter_steps(store, head))
    steps.reverse()
    return steps


def workflow_node(store: Store, h: str) -> Node:
    """The Workflow node ``h``: the one way uwf loads a stored workflow."""
    node = store.get(h)
    if node is None:
        raise NotFound(f"CAS node not found: {h}{store.missing_hint(h)}")
    if node.type not in schemas.hashes().workflows:
        raise InvalidInput(f"node {h} is not a Workflow (type {node.type})")
    return node


def load_workflow(store: Store, h: NodeHash) -> Workflow:
    """The Workflow node ``h`` (``workflow_node``), typed: a view over its payload, nothing
    copied (``uwf.protocol.workflow``)."""
    return Workflow(h, workflow_node(store, h).payload)


def output_of(store: Store, step: Step, *, keep: bool = True) -> Any:
    """The payload of a step's structured output ({} when missing)."""
    node = store.get(str(step.payload.get("output")), keep=keep)
    return node.payload if node is not None else {}


def depth_of(store: Store, head: Start | Step) -> int:
    """The number of steps in the chain ending at ``head`` (O(1) when steps carry ``depth``);
    a StartNode (resume) counts the steps of the thread it resumes."""
    if isinstance(head, Start):
        resumed = _resumed(store, head)
        return 0 if resumed is None else depth_of(store, resumed)
    count = 0
    for step in iter_steps(store, head):
        if step.depth is not None:
            return count + step.depth
        count += 1
    return count
