"""How far one fan-out tree may grow (docs/format.md, "Fan-out and join").

A thread started by hand (or a fork, a resume) is the **root** of a tree: its fan-outs start
children, theirs grandchildren, each child's record naming its ``parent``. ``fanOut`` in
config.yaml bounds every tree: ``maxDepth`` levels of children below its root, and
``maxThreads`` threads started in all. The root's record counts the threads its tree has
started (``ThreadInfo.descendants``); a fan-out is refused when its children would be deeper
than ``maxDepth`` or the count would pass ``maxThreads``, and otherwise adds them to the count
in the same atomic change that creates them (``ThreadTable.fan_out``), so racing workers never
start more than the limit between them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from uwf.util.errors import UwfError
from uwf.util.tuples import NamedTuple
from uwf.util.ulid import ThreadId


class Lineage(Protocol):
    """What ``locate`` reads of a thread's recorded info (``backend.base.ThreadInfo``)."""

    @property
    def parent(self) -> ThreadId | None: ...
    @property
    def descendants(self) -> int: ...


class Record(Protocol):
    """What ``locate`` reads of an active thread's record (``backend.base.ActiveThread``,
    described here because ``backend.base`` imports this module)."""

    @property
    def thread(self) -> ThreadId: ...
    @property
    def info(self) -> Lineage: ...


WALK_LIMIT = 1000  # parents followed at most (a hand-edited cycle of parents ends there)
SEE = 'docs/format.md, "Fan-out and join"'


class FanOutLimits(NamedTuple):
    """``fanOut`` in config.yaml: levels of children below a root, threads a tree starts."""

    depth: int = 3
    threads: int = 1000


class FanOutRefused(UwfError):
    """A fan-out the tree's limits do not allow; nothing was started."""


class Place(NamedTuple):
    """Where a thread stands in its tree: its root, its level (0: the root itself), the
    threads the tree has started, and the ancestor that has ended, if one has (its tree is
    being killed)."""

    root: ThreadId
    depth: int
    started: int
    ended: ThreadId | None = None


def locate(thread: ThreadId, get: Callable[[ThreadId], Record | None]) -> Place:
    """``thread``'s place, from the active records ``get`` answers (``thread`` is active)."""
    record = get(thread)
    depth = 0
    while record is not None and record.info.parent is not None and depth < WALK_LIMIT:
        parent = get(record.info.parent)
        depth += 1
        if parent is None:
            return Place(record.info.parent, depth, 0, ended=record.info.parent)
        record = parent
    if record is None:
        return Place(thread, depth, 0, ended=thread)
    return Place(record.thread, depth, record.info.descendants)


def refusal(
    thread: ThreadId, place: Place, count: int, limits: FanOutLimits
) -> FanOutRefused | None:
    """Why ``thread`` (at ``place``) may not start ``count`` children, None when it may."""
    if count == 0:
        return None
    if place.ended is not None:
        return FanOutRefused(
            f"fan-out refused: thread {thread} belongs to the tree of {place.ended}, which has "
            "ended"
        )
    if place.depth + 1 > limits.depth:
        return FanOutRefused(
            f"fan-out refused: thread {thread} is {place.depth} level(s) below its root "
            f"{place.root}, and its children would pass fanOut.maxDepth ({limits.depth}) of "
            f"config.yaml ({SEE})"
        )
    if place.started + count > limits.threads:
        return FanOutRefused(
            f"fan-out refused: the tree of thread {place.root} has started {place.started} "
            f"thread(s), and {count} more would pass fanOut.maxThreads ({limits.threads}) of "
            f"config.yaml ({SEE})"
        )
    return None
