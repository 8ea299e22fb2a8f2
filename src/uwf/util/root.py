"""Where uwf keeps its data (PORT §2)."""

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
