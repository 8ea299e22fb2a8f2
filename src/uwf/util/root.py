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


def config_mentioning(root: Path, word: bytes) -> bytes | None:
    """The bytes of ``<root>/config.yaml`` when they contain ``word``, else None.

    Read on every command (``store:``), so the caller parses the file only when the key can
    be there at all."""
    from uwf.util.yamlio import MAX_BYTES

    path = root / "config.yaml"
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)  # a huge file costs no memory: refused below
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        from uwf.util.errors import UwfError

        raise UwfError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        from uwf.util.errors import InvalidInput

        raise InvalidInput(f"invalid config.yaml: {path} is too large: more than {MAX_BYTES} bytes")
    return data if word in data else None
