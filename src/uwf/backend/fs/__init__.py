"""The filesystem backend: one storage root on one machine (the embedded default).

docs/format.md, "The filesystem backend", describes every file it writes::

    <root>/cas/objects/<2 chars>/<HASH>   nodes as loose files (``nodes.FsStore``)
    <root>/cas/packs/pack-<NAME>.*        nodes in packs (``packs``, written by ``packing``)
    <root>/cas/index/<TYPE>               the type index
    <root>/threads.yaml, history.jsonl    active heads and the archive (``state.FsThreads``)
    <root>/registry.yaml                  workflow name -> hash (``state.FsRegistry``)
    <root>/locks/<thread>.lock            step locks and their holder records (``locks.FsLocks``)
    <root>/workers/<id>.json              the worker registry (``workers.FsWorkers``)
<dir>/.tmp-<name>.<pid>.<ns>          what a writer killed mid-write leaves (``temp``)

Every state file is read with a size bound, and something other than a file at its path is
damage (``damage``).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from uwf.backend.base import Backend
from uwf.backend.fs.locks import FsLocks
from uwf.backend.fs.nodes import FsStore
from uwf.backend.fs.state import FsRegistry, FsThreads

if TYPE_CHECKING:
    from uwf.backend.fs.limits import FsLimits
    from uwf.backend.fs.workers import FsWorkers


class FsBackend(Backend):
    """Everything under one directory. Opening it reads and creates nothing.

    The fleet's limits and the worker registry are built (and their modules imported) on
    first use: a read command such as ``thread show`` needs neither (tests/test_startup.py)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.nodes: FsStore = FsStore(root / "cas", root / "locks")
        self.threads: FsThreads = FsThreads(root, self.nodes)
        self.registry = FsRegistry(root)
        self.locks = FsLocks(root / "locks")

    @cached_property
    def limits(self) -> FsLimits:  # type: ignore[override]  # an attribute, built on first use
        from uwf.backend.fs.limits import FsLimits

        return FsLimits(self.root / "locks")

    @cached_property
    def workers(self) -> FsWorkers:  # type: ignore[override]  # an attribute, built on first use
        from uwf.backend.fs.workers import FsWorkers

        return FsWorkers(self.root / "workers")

    @property
    def name(self) -> str:
        return str(self.root)

    def state_damage(self) -> list[tuple[str, str]]:
        from uwf.util.errors import UwfError

        out = []
        try:
            self.threads.keys_file.read()
        except UwfError as exc:
            out.append(("startKeys", exc.message))
        try:
            damage = self.workers.damage()
        except UwfError as exc:  # workers/ is not a directory
            damage = [exc.message]
        out += [("workers", line) for line in damage]
        out += [("limits", line) for line in self.limits.damage()]
        return out

    def sweep_temp_files(self, cutoff_ms: int, *, dry_run: bool = False) -> int:
        from uwf.backend.fs.temp import sweep_temp_files

        return sweep_temp_files(self.root, self.nodes, cutoff_ms, dry_run=dry_run)


__all__ = ["FsBackend"]
