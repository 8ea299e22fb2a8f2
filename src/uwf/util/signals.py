"""Signals that stop a command: SIGTERM, SIGHUP and SIGINT become :class:`Interrupted`.

Raised in the main thread wherever it is, the exception unwinds through ``finally`` blocks
(a running agent's process group is killed on the way, see ``uwf.adapters.process``), and
the entry point prints ``error: interrupted (SIGTERM)`` and exits 128 + the signal's number
(docs/errors.md, "Signals").

A few moments must not be cut in half: between starting a process and being ready to kill
it, and while killing it. ``deferred()`` holds a signal that arrives in such a block and
raises it at the block's end.

A ``uwf worker`` drains on SIGTERM (``draining``): its handler may take the signal instead
(the step in flight finishes within ``--drain-timeout``), and a signal it does not take stops
the command as above.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

from uwf.util.errors import Interrupted

SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)

_held: list[int] = []  # signals that arrived inside ``deferred()`` (main thread only)
_depth = 0  # how many ``deferred()`` blocks the main thread is in
_takers: list[Callable[[int], bool]] = []  # ``draining`` handlers, innermost last


def _raise_interrupted(signum: int, _frame: object) -> None:
    if _takers and _takers[-1](signum):
        return  # taken: the command stops in its own time
    if _depth:
        _held.append(signum)
        return
    raise Interrupted(signum)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """A signal that arrives in the block is raised as :class:`Interrupted` when the
    outermost block ends (even when the block raised: stopping wins). Outside the main
    thread, where no handler runs, it changes nothing."""
    global _depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if not _depth and _held:
            signum = _held[0]
            _held.clear()
            raise Interrupted(signum)  # a signal outranks what the block raised


@contextlib.contextmanager
def interrupt_on_signals() -> Iterator[None]:
    """For the block, the three signals raise :class:`Interrupted` in the main thread.

    Outside the main thread (embedding, tests) it changes nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise_interrupted) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def draining(take: Callable[[int], bool]) -> Iterator[None]:
    """For the block, each of the three signals is first offered to ``take`` (in the main
    thread, between two bytecodes: it should only note it); True means it took the signal and
    nothing is raised. Needs ``interrupt_on_signals`` around it to change anything."""
    _takers.append(take)
    try:
        yield
    finally:
        _takers.remove(take)
