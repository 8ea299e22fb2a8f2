"""Automatic packing of the filesystem store (docs/architecture.md, "Automatic packing").

Each step writes its nodes as one small pack (``batch``), and ``thread start``, ``workflow
put`` and ``cas put`` write loose files; left alone they would pile up, each a few KiB of
disk and one more file for every reader to open. So after each step the engine calls
``FsStore.pack_due`` (``packing.due``: a few ``stat`` calls), and when there is work and no
``cas gc`` or ``cas pack`` holds the gc lock, ``start`` runs this module in the background,
``python -P -m uwf.backend.fs.autopack <cas dir> <lock dir>``, which

1. takes the gc lock as the automatic packing (``FsLocks.gc(background=True)``: it gives up
   at once when the lock is held; a ``cas gc`` or ``cas pack`` started meanwhile waits for
   it rather than failing),
2. asks ``packing.due`` again (another packing may have done the work meanwhile), and
3. packs as ``cas pack`` does (``packing.pack_store``: the loose nodes and the packs the
   geometric rule picks), under the same locks, so everything docs/format.md, "Packs", says
   of a pack's safety holds for it.

It imports the store and nothing else (no CLI): a start costs a few tens of ms of CPU, once
every ``AUTO_PACKS`` steps or so. Its exit code: 0 packed or nothing due, 4 busy, 1 failed;
it prints nothing (nobody reads its streams), and a failure leaves every node where it was.
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from uwf.backend.fs import packing

if TYPE_CHECKING:
    from uwf.backend.fs.nodes import FsStore

__all__ = ["main", "start"]


def start(store: FsStore) -> int | None:
    """Start the automatic packing unless a gc or pack runs (the caller asked
    ``packing.due``); its pid, or None when nothing was started."""
    if not sys.executable or _gc_running(store.lock_dir):
        return None
    from uwf.adapters import process

    argv = [sys.executable, "-P", "-m", __name__, str(store.dir), str(store.lock_dir)]
    return process.start_background(argv, dict(os.environ))


def _gc_running(lock_dir: Path) -> bool:
    """Whether ``cas gc``, ``cas pack`` or an automatic packing holds the gc lock (asked by
    taking it without waiting, and letting go at once)."""
    from uwf.backend.fs.locks import GC_LOCK

    try:
        fd = os.open(lock_dir / GC_LOCK, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # releases what was taken


def main(argv: list[str]) -> int:
    """Pack ``<cas dir>`` (locks in ``<lock dir>``) if it is still due; the exit code."""
    from uwf.backend.fs.locks import FsLocks
    from uwf.backend.fs.nodes import FsStore
    from uwf.util.errors import Busy, UwfError

    if len(argv) != 2:
        return 2
    store = FsStore(Path(argv[0]), Path(argv[1]))
    try:
        with FsLocks(store.lock_dir).gc(background=True):
            if packing.due(store):
                packing.pack_store(store)
    except Busy:
        return 4
    except UwfError:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
