"""Automatic packing of the filesystem store (docs/architecture.md, "Automatic packing").

Each step writes its nodes as one small pack (``batch``), and ``thread start``, ``workflow
put`` and ``cas put`` write loose files; left alone they would pile up, each a few KiB of
disk and one more file for every reader to open. So after each step the engine asks
``FsStore.pack_due`` (``packing.due``: a few ``stat`` calls), and when there is work and no
``cas gc`` or ``cas pack`` holds the gc lock, ``start`` packs beside the step — in a process
of its own, ``python -P -m uwf.backend.fs.autopack <cas dir> <lock dir>``, when the step's
command exits after it (``uwf thread step``), else in a thread of the process (a worker, a
background run, a program using uwf as a library: no process is started; the thread opens a
store of its own). Either way ``main``:

1. takes the gc lock as the automatic packing (``FsLocks.gc(background=True)``: it gives up
   at once when the lock is held; a ``cas gc`` or ``cas pack`` started meanwhile waits for
   it rather than failing),
2. asks ``packing.due`` again (another packing may have done the work meanwhile), and
3. packs as ``cas pack`` does (``packing.pack_store``: the loose nodes and the packs the
   geometric rule picks), under the same locks, so everything docs/format.md, "Packs", says
   of a pack's safety holds for it.

The process imports the store and nothing else (no CLI): a start costs a few tens of ms of
CPU, once every ``AUTO_PACKS`` steps or so. Its exit code: 0 packed or nothing due, 4 busy,
1 failed; it prints nothing (nobody reads its streams), and a failure leaves every node where
it was. A thread still packing when its process exits is cut short like a killed process:
the next packing removes what it left.
"""

from __future__ import annotations

import fcntl
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from uwf.backend.fs import packing

if TYPE_CHECKING:
    from uwf.backend.fs.files import NodeFiles

__all__ = ["main", "start"]

_thread: threading.Thread | None = None  # the packing this process runs in a thread, if any


def start(store: NodeFiles, *, process: bool) -> str | None:
    """Start the automatic packing unless a gc or pack runs (the caller asked
    ``packing.due``): in a process of its own (``process``), else in a thread of this one,
    one at a time. What was started (``pid <n>``, ``thread``), or None."""
    global _thread
    if _gc_running(store.lock_dir):
        return None
    args = [str(store.dir), str(store.lock_dir)]
    if process:
        if not sys.executable:  # an embedding interpreter that cannot start Python
            return None
        from uwf.adapters import process as processes

        argv = [sys.executable, "-P", "-m", __name__, *args]
        return f"pid {processes.start_background(argv, dict(os.environ))}"
    if _thread is not None and _thread.is_alive():
        return None
    _thread = threading.Thread(target=main, args=(args,), name="uwf-autopack", daemon=True)
    _thread.start()
    return "thread"


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
    from uwf.backend.fs.files import NodeFiles
    from uwf.backend.fs.locks import FsLocks
    from uwf.util.errors import Busy, UwfError

    if len(argv) != 2:
        return 2
    store = NodeFiles(Path(argv[0]), Path(argv[1]))  # all that packing reads and writes
    try:
        with FsLocks(store.lock_dir).gc(background=True):
            if packing.due(store):
                packing.pack_store(store)
    except Busy:
        return 4
    except (UwfError, OSError):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
