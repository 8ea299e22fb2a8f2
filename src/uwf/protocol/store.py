"""Opening the store of a storage root (reads nothing until asked)."""

from __future__ import annotations

from pathlib import Path

from uwf.cas.fs import FsStore


def open_store(root: Path) -> FsStore:
    return FsStore(root / "cas")
