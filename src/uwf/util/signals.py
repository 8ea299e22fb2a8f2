"""Signals that stop a command: SIGTERM, SIGHUP and SIGINT become :class:`Interrupted`.

Raised in the main thread wherever it is, the exception unwinds through ``finally`` blocks
(a running agent's process group is killed on the way, see ``uwf.adapters.process``), and
the entry point prints ``error: interrupted (SIGTERM)`` and exits 128 + the signal's number
(docs/errors.md, "Signals").
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from uwf.util.errors import Interrupted

SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def _raise_interrupted(signum: int, _frame: object) -> None:
    raise Interrupted(signum)


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
