"""Crash-safe file primitives: atomic replace, no-clobber create, durable append, flock locks.

Every mutable file of uwf is written through these functions, so a reader never sees a
half-written file and a crash at any moment leaves either the old or the new content.
Locks are ``flock`` locks on ``<path>.lock`` files: they die with their process, so a
SIGKILL never leaves a lock behind that blocks the next command. A lock that others must be
able to see held without taking it (a thread's step lock) is marked as well (``mark_held``,
``held``: an open file description lock, answered by the kernel directly). A failing write
(a full disk, an I/O error) removes its temp file and raises a one-line ``UwfError`` naming
the file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from uwf.util.errors import Busy, UwfError

_TMP_PREFIX = ".tmp-"
_T = TypeVar("_T")


def _write_error(path: Path, exc: OSError) -> UwfError:
    """The user-facing form of a failed write: which file, and the system's reason."""
    return UwfError(f"cannot write {path}: {exc.strerror or exc}")


def _tmp_path(path: Path) -> Path:
    return path.with_name(f"{_TMP_PREFIX}{path.name}.{os.getpid()}.{time.monotonic_ns()}")


def fsync_dir(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_tmp(path: Path, data: bytes, mode: int) -> Path:
    tmp = _tmp_path(path)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)
    return tmp


def _made(path: Path, make: Callable[[], _T]) -> _T:
    """``make()``, which creates something in ``path``'s directory: that directory (and its
    parents) made, and ``make`` tried again, only when it is missing — a ``mkdir`` per new
    directory, not one (and a ``stat``) per write."""
    try:
        return make()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return make()


def atomic_write(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Replace ``path`` with ``data``: temp file in the same directory, fsync, ``os.replace``."""
    try:
        tmp = _made(path, lambda: _write_tmp(path, data, mode))
        try:
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise _write_error(path, exc) from exc
    fsync_dir(path.parent)


def create_once(path: Path, data: bytes, mode: int = 0o444) -> bool:
    """Create ``path`` with ``data`` unless it exists; True if this call created it.

    The content appears atomically (``link`` of a fully written, fsynced temp file), and an
    existing file is never replaced, so the first writer's bytes win.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _write_tmp(path, data, mode)
        try:
            os.link(tmp, path)
            created = True
        except FileExistsError:
            created = False
        except OSError as exc:  # filesystems without hard links
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EXDEV, errno.EMLINK):
                raise
            if path.exists():
                created = False
            else:
                os.replace(tmp, path)
                fsync_dir(path.parent)
                return True
        finally:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    except OSError as exc:
        raise _write_error(path, exc) from exc
    if created:
        fsync_dir(path.parent)
    return created


def append_line(path: Path, line: str) -> None:
    """Append one line (newline added) in a single ``write`` with O_APPEND, then fsync.

    A short write (a full disk) is undone before the error, so no fragment is left; if the
    file ends in a torn line all the same (power lost mid-append), the new line starts on a
    line of its own, so the torn fragment cannot swallow it.
    """
    append_lines(path, [line])


def append_lines(path: Path, lines: list[str], *, sync: bool = True) -> None:
    """``append_line`` for several lines in one ``write``; without ``sync`` no fsync (a file
    whose lines can be rebuilt, as the type index after a step's nodes are durable:
    docs/format.md, "The filesystem backend")."""
    data = "".join(line.rstrip("\n") + "\n" for line in lines).encode()
    try:
        fd = _made(path, lambda: os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644))
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            written = os.write(fd, data)
            if written != len(data):  # a short write: the disk filled up
                if os.fstat(fd).st_size == size + written:  # nobody appended since: no
                    with contextlib.suppress(OSError):  # fragment is left to read as damage
                        os.ftruncate(fd, size)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise _write_error(path, exc) from exc


def read_bytes(path: Path, limit: int | None = None) -> bytes | None:
    """The content of ``path``, or None if it does not exist. With ``limit``, at most
    ``limit + 1`` bytes are read: more than ``limit`` tells the caller the file is too large
    without holding it whole."""
    try:
        with open(path, "rb") as fh:
            return fh.read() if limit is None else fh.read(limit + 1)
    except FileNotFoundError:
        return None


def open_lock(path: Path) -> int:
    """A descriptor of the lock file ``path`` (created, with its directory, if missing) to
    ``flock``; closing it releases the lock."""
    try:
        return _made(path, lambda: os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
    except OSError as exc:
        raise UwfError(f"cannot lock {path}: {exc.strerror or exc}") from None


# ``struct flock`` as fcntl(2) reads and writes it: l_type, l_whence, l_start, l_len, l_pid
# (native sizes and alignment, as the C compiler lays it out; l_start and l_len 0: the whole
# file; l_pid 0, as open file description locks require).
_FLOCK = "hhqqi"


@functools.cache
def _whole_file(kind: int) -> bytes:
    import struct  # the step lock's path only: no command pays for it at start-up

    return struct.pack(_FLOCK, kind, os.SEEK_SET, 0, 0, 0)


def mark_held(fd: int) -> None:
    """Mark the lock file open at ``fd``, whose ``flock`` this process holds, as held, for
    ``held`` to see: a write lock on the whole file owned by the open file description
    (``F_OFD_SETLK``, Linux 3.15+). It lasts as long as the descriptor, dies with its
    process, and is independent of the ``flock``, which stays the lock itself (so a uwf that
    only takes the ``flock`` still excludes and is excluded). Nothing where the kernel has no
    such locks: ``held`` then answers None."""
    setlk = getattr(fcntl, "F_OFD_SETLK", None)
    if setlk is not None:
        with contextlib.suppress(OSError):  # only a holder marks: none is in the way
            fcntl.fcntl(fd, setlk, _whole_file(fcntl.F_WRLCK))


def held(path: Path) -> bool | None:
    """Whether a holder marked the lock file ``path`` (``mark_held``), asked without taking
    anything (``F_OFD_GETLK``: the kernel answers whether a lock would conflict). False when
    the file is missing; None when the kernel cannot tell (not Linux, a kernel before 3.15, a
    file system without such locks): the caller then asks the holder record."""
    getlk = getattr(fcntl, "F_OFD_GETLK", None)
    if getlk is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return None
    try:
        answer = fcntl.fcntl(fd, getlk, _whole_file(fcntl.F_WRLCK))
    except OSError:
        return None
    finally:
        os.close(fd)
    import struct

    kind: int = struct.unpack_from(_FLOCK, answer)[0]
    return kind != fcntl.F_UNLCK


@contextlib.contextmanager
def locked(path: Path, *, wait: bool = True, busy_message: str | None = None) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``<path>.lock`` for the duration of the block.

    With ``wait=False`` a held lock raises :class:`Busy` at once (``busy_message``).
    """
    lock_path = path.with_name(path.name + ".lock")
    fd = open_lock(lock_path)
    try:
        flags = fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB
        try:
            fcntl.flock(fd, flags)
        except BlockingIOError as exc:
            raise Busy(busy_message or f"{path.name} is locked by another process") from exc
        except OSError as exc:
            raise UwfError(f"cannot lock {lock_path}: {exc.strerror}") from exc
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
