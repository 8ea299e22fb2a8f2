"""The part of a thread an agent is shown: the newest summary and the steps after it.

A StepNode may carry ``compact``, a Text node summarising every step before it
(docs/format.md, "Compaction"). Context is built by walking back from the head to the first
step that carries one: that summary, plus that step and every step after it, is the
**window**. What a step costs is measured the way the prompts count it (``step_cost``), so the
agent kit can tell when the window no longer fits its context budget.

The walk reads one StepNode per step, and a step's output and content only when its cost is
asked for; ``read_window`` can stop as soon as the steps read exceed a budget or a count, so a
thread with no summary costs a budget's worth of reads, not its length.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from uwf.cas.store import Store
from uwf.model import chain
from uwf.model.turns import last_assistant_content
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash
from uwf.util.jsonfmt import canonical, dumps
from uwf.util.tuples import NamedTuple


class StepView(Mapping[str, Any]):
    """One step as the prompts see it: ``{hash, role, agent, edgePrompt, detail, depth,
    output, content}``; ``output`` and ``content`` are read from the store on first use."""

    _LAZY = ("output", "content")

    def __init__(self, store: Store, step: chain.Step) -> None:
        self._store = store
        self.step = step
        self._data: dict[str, Any] = {
            "hash": step.hash,
            "role": step.role,
            "agent": step.payload.get("agent", ""),
            "edgePrompt": step.payload.get("edgePrompt", ""),
            "detail": step.payload.get("detail"),
            "depth": step.depth,
        }

    def __getitem__(self, key: str) -> Any:
        if key not in self._data and key in self._LAZY:
            if key == "output":
                self._data[key] = chain.output_of(self._store, self.step)
            else:
                self._data[key] = last_assistant_content(self._store, self._data["detail"])
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        yield from ("hash", "role", "agent", "edgePrompt", "detail", "depth", *self._LAZY)

    def __len__(self) -> int:
        return 8


def js_len(text: str) -> int:
    """Length in UTF-16 code units, as JavaScript counts it (quota parity with the original):
    one a character, two above U+FFFF. Counted in C — a prompt measures some 60,000
    characters a step, which a loop over them in Python took milliseconds to count."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def step_cost(step: Mapping[str, Any]) -> int:
    """What a step costs in a prompt: its ``{role, output, agent}`` as compact JSON plus its
    content (the measure of the first-visit quota)."""
    meta = {"role": step.get("role"), "output": step.get("output"), "agent": step.get("agent")}
    content = step.get("content")
    return js_len(dumps(canonical(meta))) + (js_len(content) if isinstance(content, str) else 0)


def within_budget(steps: Sequence[Mapping[str, Any]], budget: float) -> list[Mapping[str, Any]]:
    """The newest steps whose cost fits ``budget`` (at least one), in chronological order."""
    chosen: list[Mapping[str, Any]] = []
    total = 0
    for step in reversed(steps):
        size = step_cost(step)
        if chosen and total + size > budget:
            break
        chosen.insert(0, step)
        total += size
        if total >= budget:
            break
    return chosen


class Window(NamedTuple):
    """The newest summary before the head and the steps after it, oldest first.

    ``complete`` is False when the walk stopped at a limit before it reached a summary or the
    thread's start: then ``summary`` is unknown (None) and ``steps`` are only the newest ones.
    """

    summary: NodeHash | None
    steps: list[StepView]
    depth: int  # steps in the chain up to the head
    complete: bool
    cost: int  # step_cost of ``steps`` (0 when the walk did not measure)

    @property
    def offset(self) -> int:
        """The number of steps before ``steps``."""
        return self.depth - len(self.steps)


def read_window(
    store: Store,
    head: chain.Start | chain.Step,
    *,
    budget: int | None = None,
    count: int | None = None,
    after: Window | None = None,
) -> Window:
    """Walk back from ``head`` to the newest step that carries a summary (included: its
    summary covers the steps before it) or to the start.

    With ``budget`` every step's cost is measured and the walk stops once the steps read cost
    more than it; with ``count`` it stops once it has read that many. ``after`` continues an
    incomplete window to its summary or the start.
    """
    depth = chain.depth_of(store, head)
    newest: list[StepView] = list(reversed(after.steps)) if after is not None else []
    cost = after.cost if after is not None else 0
    if after is not None:
        prev = after.steps[0].step.prev if after.steps else None
        if prev is None:
            return Window(None, after.steps, depth, True, cost)
        head = chain.load_head(store, prev)
    summary: NodeHash | None = None
    complete = True
    for step in chain.iter_steps(store, head):
        view = StepView(store, step)
        newest.append(view)
        if budget is not None:
            cost += step_cost(view)
        if step.compact is not None:
            summary = step.compact
            break
        over_budget = budget is not None and cost > budget
        if over_budget or (count is not None and len(newest) >= count):
            complete = False
            break
    newest.reverse()
    return Window(summary, newest, depth, complete, cost)


def text_of(store: Store, h: NodeHash | None) -> str | None:
    """The text of a summary node (None when there is none or it is not a Text node)."""
    if h is None:
        return None
    node = store.get(h)
    if node is None or node.type != schemas.hashes().text or not isinstance(node.payload, str):
        return None
    return node.payload
