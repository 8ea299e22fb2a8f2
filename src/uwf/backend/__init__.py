"""The storage backends: everything uwf persists, behind one interface (``base.Backend``).

``open_backend`` is the one place that chooses an implementation; commands, the engine and
the agent kit receive the backend it returns and never open files of the store themselves.
"""

from __future__ import annotations

from pathlib import Path

from uwf.backend.base import Backend


def open_backend(spec: str | Path | None = None) -> Backend:
    """The backend of this invocation: the filesystem backend at the storage root.

    ``spec`` is a storage root (a directory); it defaults to the storage root of the
    environment (docs/format.md, "Storage root"). Opening reads and creates nothing.
    """
    from uwf.backend.fs import FsBackend
    from uwf.util.root import storage_root

    return FsBackend(Path(spec) if spec is not None else storage_root())
