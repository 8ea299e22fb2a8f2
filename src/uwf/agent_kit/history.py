"""What an agent is shown of its thread: the newest summary and the recent steps, within the
context budget; writing a summary first when they no longer fit (docs/format.md, "Compaction").

The window is the newest summary in the chain plus the steps after it (``model.window``).
A summary is due when those steps cost more than the budget (``contextBudget`` in
config.yaml, in characters, summary included) or number ``compactAfter`` or more (the
workflow's, else config.yaml's). Then the configured model summarises the previous summary
plus the steps since it; the new step records the summary as its ``compact``, and the agent
is given the new summary plus the most recent of those steps that fit beside it. A summary
recorded by hand (``uwf thread compact``) is used the same way, and no model is asked.

A summary that cannot be written is a warning on stderr, never a failure: with no model
configured, or when the model fails, the agent is given the steps that fit the budget,
newest first, and the step records no summary.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from uwf.model import chain, compact
from uwf.model.window import StepView, Window, read_window, text_of, within_budget
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash
from uwf.util.errors import UwfError
from uwf.util.fences import cut
from uwf.util.tuples import NamedTuple

if TYPE_CHECKING:
    from uwf.cas.store import Store
    from uwf.model.agentcall import Stderr
    from uwf.model.cost import Meter


class Reader(Protocol):
    """What the history of a step is built from: the agent kit's ``AgentContext``, whose
    ``history`` calls ``build_history`` (described here so that this module need not import
    the context that imports it)."""

    head_node: chain.Start | chain.Step
    workflow: dict[str, Any]
    meter: Meter
    compact: NodeHash | None  # set when a summary is written

    @property
    def root(self) -> Path: ...
    @property
    def store(self) -> Store: ...
    @property
    def task(self) -> str: ...
    @property
    def stderr(self) -> TextIO | Stderr: ...


class History(NamedTuple):
    """The summary of steps 1..offset (None: no summary shown) and the steps after it shown,
    oldest first; ``offset`` is the number of steps before ``steps``; ``budget`` the context
    budget they were chosen for (the prompts cut a newest step that alone exceeds it)."""

    summary: str | None
    steps: list[StepView]
    offset: int
    budget: int


def _warn(ctx: Reader, text: str) -> None:
    ctx.stderr.write(f"warning: {text}\n")
    ctx.stderr.flush()


def _recent(summary: str | None, window: Window, budget: int) -> History:
    """``summary`` and the newest steps of ``window`` that fit beside it. A summary longer
    than half the budget (one written by hand) is cut to it, with a marker."""
    if summary is not None:
        summary = cut(summary, budget // 2, "`uwf thread read`")
    room = budget - len(summary or "")
    shown = within_budget(window.steps, room) if window.steps else []
    steps = [s for s in shown if isinstance(s, StepView)]
    return History(summary, steps, window.depth - len(steps), budget)


def build_history(ctx: Reader) -> History:
    """The history of ``ctx``'s step; sets ``ctx.compact`` when it writes a summary."""
    from uwf.config.config import load_config

    config = load_config(ctx.root)
    budget = config.context_budget
    every = ctx.workflow.get("compactAfter") or config.compact_after
    store = ctx.store
    if ctx.compact is not None:  # recorded by hand for this head
        text = text_of(store, ctx.compact) or ""
        return _recent(text, read_window(store, ctx.head_node, budget=budget), budget)
    window = read_window(store, ctx.head_node, budget=budget, count=every)
    summary = text_of(store, window.summary)
    due = (
        not window.complete
        or (every is not None and len(window.steps) >= every)
        or window.cost + len(summary or "") > budget
    )
    if not due or not window.steps:
        return _recent(summary, window, budget)
    written = _summarise(ctx, window, budget)
    if written is None:
        return _recent(summary, window, budget)
    text, ctx.compact = written
    return _recent(text, window, budget)


def _summarise(ctx: Reader, window: Window, budget: int) -> tuple[str, NodeHash] | None:
    """A new summary of everything before the new step, stored: (text, hash); None after a
    warning when it cannot be written."""
    try:
        client = compact.model_client(ctx.root)
    except UwfError as exc:
        _warn(ctx, f"no summary written: {exc.message}")
        return None
    if client is None:
        _warn(
            ctx,
            "no summary written: no model is configured for summaries (set models.compact or "
            "defaultModel in config.yaml); the agent is shown the steps that fit its context "
            "budget",
        )
        return None
    store = ctx.store
    try:
        full = window if window.complete else read_window(store, ctx.head_node, after=window)
        previous = text_of(store, full.summary)
        text = compact.summarize(
            client, ctx.task, previous, full.steps, full.offset, budget, on_reply=ctx.meter.add
        )
    except UwfError as exc:
        _warn(ctx, f"no summary written: {exc.message}")
        return None
    finally:
        client.close()
    return text, store.put(schemas.ensure(store).text, text)
