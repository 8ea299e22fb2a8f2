"""Fleet limits on the filesystem (docs/format.md, "Limits"): ``flock`` slots and a file of
recent starts, in ``<root>/locks``.

A limit named ``name`` with ``concurrency: N`` is N slot files
``locks/limit-<id>-<i>.slot`` (``<id>``: 16 hex characters of SHA-256 of the name, so no name
becomes a path); a holder takes the first it can ``flock`` without waiting and keeps it for
the step, and the kernel frees it when the holder exits, SIGKILL included. ``perMinute: M`` is
``locks/limit-<id>.starts``: the unix-ms times of the holds begun in the last minute, one JSON
list, changed under ``flock`` of ``limit-<id>.starts.lock`` (read-modify-write, temp file and
rename). A pause (a provider that answered 429) is ``locks/limit-<id>.pause``: its end, unix ms.

Both files are read with a bound (``damage``). One that does not hold what uwf writes there —
not a list of times, not a time, too large — is damage (both are written whole and renamed,
so no crash leaves them so): the step is held back with the error naming it, as uwf cannot
tell how many steps the limit allows, and ``cas verify`` reports it (``damage``).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from uwf.backend.base import Limits
from uwf.backend.fs.damage import RECORD_LIMIT, STARTS_LIMIT, damaged, read_state
from uwf.util import fsio, jsonfmt
from uwf.util.errors import Damaged, HeldBack
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
        """The end of a pause, None when there is none; Damaged when the file holds no time."""
        data = read_state(path, RECORD_LIMIT)
        if data is None:
            return None
        text = data.strip()
        if not text.isdigit() or len(text) > 19:
            raise damaged(path, "it does not hold the end of a pause (unix ms)")
        return int(text)

    @staticmethod
    def _read_starts(path: Path) -> list[int]:
        """The starts in a limit's file of recent starts; Damaged when it holds no list of
        times."""
        data = read_state(path, STARTS_LIMIT)
        try:
            starts = jsonfmt.loads(data.decode() or "[]") if data is not None else []
        except ValueError:
            starts = None
        if not isinstance(starts, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in starts
        ):
            raise damaged(path, "it does not hold a list of start times (unix ms)")
        return starts

    def damage(self) -> list[str]:
        """The damage of every limit file (``cas verify``): one line each."""
        try:
            names = sorted(os.listdir(self.lock_dir))
        except OSError:
            return []
        out = []
        for name in names:
            if not name.startswith("limit-") or not name.endswith((".starts", ".pause")):
                continue
            path = self.lock_dir / name
            try:
                if name.endswith(".starts"):
                    self._read_starts(path)
                else:
                    self._read_pause(path)
            except Damaged as exc:
                out.append(exc.message)
        return out

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
            recent = [t for t in self._read_starts(path) if t > now - WINDOW_MS]
            if len(recent) >= per_minute:
                raise HeldBack("perMinute")
            fsio.atomic_write(path, jsonfmt.dumps([*recent, now]).encode())
