"""Temp files of the filesystem backend that a writer killed mid-write left behind.

Every file is written as ``.tmp-<name>.<pid>.<ns>`` beside its target, then linked or renamed
(``uwf.util.fsio``); a SIGKILL in between leaves the temp file, which nothing ever reads.
``cas gc`` deletes those last written before its cutoff. The ones a live writer could still
be using are deleted under that writer's lock: node and index files under the store's sweep
lock (every node write holds it shared), ``threads.yaml`` and ``registry.yaml`` temp files
under the file's own lock. So even ``--grace 0`` never takes a temp file from a writer.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from uwf.backend.fs.nodes import FsStore
from uwf.util import fsio

PREFIX = ".tmp-"
LOCKED_STATE = ("threads.yaml", "registry.yaml", "start-keys.yaml")  # written under <name>.lock


def _old_temp_files(directory: Path, cutoff_ms: int) -> Iterator[os.DirEntry[str]]:
    try:
        entries = list(os.scandir(directory))
    except (FileNotFoundError, NotADirectoryError):
        return
    for entry in entries:
        if not entry.name.startswith(PREFIX):
            continue
        try:
            if (
                entry.is_file(follow_symlinks=False)
                and entry.stat().st_mtime_ns // 1_000_000 < cutoff_ms
            ):
                yield entry
        except FileNotFoundError:
            continue


def _delete(entries: list[os.DirEntry[str]], dry_run: bool) -> int:
    deleted = 0
    for entry in entries:
        if dry_run:
            deleted += 1
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry.path)
            deleted += 1
    return deleted


def sweep_temp_files(root: Path, store: FsStore, cutoff_ms: int, *, dry_run: bool) -> int:
    """Delete (or count, ``dry_run``) the temp files last written before ``cutoff_ms``."""
    deleted = 0
    with store.sweeping():
        fans = [store.index_dir]
        with contextlib.suppress(FileNotFoundError):
            fans += [Path(e.path) for e in os.scandir(store.objects) if e.is_dir()]
        for fan in fans:
            deleted += _delete(list(_old_temp_files(fan, cutoff_ms)), dry_run)
    loose = list(_old_temp_files(root, cutoff_ms))
    for name in LOCKED_STATE:
        mine = [e for e in loose if e.name.startswith(f"{PREFIX}{name}.")]
        if mine:
            with fsio.locked(root / name):
                deleted += _delete(mine, dry_run)
    others = [e for e in loose if not any(e.name.startswith(f"{PREFIX}{n}.") for n in LOCKED_STATE)]
    return deleted + _delete(others, dry_run)
