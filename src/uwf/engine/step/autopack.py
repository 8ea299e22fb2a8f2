"""The store's automatic packing, started after a step (docs/architecture.md, "Automatic
packing"): in a thread of the stepping process, or in a process of its own for a command that
exits after its steps."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from uwf.backend.base import Backend
from uwf.util.errors import UwfError
from uwf.util.log import ProcessLog

__all__ = ["pack_soon", "packing_in_a_process"]


#: Where a step starts the store's automatic packing: in a thread of this process (the
#: default: a worker, a background run, a program using uwf as a library), or, set by a
#: command that exits after its steps (``packing_in_a_process``), in a process of its own.
_PACK_IN_A_PROCESS: ContextVar[bool] = ContextVar("uwf_pack_in_a_process", default=False)


@contextlib.contextmanager
def packing_in_a_process() -> Iterator[None]:
    """For the steps of the block, start the automatic packing in a process of its own
    (``uwf thread step``: the command exits before a pack in a thread would end)."""
    token = _PACK_IN_A_PROCESS.set(True)
    try:
        yield
    finally:
        _PACK_IN_A_PROCESS.reset(token)


def pack_soon(backend: Backend, log: ProcessLog) -> None:
    """Start the store's automatic packing when enough small packs or loose nodes piled up
    (docs/architecture.md, "Automatic packing"; ``autoPack: false`` in config.yaml turns it
    off). A few ``stat`` calls when there is nothing to do; never fails the step."""
    try:
        if not backend.nodes.pack_due():
            return
        from uwf.config.config import load_config

        if not load_config(backend.root).auto_pack:
            return
        started = backend.nodes.pack_in_background(process=_PACK_IN_A_PROCESS.get())
    except (UwfError, OSError):
        return
    if started is not None:
        log.write("A7P3K9W2", f"automatic packing started ({started})")
