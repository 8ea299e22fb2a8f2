"""Where uwf keeps its data (docs/format.md, "Storage root")."""

from __future__ import annotations

import os
from pathlib import Path

# The largest YAML document uwf reads (config.yaml, a workflow file): ``yamlio.MAX_BYTES``,
# defined here so that every command's look at config.yaml (``config_mentioning``) needs no
# YAML module.
MAX_YAML_BYTES = 1 << 20
CONFIG_FILE = "config.yaml"  # in the storage root (docs/format.md, "config.yaml")


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
    path = root / CONFIG_FILE
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_YAML_BYTES + 1)  # a huge file costs no memory: refused below
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        from uwf.util.errors import UwfError

        raise UwfError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_YAML_BYTES:
        from uwf.util.errors import InvalidInput

        raise InvalidInput(
            f"invalid config.yaml: {path} is too large: more than {MAX_YAML_BYTES} bytes"
        )
    return data if word in data else None
