"""The cost of steps and chains (docs/format.md, "Cost").

One part of ``uwf.util.outputs`` (its docstring says what these types are for)."""

# No ``from __future__ import annotations``: Python 3.11 reads ``NotRequired`` only from
# annotations that are evaluated.
from typing import TypedDict


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
