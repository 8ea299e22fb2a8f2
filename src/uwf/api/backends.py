"""Opening a store by the CLI's rules, for the CLI and the API alike (docs/api.md, "Stores").

A store is a directory or a PostgreSQL URL; unset, ``$UWF_STORE``, else ``store:`` in
``<root>/config.yaml``, else the storage root (``uwf.backend.open_backend``). Opening also
makes this machine's secrets (and the store URL's password) known to the redaction of
everything uwf prints, logs or stores, read on the first redaction.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from uwf.backend.base import Backend

__all__ = ["open_backend"]


def open_backend(spec: str | Path | None = None) -> Backend:
    """The backend ``spec`` names (``--store``'s rules); nothing is read but config.yaml and
    nothing connects until the first statement."""
    from uwf.backend import open_backend as opened
    from uwf.util import secrets

    backend = opened(spec)
    store = str(spec) if spec is not None else None
    secrets.register(lambda: _secret_values(backend.root, store))
    return backend


def _secret_values(root: Path, store: str | None) -> list[str]:
    from uwf.config.secrets import secret_values

    return secret_values(root, store)
