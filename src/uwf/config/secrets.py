"""Which variables hold secrets, and what a command run for a model may see of them
(docs/architecture.md, "Security").

The secrets uwf knows: every provider's API key (``apiKeyEnv`` in config.yaml), libpq's
``PGPASSWORD``, the variables config.yaml lists under ``secrets:``, every ``<root>/.env``
entry, and the password of a store URL (``--store``, ``$UWF_STORE``, ``store:``, or
``UWF_STORE`` in ``.env``). ``install`` makes their values known to ``uwf.util.secrets``,
which replaces them by ``***`` in what uwf prints, logs and stores; ``command_env`` is the
environment of a command run for a model.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from uwf.config.envfile import ENV_FILE, load_dotenv
from uwf.util import filememo, fsio, secrets
from uwf.util.errors import UwfError
from uwf.util.root import CONFIG_FILE, MAX_YAML_BYTES

if TYPE_CHECKING:
    from uwf.config.config import Config

STORE_ENV = "UWF_STORE"
PG_PASSWORD = "PGPASSWORD"  # libpq reads the password from it (docs/scale-out.md)
_USERINFO_PASSWORD = r"^([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*):[^@\s/]*@"  # compiled on use


def _config(root: Path) -> Config | None:
    """config.yaml as far as secrets go: parsed only when it can name one, else None (a
    broken file is reported by the command that needs it, never by a redaction). An agent
    redacts every node it puts: a config.yaml that names no secret costs it no import of the
    config module."""
    try:
        data = fsio.read_bytes(root / CONFIG_FILE, MAX_YAML_BYTES) or b""
    except OSError:
        return None
    if b"apiKeyEnv" not in data and b"secrets" not in data:
        return None
    from uwf.config.config import load_config

    try:
        return load_config(root)
    except UwfError:
        return None


def _dotenv(root: Path) -> dict[str, str]:
    try:
        return load_dotenv(root)
    except UwfError:
        return {}


def secret_names(config: Config | None) -> set[str]:
    """The variables whose values are secrets, by config.yaml (``.env`` entries aside; None:
    a config.yaml that names none)."""
    if config is None:
        return {PG_PASSWORD}
    names = {PG_PASSWORD, *config.secrets}
    names.update(p.api_key_env for p in config.providers.values() if p.api_key_env)
    return names


def secret_values(
    root: Path, store: str | None = None, env: Mapping[str, str] | None = None
) -> list[str]:
    """Every secret value known from the environment, ``<root>/.env``, config.yaml and the
    store URL ``store``."""
    env = os.environ if env is None else env
    dotenv = _dotenv(root)
    out = [env.get(name) or dotenv.get(name) or "" for name in secret_names(_config(root))]
    out.extend(dotenv.values())
    for url in (store, env.get(STORE_ENV), dotenv.get(STORE_ENV), _configured_store(root)):
        password = secrets.url_password(url) if url else None
        if password:
            out.append(password)
    return out


def _configured_store(root: Path) -> str | None:
    from uwf.config.config import configured_store
    from uwf.util.root import config_mentioning

    try:
        data = config_mentioning(root, b"store")
        return configured_store(data) if data is not None else None
    except UwfError:
        return None


def install(root: Path, store: str | None = None) -> None:
    """Make this machine's secrets (and the password of ``store``) known to the redaction
    of ``uwf.util.secrets``; they are read on its first use."""
    secrets.register(lambda: secret_values(root, store), stamp=lambda: stamp(root))


def stamp(root: Path) -> object:
    """The versions of the files ``secret_values`` reads (``<root>/.env``, config.yaml), for
    ``uwf.util.secrets.refresh``: a step after an edit of either reads the secrets anew."""
    return filememo.stamp(root / ENV_FILE, root / CONFIG_FILE)


def without_password(url: str) -> str:
    """A URL with the password of its user info left out (``postgresql://u@h/db``)."""
    return re.sub(_USERINFO_PASSWORD, r"\1@", url)


def command_env(
    env: Mapping[str, str], config: Config, *, provider_keys: bool = False
) -> dict[str, str]:
    """The environment of a command run for a model (a model's shell commands, a wrapped
    agent command): ``env`` without store credentials (``PGPASSWORD``, the password of
    ``$UWF_STORE``), the variables config.yaml lists under ``secrets:`` and any variable
    whose value holds one of those; unless ``provider_keys``, also without the providers'
    API-key variables and the ``<root>/.env`` entries (and any variable holding their values).
    """
    root = config.root
    drop = {PG_PASSWORD, *config.secrets}
    if not provider_keys:
        drop |= secret_names(config) | (set(_dotenv(root)) if root is not None else set())
    kept = {k: v for k, v in env.items() if k not in drop}
    if STORE_ENV in kept:
        kept[STORE_ENV] = without_password(kept[STORE_ENV])
    hidden = [v for v in _values_of(env, drop, root) if len(v) >= secrets.MIN_LENGTH]
    return {k: v for k, v in kept.items() if not any(s in v for s in hidden)}


def model_config(root: Path) -> Config:
    """config.yaml as ``command_env`` needs it (an unreadable one: no names from it)."""
    from uwf.config.config import Config

    return _config(root) or Config(root=root)


def _values_of(env: Mapping[str, str], names: Iterable[str], root: Path | None) -> list[str]:
    """The values of ``names`` and the store passwords: what no kept variable may hold."""
    values = [env[n] for n in names if env.get(n)]
    stores = [env.get(STORE_ENV), _configured_store(root) if root is not None else None]
    for url in stores:
        password = secrets.url_password(url) if url else None
        if password:
            values.append(password)
    return values
