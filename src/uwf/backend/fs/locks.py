"""Step locks and the gc lock of the filesystem backend: ``flock`` on ``<root>/locks/*.lock``.

A step holds an exclusive ``flock`` on ``locks/<thread>.lock`` and writes a holder record into
that file (``{"pid","host","since","role","agent"}``, plus ``"log"`` for a background run and
``"worker"`` for a ``uwf worker``;
JSON; emptied on release). ``flock`` locks die with their process, so a SIGKILL never leaves a
thread locked; the record it leaves is stale (``clear_stale`` empties it).

``thread stop`` asks a holder to stop by writing ``locks/<thread>.stop``: the holder's
``{"pid","host","since"}``, so that the request reaches that holding and no later one. The
holder polls it and removes it on release.

"Is a step running" never takes a lock (docs/architecture.md, "The backend seam"): the
holder marks its lock file with an open file description lock beside its ``flock``
(``fsio.mark_held``), and a reader asks the kernel whether that file is marked
(``fsio.held``, ``F_OFD_GETLK``: one ``open`` and one ``fcntl`` a lock file, Linux only).
Where the kernel cannot tell (not Linux, a kernel before 3.15), the holder record's pid is
checked instead, as it is for a lock taken by a uwf that does not mark its locks.

A holder writes its record, then marks the file, and empties the record on release: a
marked file is never empty, so ``is_running`` (the status of ``thread show``) and ``running``
(gc, ``thread list``) answer "no" at once for an empty lock file, which is what a released
lock leaves, and ask the kernel about the others only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Collection, Iterator
from pathlib import Path

from uwf.backend.base import Holder, Locks, StepLock
from uwf.backend.fs.damage import RECORD_LIMIT
from uwf.util import fsio, jsonfmt
from uwf.util.errors import Busy
from uwf.util.ulid import ThreadId, is_thread_id, now_ms

GC_LOCK = "gc.lock"
AUTO = b"auto"  # in gc.lock while the automatic packing holds it


def _auto_holds(fd: int) -> bool:
    """Whether the holder of the gc lock open at ``fd`` is the automatic packing: ``auto`` in
    the file, which it writes the moment it has the lock (asked again a moment later when
    the file is still empty, so that a holder caught before its write is not mistaken)."""
    for pause in (0.0, 0.02, 0.05):
        time.sleep(pause)
        mark = os.pread(fd, len(AUTO), 0)
        if mark:
            return mark == AUTO
    return False


def _host() -> str:
    """This machine's name, as ``socket.gethostname()`` gives it (without importing
    ``socket``, which `thread show` never loads: tests/test_startup.py)."""
    return os.uname().nodename


def _pid_alive(value: object) -> bool:
    pid = _int(value)
    if pid is None or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _read_json(path: Path) -> dict[str, object]:
    """A holder record or a stop request; ``{}`` when there is none or it cannot be read (a
    holder killed mid-write leaves a torn record, which the next holder overwrites). Read
    with a bound: a lock file grown huge costs no memory (docs/format.md)."""
    try:
        with open(path, "rb") as fh:
            data = jsonfmt.loads(fh.read(RECORD_LIMIT + 1).decode("utf-8") or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _holder(thread: ThreadId, record: dict[str, object]) -> Holder:
    return Holder(
        thread,
        pid=_int(record.get("pid")),
        host=_str(record.get("host")),
        since=_int(record.get("since")),
        role=_str(record.get("role")),
        agent=_str(record.get("agent")),
        log=_str(record.get("log")),
        worker=_str(record.get("worker")),
    )


_STOP_KEYS = ("pid", "host", "since")  # what binds a stop request to one holding


class _FsStepLock(StepLock):
    def __init__(
        self,
        fd: int,
        stop_path: Path,
        log: str | None,
        worker: str | None,
        note: tuple[str, str] | None = None,
    ) -> None:
        self.fd = fd
        self.stop_path = stop_path
        self.record: dict[str, object] = {
            "pid": os.getpid(),
            "host": _host(),
            "since": now_ms(),
        }
        if log is not None:
            self.record["log"] = log
        if worker is not None:
            self.record["worker"] = worker
        if note is not None:  # the role and agent known already: written with the rest
            self.record.update(role=note[0], agent=note[1])
        self._write()

    def _write(self) -> None:
        data = jsonfmt.dumps(self.record).encode()
        with contextlib.suppress(OSError):  # the record is informational: never fail a step
            os.ftruncate(self.fd, 0)
            os.pwrite(self.fd, data, 0)

    def note(self, *, role: str, agent: str) -> None:
        if self.record.get("role") == role and self.record.get("agent") == agent:
            return  # noted already (the step planned before its lock): nothing to rewrite
        self.record.update(role=role, agent=agent)
        self._write()

    def stop_requested(self) -> bool:
        request = _read_json(self.stop_path)
        return bool(request) and all(request.get(k) == self.record[k] for k in _STOP_KEYS)

    def clear(self) -> None:
        with contextlib.suppress(OSError):  # while still held: a request now is for us
            self.stop_path.unlink()
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, 0)


class FsLocks(Locks):
    def __init__(self, lock_dir: Path) -> None:
        self.dir = lock_dir

    def path(self, thread: ThreadId) -> Path:
        return self.dir / f"{thread}.lock"

    def stop_path(self, thread: ThreadId) -> Path:
        return self.dir / f"{thread}.stop"

    @contextlib.contextmanager
    def step(
        self,
        thread: ThreadId,
        *,
        wait: bool,
        log: str | None = None,
        worker: str | None = None,
        note: tuple[str, str] | None = None,
    ) -> Iterator[StepLock]:
        fd = fsio.open_lock(self.path(thread))
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise Busy(f"thread {thread} is busy") from None
            lock = _FsStepLock(fd, self.stop_path(thread), log, worker, note)
            fsio.mark_held(fd)  # after the record: a marked lock file is never empty
            try:
                yield lock
            finally:
                lock.clear()
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def _lock_files(self, *, recorded: bool = False) -> list[ThreadId]:
        """The thread of every step lock file (one directory scan); ``recorded``: only those
        with a holder record (a ``stat`` each: an empty file is a released lock)."""
        try:
            entries = list(os.scandir(self.dir))
        except (FileNotFoundError, NotADirectoryError):
            return []
        found = []
        for entry in entries:
            thread = entry.name[: -len(".lock")]
            if not (entry.name.endswith(".lock") and is_thread_id(thread)):
                continue
            if recorded:
                try:
                    if entry.stat().st_size == 0:
                        continue
                except FileNotFoundError:
                    continue
            found.append(ThreadId(thread))
        return found

    def _held(self, thread: ThreadId) -> bool:
        """Whether the step lock of ``thread`` is held: the kernel's answer, else the holder
        record's."""
        answer = fsio.held(self.path(thread))
        return self._record_alive(thread) if answer is None else answer

    def running(self) -> set[ThreadId]:
        return {thread for thread in self._lock_files(recorded=True) if self._held(thread)}

    def is_running(self, thread: ThreadId) -> bool:
        try:
            if os.stat(self.path(thread)).st_size == 0:  # no holder record: released
                return False
        except FileNotFoundError:
            return False
        return self._held(thread)

    def _record(self, thread: ThreadId) -> dict[str, object]:
        return _read_json(self.path(thread))

    def _record_alive(self, thread: ThreadId) -> bool:
        record = self._record(thread)
        return record.get("host") == _host() and _pid_alive(record.get("pid"))

    def holder(self, thread: ThreadId) -> Holder | None:
        if not self.is_running(thread):
            return None
        return _holder(thread, self._record(thread))

    def request_stop(self, thread: ThreadId) -> Holder | None:
        holder = self.holder(thread)
        if holder is None:
            return None
        request = {k: getattr(holder, k) for k in _STOP_KEYS}
        fsio.atomic_write(self.stop_path(thread), jsonfmt.dumps(request).encode())
        return holder

    def clear_stale(self, thread: ThreadId) -> Holder | None:
        try:
            if os.stat(self.path(thread)).st_size == 0:
                return None  # released cleanly: no record (and no lock taken to find out)
            fd = os.open(self.path(thread), os.O_RDWR)
        except OSError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None  # held: not stale
            data = os.pread(fd, 1 << 16, 0)
            if not data.strip():
                return None
            os.ftruncate(fd, 0)
            with contextlib.suppress(OSError):
                self.stop_path(thread).unlink()
            try:
                record = jsonfmt.loads(data.decode("utf-8"))
            except ValueError:
                record = {}
            return _holder(thread, record if isinstance(record, dict) else {})
        finally:
            os.close(fd)

    def sweep(self, archived: Collection[ThreadId], *, dry_run: bool = False) -> int:
        """Unlink the lock files of archived threads, each under its own lock taken without
        waiting, so that a held one (a step being stopped) is skipped. A step that opened
        the file just before still locks the unlinked file, finds its thread archived and
        stops (exit 3); one that comes later creates a new file and does the same."""
        wanted = set(archived)
        held = self.running() if dry_run else set()
        swept = 0
        for thread in self._lock_files():
            if thread not in wanted:
                continue
            if dry_run:
                swept += thread not in held
            else:
                swept += self._unlink_unheld(self.path(thread))
        return swept

    @staticmethod
    def _unlink_unheld(path: Path) -> bool:
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return False  # held right now
            if os.fstat(fd).st_ino != os.stat(path).st_ino:
                return False  # replaced meanwhile: not the file we locked
            os.unlink(path)
            return True
        except OSError:
            return False
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def gc(self, *, background: bool = False) -> Iterator[None]:
        """``flock`` of ``gc.lock``. Its holder writes ``auto`` into the file when it is the
        automatic packing (``background``), nothing otherwise: a ``cas gc`` or ``cas pack``
        that finds the lock held waits for an automatic packing to end, and fails at once
        beside anything else. The automatic packing fails at once whoever holds it."""
        fd = fsio.open_lock(self.dir / GC_LOCK)
        held = False
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if background or not _auto_holds(fd):
                    raise Busy("cas gc or cas pack is already running") from None
                fcntl.flock(fd, fcntl.LOCK_EX)  # an automatic packing ends soon: wait
            held = True
            os.ftruncate(fd, 0)
            if background:
                os.pwrite(fd, AUTO, 0)
            yield
        finally:
            if held and background:  # only its holder clears the mark
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, 0)
            os.close(fd)
