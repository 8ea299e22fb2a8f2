"""The storage backends: everything uwf persists, behind one interface (``base.Backend``).

``open_backend`` is the one place that chooses an implementation; commands, the engine and
the agent kit receive the backend it returns and never open files of the store themselves.
"""

from __future__ import annotations

import os
from pathlib import Path

from uwf.backend.base import Backend

STORE_ENV = "UWF_STORE"
RELAY_ENV = "UWF_STORE_RELAY"  # uwf.backend.relay


def store_spec(spec: str | Path | None = None) -> str | None:
    """Which store to open: ``spec`` (``--store``), else ``$UWF_STORE``, else ``store:`` in
    ``<root>/config.yaml``; None means the storage root itself (docs/scale-out.md)."""
    if spec is not None and str(spec):
        return str(spec)
    value = os.environ.get(STORE_ENV)
    if value:
        return value
    from uwf.util.root import configured_store, storage_root

    return configured_store(storage_root())


def open_backend(spec: str | Path | None = None) -> Backend:
    """The backend of this invocation.

    ``spec`` (else ``$UWF_STORE``, else ``store:`` in config.yaml) is a ``postgresql://`` URL
    (the PostgreSQL backend; this machine's files stay at the storage root) or a directory
    (the filesystem backend there). Unset, it is the filesystem backend at the storage root
    (docs/format.md, "Storage root"). Opening reads nothing but config.yaml and connects
    nothing: the first statement does.
    """
    from uwf.util.root import storage_root

    chosen = store_spec(spec)
    if chosen is not None and chosen.startswith(("postgresql://", "postgres://")):
        from uwf.backend.postgres import PgBackend

        return PgBackend(chosen, storage_root())
    from uwf.backend.fs import FsBackend

    return FsBackend(Path(chosen).expanduser() if chosen is not None else storage_root())


def open_for_agent() -> Backend:
    """The backend of an agent process: the store relay of the step that spawned it when it
    offers one (``uwf.backend.relay``: no database driver, no connection), else
    ``open_backend()``."""
    if os.environ.get(RELAY_ENV):
        from uwf.backend import relay
        from uwf.util.root import storage_root

        found = relay.take(storage_root())
        if found is not None:
            return found
    return open_backend()
