"""Fleet limits on the filesystem (docs/format.md, "Limits"): ``flock`` slots and a file of
recent starts, in ``<root>/locks``.

A limit named ``name`` with ``concurrency: N`` is N slot files
``locks/limit-<id>-<i>.slot`` (``<id>``: 16 hex characters of SHA-256 of the name, so no name
becomes a path); a holder takes the first it can ``flock`` without waiting and keeps it for
the step, and the kernel frees it when the holder exits, SIGKILL included. ``perMinute: M`` is
``locks/limit-<id>.starts``: the unix-ms times of the holds begun in the last minute, one JSON
list, changed under ``flock`` of ``limit-<id>.starts.lock`` (read-modify-write, temp file and
rename). A pause (a provider that answered 429) is ``locks/limit-<id>.pause``: its end, unix ms.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from uwf.backend.base import Limits
from uwf.util import fsio, jsonfmt
from uwf.util.errors import HeldBack
from uwf.util.ulid import now_ms

WINDOW_MS = 60_000


class FsLimits(Limits):
    def __init__(self, lock_dir: Path) -> None:
        self.lock_dir = lock_dir

    def _stem(self, name: str) -> Path:
        import hashlib  # only where a limit is configured (tests/test_startup.py)

        return self.lock_dir / f"limit-{hashlib.sha256(name.encode()).hexdigest()[:16]}"

    @contextlib.contextmanager
    def hold(self, name: str, concurrency: int | None, per_minute: int | None) -> Iterator[None]:
        stem = self._stem(name)
        fd = self._slot(stem, concurrency) if concurrency is not None else None
        try:
            if per_minute is not None:
                self._start(stem.with_name(stem.name + ".starts"), per_minute)
            yield
        finally:
            if fd is not None:
                os.close(fd)

    def pause(self, name: str, until: int) -> int:
        path = self._pause_path(name)
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        with fsio.locked(path):
            longest = max(until, self._read_pause(path) or 0)
            fsio.atomic_write(path, str(longest).encode())
        return longest

    def paused(self, name: str) -> int | None:
        until = self._read_pause(self._pause_path(name))
        return until if until is not None and until > now_ms() else None

    def _pause_path(self, name: str) -> Path:
        stem = self._stem(name)
        return stem.with_name(stem.name + ".pause")

    @staticmethod
    def _read_pause(path: Path) -> int | None:
        try:
            text = path.read_text(encoding="ascii").strip()
        except (OSError, ValueError):
            return None
        return int(text) if text.isdigit() else None

    def _slot(self, stem: Path, concurrency: int) -> int:
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        for i in range(concurrency):
            fd = os.open(f"{stem}-{i}.slot", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            return fd
        raise HeldBack("concurrency")

    def _start(self, path: Path, per_minute: int) -> None:
        self.lock_dir.mkdir(parents=True, exist_ok=True)
        with fsio.locked(path):
            now = now_ms()
            try:
                starts = jsonfmt.loads(path.read_bytes().decode() or "[]")
            except (OSError, ValueError):
                starts = []
            if not isinstance(starts, list):
                starts = []
            recent = [t for t in starts if isinstance(t, int) and t > now - WINDOW_MS]
            if len(recent) >= per_minute:
                raise HeldBack("perMinute")
            fsio.atomic_write(path, jsonfmt.dumps([*recent, now]).encode())
