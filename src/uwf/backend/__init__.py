"""The storage backends: everything uwf persists, behind one interface (``base.Backend``).

``open_backend`` is the one place that chooses an implementation; commands, the engine and
the agent kit receive the backend it returns and never open files of the store themselves.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the interface's module is imported by the backend that subclasses it
    from uwf.backend.base import Backend

STORE_ENV = "UWF_STORE"
RELAY_ENV = "UWF_STORE_RELAY"  # uwf.backend.relay

# The URL schemes of a PostgreSQL store; SQLAlchemy's spellings of the drivers uwf used and
# uses (``postgresql+psycopg://``, ``postgresql+psycopg2://``) are taken too, as the same URL.
PG_SCHEMES = ("postgresql://", "postgres://")
PG_ALIASES = ("postgresql+psycopg://", "postgresql+psycopg2://")
_SCHEME = r"[A-Za-z][A-Za-z0-9+.-]*://"  # compiled on first use, not at import


def postgres_url(spec: str) -> str | None:
    """The libpq URL of a PostgreSQL store spec, None for a directory path; ``InvalidInput``
    for any other ``scheme://…``: a mistyped URL never becomes a directory of that name."""
    if spec.startswith(PG_SCHEMES):
        return spec
    for alias in PG_ALIASES:
        if spec.startswith(alias):
            return "postgresql://" + spec[len(alias) :]
    import re

    found = re.match(_SCHEME, spec)
    if found is None:
        return None
    from uwf.util.errors import InvalidInput, oneline
    from uwf.util.secrets import redact

    accepted = ", ".join((*PG_SCHEMES, *PG_ALIASES))
    raise InvalidInput(
        f"cannot open the store {oneline(redact(spec))}: unknown URL scheme {found.group(0)} "
        f"(a store is a directory path, or a PostgreSQL URL: {accepted})"
    )


def store_spec(spec: str | Path | None = None) -> str | None:
    """Which store to open: ``spec`` (``--store``), else ``$UWF_STORE``, else ``store:`` in
    ``<root>/config.yaml``; None means the storage root itself (docs/scale-out.md)."""
    if spec is not None and str(spec):
        return str(spec)
    value = os.environ.get(STORE_ENV)
    if value:
        return value
    from uwf.util.root import config_mentioning, storage_root

    data = config_mentioning(storage_root(), b"store")
    if data is None:
        return None
    from uwf.config.config import configured_store

    return configured_store(data)


def open_backend(spec: str | Path | None = None) -> Backend:
    """The backend of this invocation.

    ``spec`` (else ``$UWF_STORE``, else ``store:`` in config.yaml) is a ``postgresql://`` URL
    (the PostgreSQL backend; this machine's files stay at the storage root) or a directory
    path (the filesystem backend there); any other ``scheme://`` is an error
    (``postgres_url``). Unset, it is the filesystem backend at the storage root
    (docs/format.md, "Storage root"). Opening reads nothing but config.yaml and connects
    nothing: the first statement does.
    """
    from uwf.util.root import storage_root

    chosen = store_spec(spec)
    url = postgres_url(chosen) if chosen is not None else None
    if url is not None:
        from uwf.backend.postgres import PgBackend

        return PgBackend(url, storage_root())
    from uwf.backend.fs import FsBackend

    return FsBackend(Path(chosen).expanduser() if chosen is not None else storage_root())


def open_for_agent() -> Backend:
    """The backend of an agent process: the store relay of the step that spawned it when it
    offers one (``uwf.backend.relay``: no database driver, no connection), else
    ``open_backend()``."""
    offer = os.environ.pop(RELAY_ENV, "")  # kept from the commands the agent runs
    if offer:
        from uwf.backend import relay
        from uwf.util.root import storage_root

        found = relay.take(storage_root(), offer)
        if found is not None:
            return found
    return open_backend()


def __getattr__(name: str) -> object:
    """``uwf.backend.Backend``, the interface (``uwf.backend.base``), imported on first use:
    ``import uwf.backend.failure`` (a record) needs none of it."""
    if name == "Backend":
        from uwf.backend.base import Backend

        return Backend
    raise AttributeError(f"module 'uwf.backend' has no attribute {name!r}")


__all__ = [
    "PG_ALIASES",
    "PG_SCHEMES",
    "RELAY_ENV",
    "STORE_ENV",
    "open_backend",
    "open_for_agent",
    "postgres_url",
    "store_spec",
]
