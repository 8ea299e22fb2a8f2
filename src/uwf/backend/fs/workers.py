"""The worker registry on the filesystem (docs/format.md, "The filesystem backend"):
``<root>/workers/<id>.json``, one file per worker.

A worker is the only writer of its file: each write (registering, a heartbeat, the stop)
replaces it whole (temp file, fsync, ``rename``) under ``flock`` of ``<id>.json.lock``, which
the pruner takes too, so a heartbeat is never lost to a prune that read the beat before it.
The pruner deletes the records (and their lock files) whose last beat is more than a day old,
and the temp files a writer killed mid-write left there as old.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from uwf.backend.workers import WorkerRecord, Workers
from uwf.util import fsio, jsonfmt
from uwf.util.ulid import is_thread_id

SUFFIX = ".json"


def _record(data: object) -> WorkerRecord | None:
    """A record read back, None when it is not one uwf wrote."""
    if not isinstance(data, dict) or not is_thread_id(data.get("id")):
        return None
    ints = ("pid", "started", "beat", "interval", "steps", "failed")
    values = [data.get(key) for key in ints]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return None
    stopped = data.get("stopped")
    host = data.get("host")
    if not isinstance(host, str) or not (stopped is None or isinstance(stopped, int)):
        return None
    pid, started, beat, interval, steps, failed = (v for v in values if isinstance(v, int))
    return WorkerRecord(str(data["id"]), host, pid, started, beat, interval, steps, failed, stopped)


class FsWorkers(Workers):
    def __init__(self, directory: Path) -> None:
        self.dir = directory

    def _path(self, worker: str) -> Path:
        if not is_thread_id(worker):  # checked before it becomes a path
            raise ValueError(f"not a worker id: {worker!r}")
        return self.dir / f"{worker}{SUFFIX}"

    def beat(self, record: WorkerRecord) -> None:
        path = self._path(record.id)
        data = {key: value for key, value in record._asdict().items() if value is not None}
        with fsio.locked(path):
            fsio.atomic_write(path, jsonfmt.dumps(data).encode())

    def _read(self, path: Path) -> WorkerRecord | None:
        raw = fsio.read_bytes(path)
        if raw is None:
            return None
        try:
            return _record(jsonfmt.loads(raw.decode("utf-8")))
        except ValueError:
            return None

    def _files(self) -> list[Path]:
        try:
            names = sorted(os.listdir(self.dir))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [
            self.dir / name
            for name in names
            if name.endswith(SUFFIX) and is_thread_id(name[: -len(SUFFIX)])
        ]

    def records(self) -> list[WorkerRecord]:
        found = [r for r in (self._read(path) for path in self._files()) if r is not None]
        return sorted(found, key=lambda r: (r.started, r.id))

    def prune(self, before: int) -> int:
        pruned = 0
        for path in self._files():
            if self._prune_one(path, before):
                pruned += 1
                with contextlib.suppress(FileNotFoundError):  # its worker is long gone
                    path.with_name(path.name + ".lock").unlink()
        self._sweep_temp(before)
        return pruned

    def _prune_one(self, path: Path, before: int) -> bool:
        with fsio.locked(path):
            record = self._read(path)
            last = record.beat if record is not None else _mtime_ms(path)  # unreadable: by age
            if last >= before:
                return False
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            return True

    def _sweep_temp(self, before: int) -> None:
        """Temp files a writer killed mid-write left, as old as a pruned record."""
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.dir):
                if entry.name.startswith(".tmp-") and _mtime_ms(Path(entry.path)) < before:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)


def _mtime_ms(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns // 1_000_000
    except FileNotFoundError:
        return 0
