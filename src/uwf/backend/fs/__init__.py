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

from pathlib import Path

from uwf.backend.base import Backend
from uwf.backend.fs.limits import FsLimits
from uwf.backend.fs.locks import FsLocks
from uwf.backend.fs.nodes import FsStore
from uwf.backend.fs.state import FsRegistry, FsThreads
from uwf.backend.fs.workers import FsWorkers


class FsBackend(Backend):
    """Everything under one directory. Opening it reads and creates nothing."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.nodes: FsStore = FsStore(root / "cas", root / "locks")
        self.threads: FsThreads = FsThreads(root, self.nodes)
        self.registry = FsRegistry(root)
        self.locks = FsLocks(root / "locks")
        self.limits: FsLimits = FsLimits(root / "locks")
        self.workers = FsWorkers(root / "workers")

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
