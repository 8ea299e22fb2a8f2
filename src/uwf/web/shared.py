"""One read of the store per tick, whatever the number of event streams (docs/ui.md, "Limits").

Every event stream of ``uwf ui`` polls the store a few times a second: where a thread's head
is, whether a step holds its lock, which threads are active. Polled independently, N open
pages cost N reads per tick, and those reads compete with the steps they watch. The streams
read through ``Shared`` instead: a view of the backend whose answers to those questions are
kept for ``ttl`` seconds (half the poll interval) and shared by every stream, so N pages cost
about one read of each per tick. Nodes are read through as they are (they never change), and
nothing that writes passes through it (the web view is read-only).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from uwf.backend.base import Backend

# The passive questions the followers ask (engine/views/follow.py), per part of the backend.
_KEPT = {
    "threads": frozenset({"get", "head", "active", "history", "history_entry"}),
    "locks": frozenset({"holder", "running", "is_running"}),
}


class _Kept:
    """A part of the backend whose read-only answers are kept for a while, shared."""

    def __init__(self, target: Any, names: frozenset[str], ttl: float) -> None:
        self._target = target
        self._names = names
        self._ttl = ttl
        self._answers: dict[tuple[Any, ...], tuple[float, Any]] = {}
        self._mutex = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._target, name)
        if name not in self._names:
            return found
        return self._memo(name, found)

    def _memo(self, name: str, read: Callable[..., Any]) -> Callable[..., Any]:
        def kept(*args: Any) -> Any:
            key = (name, *args)
            now = time.monotonic()
            with self._mutex:
                hit = self._answers.get(key)
            if hit is not None and now - hit[0] < self._ttl:
                return hit[1]
            value = read(*args)
            with self._mutex:
                self._answers[key] = (now, value)
                if len(self._answers) > 4096:  # many threads followed: drop the stale ones
                    self._answers = {
                        k: v for k, v in self._answers.items() if now - v[0] < self._ttl
                    }
            return value

        return kept


class Shared:
    """``backend`` as the event streams read it: thread table and lock answers shared for
    ``ttl`` seconds; everything else (nodes, root, name) is the backend's own."""

    def __init__(self, backend: Backend, ttl: float) -> None:
        self._backend = backend
        self.threads = _Kept(backend.threads, _KEPT["threads"], ttl)
        self.locks = _Kept(backend.locks, _KEPT["locks"], ttl)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._backend, name)
