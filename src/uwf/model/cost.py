"""What a step cost: how long it took and the tokens its model calls used.

The decision (docs/format.md, "Cost"): cost lives in the step's **detail** node, never in
the StepNode (whose schema, and so whose type hash, stays what every store already holds).
A detail may carry three optional fields, written by whoever writes the step:

- ``durationMs``: the step's own duration, as its writer measured it;
- ``usage``: ``{promptTokens, completionTokens, totalTokens, calls}`` of this step's model
  calls, as the servers reported them;
- ``total``: the same counts plus ``durationMs`` summed over the whole chain up to and
  including this step, so that ``thread show`` reads a thread's cost from its head alone.

Older details that say ``duration`` (``uwf-builtin``, ``uwf-hermes`` before ``durationMs``)
count as ``durationMs``. A step whose detail has no ``total`` is summed on the way back to the
nearest step that has one (or the start).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from uwf.cas.store import Store
from uwf.model import chain
from uwf.util.tuples import NamedTuple

if TYPE_CHECKING:
    from uwf.util.outputs import StepSpent, ThreadCost, Total, Usage

TOKEN_KEYS = ("promptTokens", "completionTokens", "totalTokens", "calls")
_COUNT = {"type": "integer", "minimum": 0}
USAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": list(TOKEN_KEYS),
    "properties": dict.fromkeys(TOKEN_KEYS, _COUNT),
}
TOTAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["durationMs", *TOKEN_KEYS],
    "properties": dict.fromkeys(("durationMs", *TOKEN_KEYS), _COUNT),
}
#: The optional cost fields of a detail schema (``runner.detail_schema(..., COST_FIELDS)``).
COST_FIELDS: dict[str, Any] = {"durationMs": _COUNT, "usage": USAGE_SCHEMA, "total": TOTAL_SCHEMA}


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


# Cost is a NamedTuple and Meter a plain class, not dataclasses: every agent imports this
# module, and the agents that run at once load no ``dataclasses`` (it pulls in ``inspect``;
# tests/test_startup.py holds them to it).
class Cost(NamedTuple):
    """Durations and token counts; adding two sums them (not tuple concatenation)."""

    duration_ms: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    calls: int = 0

    def __add__(self, other: Cost) -> Cost:  # type: ignore[override]
        return Cost(
            self.duration_ms + other.duration_ms,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            self.calls + other.calls,
        )

    def usage_json(self) -> Usage:
        return {
            "promptTokens": self.prompt_tokens,
            "completionTokens": self.completion_tokens,
            "totalTokens": self.total_tokens,
            "calls": self.calls,
        }

    def total_json(self) -> Total:
        return {"durationMs": self.duration_ms, **self.usage_json()}

    def thread_json(self, elapsed_ms: int) -> ThreadCost:
        """A chain's cost as ``thread show`` and ``thread steps`` print it: the total, and
        the time from the task to the head."""
        return {**self.total_json(), "elapsedMs": max(0, elapsed_ms)}

    @classmethod
    def of_json(cls, value: Any, duration: Any = 0) -> Cost | None:
        """A ``usage`` or ``total`` object read back (None when it is not one)."""
        if not isinstance(value, dict):
            return None
        counts = [_count(value.get(key)) for key in TOKEN_KEYS]
        ms = _count(value.get("durationMs", duration))
        if ms is None or any(c is None for c in counts):
            return None
        return cls(ms, *(c or 0 for c in counts))


_NOTHING = Cost()  # the cost of a step that records none (a tuple: shared safely)


def _payload(store: Store, detail_hash: Any, *, keep: bool = True) -> Any:
    if not isinstance(detail_hash, str) or not detail_hash:
        return None
    node = store.get(detail_hash, keep=keep)
    return node.payload if node is not None else None


def recorded(detail: Any) -> tuple[int | None, Cost | None]:
    """(duration in ms, token usage) a detail payload records; None for what it does not."""
    if not isinstance(detail, dict):
        return None, None
    ms = _count(detail.get("durationMs"))
    if ms is None:
        ms = _count(detail.get("duration"))
    return ms, Cost.of_json(detail.get("usage"))


def own(detail: Any) -> Cost:
    """One step's own cost (what it did not record counts as 0). Built directly, not with
    ``_replace``: ``thread steps`` runs it once per step."""
    return _own(*recorded(detail))


def _own(ms: int | None, usage: Cost | None) -> Cost:
    if usage is None:
        return Cost(ms) if ms else _NOTHING
    return Cost(
        ms or 0, usage.prompt_tokens, usage.completion_tokens, usage.total_tokens, usage.calls
    )


def step_cost(store: Store, step: chain.Step, *, keep: bool = True) -> tuple[StepSpent, Cost]:
    """What one step's detail records of its cost (``{durationMs, usage}``, None where it
    does not), and the step's own :class:`Cost` (for sums); ``keep``: as ``Store.get``."""
    detail = _payload(store, step.payload.get("detail"), keep=keep)
    ms, usage = recorded(detail)
    spent: StepSpent = {
        "durationMs": ms,
        "usage": usage.usage_json() if usage is not None else None,
    }
    return spent, _own(ms, usage)  # the detail read once, not again by `own`


def total(store: Store, head: chain.Start | chain.Step) -> Cost:
    """The cost of the chain ending at ``head``: from the newest step whose detail has a
    ``total``, plus the steps after it (a bounded read for chains written by uwf's agents)."""
    acc = Cost()
    for step in chain.iter_steps(store, head):
        detail = _payload(store, step.payload.get("detail"))
        found = Cost.of_json(detail.get("total")) if isinstance(detail, dict) else None
        if found is not None:
            return acc + found
        acc = acc + own(detail)
    return acc


def fields(
    store: Store, prev: chain.Start | chain.Step, duration_ms: int | None, usage: Cost | None
) -> dict[str, Any]:
    """The cost fields of a new step's detail that follows ``prev``."""
    out: dict[str, Any] = {}
    if duration_ms is not None:
        out["durationMs"] = max(0, duration_ms)
    if usage is not None:
        out["usage"] = usage.usage_json()
    mine = (usage or Cost())._replace(duration_ms=max(0, duration_ms or 0))
    out["total"] = (total(store, prev) + mine).total_json()
    return out


class Meter:
    """What a running step has cost so far: started when made, fed every model reply."""

    __slots__ = ("started", "usage")

    def __init__(self, started: float | None = None, usage: Cost | None = None) -> None:
        self.started = time.monotonic() if started is None else started
        self.usage = usage  # None until a model call is recorded

    def add(self, reply: Any) -> None:
        """Count one model call; its tokens when the reply carries ``usage``
        (``uwf.adapters.llm.Reply``)."""
        got = getattr(reply, "usage", None)
        tokens = Cost(
            0,
            getattr(got, "prompt_tokens", 0) or 0,
            getattr(got, "completion_tokens", 0) or 0,
            getattr(got, "total_tokens", 0) or 0,
            1,
        )
        self.usage = tokens if self.usage is None else self.usage + tokens

    def elapsed_ms(self) -> int:
        return int((time.monotonic() - self.started) * 1000)
