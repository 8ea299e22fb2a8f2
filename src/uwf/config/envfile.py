"""``<root>/.env``: the ``KEY=VALUE`` pairs every agent's environment gets where unset
(docs/format.md, "config.yaml and .env"), parsed once per version of the file
(``util.filememo``): a process stepping in a loop reads it at every step."""

from __future__ import annotations

import io
import os
from pathlib import Path

from uwf.util.errors import UwfError
from uwf.util.filememo import FileMemo

ENV_FILE = ".env"
ENV_LIMIT = 1 << 20  # bytes of .env read (a key file of a few lines)

#: What each .env parsed to, while the file is unchanged.
ENVS: FileMemo[dict[str, str]] = FileMemo()


def env_path(root: Path) -> Path:
    return root / ENV_FILE


def load_dotenv(root: Path) -> dict[str, str]:
    """The ``KEY=VALUE`` pairs of ``<root>/.env`` (values literal: no ``${VAR}`` expansion);
    a new dict at each call."""
    path = env_path(root)
    try:
        st = path.stat()
    except OSError:
        return {}
    if not path.is_file():
        return {}
    if st.st_size > ENV_LIMIT:
        raise UwfError(
            f"cannot read {path}: it is too large ({st.st_size} bytes, limit {ENV_LIMIT})"
        )

    def parse(data: bytes) -> dict[str, str]:
        if len(data) > ENV_LIMIT:  # grew since the stat above
            raise UwfError(f"cannot read {path}: it is too large (limit {ENV_LIMIT} bytes)")
        from dotenv import dotenv_values

        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UwfError(f"cannot read {path}: {exc}") from None
        values = dotenv_values(stream=io.StringIO(text), interpolate=False)
        return {k: v for k, v in values.items() if v is not None}

    found = ENVS.load(path, parse, ENV_LIMIT)
    return dict(found) if found is not None else {}


def apply_dotenv(root: Path) -> list[str]:
    """Put ``<root>/.env`` into ``os.environ`` without overriding; return the names set."""
    applied = []
    for key, value in load_dotenv(root).items():
        if key not in os.environ:
            os.environ[key] = value
            applied.append(key)
    return applied
