"""Where uwf keeps its data (docs/format.md, "Storage root")."""

from __future__ import annotations

import os
from pathlib import Path


def storage_root() -> Path:
    """``$UNCAGED_WORKFLOW_STORAGE_ROOT``, else ``$WORKFLOW_STORAGE_ROOT``, else the default.

    The default is ``~/.uncaged/workflow``. Empty values count as unset.
    """
    for name in ("UNCAGED_WORKFLOW_STORAGE_ROOT", "WORKFLOW_STORAGE_ROOT"):
        value = os.environ.get(name)
        if value:
            return Path(value).expanduser()
    return Path.home() / ".uncaged" / "workflow"


def configured_store(root: Path) -> str | None:
    """The ``store:`` entry of ``<root>/config.yaml`` (a URL or a directory), None if unset.

    Read on every command, so the file is parsed only when it mentions ``store`` at all.
    """
    try:
        data = (root / "config.yaml").read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        from uwf.util.errors import UwfError

        raise UwfError(f"cannot read {root / 'config.yaml'}: {exc.strerror or exc}") from None
    if b"store" not in data:
        return None
    from uwf.util import yamlio
    from uwf.util.errors import InvalidInput

    try:
        loaded = yamlio.load(data, source="config.yaml")
    except InvalidInput as exc:
        raise InvalidInput(f"invalid config.yaml: {exc.message}") from None
    value = loaded.get("store") if isinstance(loaded, dict) else None
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput("invalid config.yaml: config.store must be a URL or a directory")
    return value.strip()
