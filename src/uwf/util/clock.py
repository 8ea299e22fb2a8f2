"""The one clock uwf reads where time decides what happens: retry back-off and the next
allowed attempt, priorities' aging, heartbeats, idle exits, the waits of ``thread kill`` and
``thread stop``, and the deadline of an in-process agent (docs/api.md, "Testing").

Every such read goes through this module, so that a test can put another clock in its place
(``use``; ``uwf.testing.Clock`` is one you move by hand) and skip an hour of back-off instead
of sleeping through it. The default is the system's: ``time.time_ns``, ``time.monotonic``,
``time.sleep`` and ``Event.wait``, at the cost of one attribute read per call.

What is measured rather than decided keeps the system clock: node timestamps (gc's grace
compares them with file times), an agent process's timeout (the process runs in real time),
the durations a detail records.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

__all__ = [
    "Clock",
    "SystemClock",
    "Waitable",
    "current",
    "monotonic",
    "now_ms",
    "sleep",
    "use",
    "wait",
]


class Waitable(Protocol):
    """What ``wait`` waits on: a ``threading.Event``."""

    def is_set(self) -> bool: ...

    def wait(self, timeout: float | None = None) -> bool: ...


class Clock(Protocol):
    """A source of time: wall-clock milliseconds, a monotonic reading in seconds, a sleep,
    and a wait for an event that gives up after ``timeout`` seconds of this clock."""

    def now_ms(self) -> int: ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def wait(self, event: Waitable, timeout: float | None) -> bool: ...


class SystemClock:
    """The real clock."""

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def wait(self, event: Waitable, timeout: float | None) -> bool:
        return event.wait(timeout)


SYSTEM = SystemClock()
_clock: Clock = SYSTEM


def current() -> Clock:
    """The clock in use."""
    return _clock


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return _clock.now_ms()


def monotonic() -> float:
    """Seconds on a clock that never goes back (for deadlines and pauses)."""
    return _clock.monotonic()


def sleep(seconds: float) -> None:
    _clock.sleep(seconds)


def wait(event: Waitable, timeout: float | None) -> bool:
    """Wait up to ``timeout`` seconds (None: for ever) for ``event``; whether it is set."""
    return _clock.wait(event, timeout)


@contextmanager
def use(clock: Clock) -> Iterator[Clock]:
    """Put ``clock`` in place of the clock in use for the block (the whole process: every
    thread reads the same clock), then put the previous one back."""
    global _clock
    previous, _clock = _clock, clock
    try:
        yield clock
    finally:
        _clock = previous
