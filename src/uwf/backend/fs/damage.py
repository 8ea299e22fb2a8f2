"""Reading the filesystem backend's state files with a size bound, and the error of a file
uwf can tell is damaged (docs/reliability.md, "Repairing damaged state").

Every state file is read through ``read_state``, with a bound far above what uwf writes
there (docs/format.md, "The filesystem backend", lists them): a file a hand or a disk made
huge costs one ``fstat`` and an error naming it, never its size in memory. Something else at
a file's path (a directory, a pipe) is damage too, named for what it is.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from uwf.util.errors import Damaged, UwfError

REPAIR = 'see docs/reliability.md, "Repairing damaged state"'

STATE_LIMIT = 256 << 20  # threads.yaml, registry.yaml, start-keys.yaml
HISTORY_LIMIT = 1 << 30  # history.jsonl
INDEX_LIMIT = 1 << 30  # a type index: 14 bytes a node, so some 75 million nodes of one type
STARTS_LIMIT = 16 << 20  # a fleet limit's starts of the last minute
RECORD_LIMIT = 64 << 10  # a worker record, a step lock's holder record, a stop request, a pause

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def damaged(path: Path, what: str) -> Damaged:
    """The error of a state file uwf can tell is damaged (docs/reliability.md)."""
    return Damaged(f"{path} is damaged: {what}; {REPAIR}")


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is: ``a directory``, ``a named pipe``, …"""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_state(path: Path, limit: int) -> bytes | None:
    """The bytes of the state file ``path``, None when nothing is there. Damaged when
    something other than a file is at the path or the file holds more than ``limit`` bytes;
    any other failure to read it is one ``cannot read <path>: <reason>``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a pipe never blocks
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise damaged(path, "a part of its path is a file, not a directory") from None
    except OSError as exc:
        raise UwfError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        mode, size = st.st_mode, st.st_size
        if not stat.S_ISREG(mode):
            raise damaged(path, f"it is {kind_of(mode)}, not a file")
        if size > limit:
            raise too_large(path, size, limit)
        chunks, total = [], 0
        while chunk := os.read(fd, min(1 << 20, limit + 1 - total)):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # it grew while we read
                raise too_large(path, total, limit)
        return b"".join(chunks)
    except OSError as exc:
        raise UwfError(f"cannot read {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def too_large(path: Path, size: int, limit: int) -> Damaged:
    return damaged(path, f"it holds {size:,} bytes, more than uwf ever writes there ({limit:,})")
