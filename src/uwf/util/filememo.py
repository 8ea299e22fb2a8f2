"""Files a long-lived process parses once per identity (docs/architecture.md, "What a process
keeps").

A worker, a background run or a program stepping through ``uwf.api`` reads ``config.yaml``
at every step; parsing and checking it each time was a third of a warm step. ``FileMemo``
keeps what a file parsed to, keyed by the file's identity — device, inode, size, mtime and
ctime, from one ``stat`` — and reads the file again when any of them changed, so an edit
(in place, or an editor's write-and-rename) is seen by the next read.

The identity comes from ``fstat`` of the file as opened (on NFS an ``open`` revalidates what
a ``stat`` may take from the client's attribute cache), and the bytes parsed from the same
descriptor. A change within the same tick of the file clock as the read before it would leave
the identity unchanged, so a file is kept only once its last change is older than a few ticks
(git's "racily clean" rule, ``settled``); a file changed just now is parsed at every read until
then.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from uwf.util.errors import UwfError

T = TypeVar("T")

#: How old a file's last change must be for what it parsed to be kept: a few ticks of a
#: file clock with sub-10-millisecond timestamps (Linux's is a tick of at most 10 ms), else
#: (timestamps in whole seconds, or FAT's two) longer than a tick of it.
FINE_SETTLED_NS = 100_000_000
COARSE_SETTLED_NS = 3_000_000_000

__all__ = ["FileMemo", "identity", "settled", "stamp"]


def identity(st: os.stat_result) -> tuple[int, int, int, int, int]:
    """What tells one version of a file from another: device, inode, size, mtime, ctime."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def settled(st: os.stat_result, now_ns: int) -> bool:
    """Whether a file's last change (mtime and ctime) is old enough that any later change
    shows in its identity."""
    newest = max(st.st_mtime_ns, st.st_ctime_ns)
    coarse = st.st_mtime_ns % 10_000_000 == 0 and st.st_ctime_ns % 10_000_000 == 0
    return newest < now_ns - (COARSE_SETTLED_NS if coarse else FINE_SETTLED_NS)


def stamp(*paths: Path) -> object:
    """What tells these files' versions apart, to compare with a later stamp: their
    identities (None for a missing one); a value equal to no other while one of them changed
    too recently to tell (``settled``)."""
    now = time.time_ns()
    out: list[tuple[int, ...] | None] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            out.append(None)
            continue
        if not settled(st, now):
            return object()
        out.append(identity(st))
    return tuple(out)


class FileMemo(Generic[T]):
    """What files parsed to, each kept while its identity is the one it had when read."""

    def __init__(self, limit: int = 16) -> None:
        self.limit = limit  # files kept at once (a process reads one or two roots)
        self._found: dict[str, tuple[tuple[int, ...], T]] = {}
        self._lock = threading.Lock()  # a Python agent's lane reads config.yaml too
        self.reads = 0  # files read and parsed (tests count them)

    def load(self, path: Path, parse: Callable[[bytes], T], limit: int) -> T | None:
        """What ``parse`` makes of the file's bytes (at most ``limit + 1`` of them read, so
        that ``parse`` can refuse a larger file), from memory while the file is unchanged;
        None when there is no file. An error of ``parse`` is raised and nothing kept; a file
        that cannot be read is a one-line ``UwfError``."""
        key = str(path)
        try:
            fh = open(key, "rb")  # noqa: SIM115 - closed below, on every path
        except FileNotFoundError:
            self._forget(key)
            return None
        except OSError as exc:
            raise UwfError(f"cannot read {path}: {exc.strerror or exc}") from None
        with fh:
            try:
                st = os.fstat(fh.fileno())  # before reading: a later change shows in it
                now = identity(st)
                with self._lock:
                    found = self._found.get(key)
                if found is not None and found[0] == now:
                    return found[1]
                data = fh.read(limit + 1)
            except OSError as exc:
                raise UwfError(f"cannot read {path}: {exc.strerror or exc}") from None
        self.reads += 1
        value = parse(data)
        with self._lock:
            if not settled(st, time.time_ns()):
                self._found.pop(key, None)
            else:
                if len(self._found) >= self.limit:
                    self._found.clear()
                self._found[key] = (now, value)
        return value

    def _forget(self, key: str) -> None:
        with self._lock:
            self._found.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._found.clear()
