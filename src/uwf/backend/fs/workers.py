"""The worker registry on the filesystem (docs/format.md, "The filesystem backend"):
``<root>/workers/<id>.json``, one file per worker.

A worker is the only writer of its file: each write (registering, a heartbeat, the stop)
replaces it whole (temp file, fsync, ``rename``) under ``flock`` of ``<id>.json.lock``, which
the pruner takes too, so a heartbeat is never lost to a prune that read the beat before it.
The pruner deletes the records (and their lock files) whose last beat is more than a day old,
and the temp files a writer killed mid-write left there as old.

A record is read with a bound (``damage.RECORD_LIMIT``: uwf writes one line of a few hundred
bytes). One that is larger, is not a record uwf wrote, or is not a file is damage: left out of
``records``, listed by ``scan`` (``worker list`` and ``uwf worker`` warn, ``cas verify``
reports it) and pruned a day after it was last written. ``workers/`` itself replaced by
something that is not a directory is damage every command that reads or writes the registry
fails on: a worker could not register, and a listing would read as no workers.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from uwf.backend.fs.damage import RECORD_LIMIT, damaged, read_state
from uwf.backend.workers import WorkerRecord, Workers
from uwf.util import fsio, jsonfmt
from uwf.util.errors import Damaged, UwfError
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
        try:
            with fsio.locked(path):
                fsio.atomic_write(path, jsonfmt.dumps(data).encode())
        except UwfError:
            self._check_dir()  # `cannot write …: File exists` says less than this
            raise

    def _check_dir(self) -> None:
        if self.dir.exists() and not self.dir.is_dir():
            raise damaged(self.dir, "it is not a directory (uwf keeps one file per worker there)")

    def _read(self, path: Path) -> WorkerRecord | None:
        """The record in ``path``; None when it went meanwhile; Damaged when it is not one."""
        raw = read_state(path, RECORD_LIMIT)
        if raw is None:
            return None
        try:
            record = _record(jsonfmt.loads(raw.decode("utf-8")))
        except ValueError:
            record = None
        if record is None or f"{record.id}{SUFFIX}" != path.name:
            raise damaged(path, "it is not a worker record uwf wrote (one line of JSON)")
        return record

    def _files(self) -> list[Path]:
        try:
            names = sorted(os.listdir(self.dir))
        except FileNotFoundError:
            return []
        except NotADirectoryError:
            self._check_dir()
            raise
        return [
            self.dir / name
            for name in names
            if name.endswith(SUFFIX) and is_thread_id(name[: -len(SUFFIX)])
        ]

    def scan(self) -> tuple[list[WorkerRecord], list[str]]:
        found, damage = [], []
        for path in self._files():
            try:
                record = self._read(path)
            except Damaged as exc:
                damage.append(exc.message)
                continue
            if record is not None:
                found.append(record)
        return sorted(found, key=lambda r: (r.started, r.id)), damage

    def records(self) -> list[WorkerRecord]:
        return self.scan()[0]

    def damage(self) -> list[str]:
        return self.scan()[1]

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
            try:
                record = self._read(path)
            except Damaged:
                record = None
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
