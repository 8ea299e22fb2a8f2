"""``uwf config list/get/set``: read and change ``<root>/config.yaml`` by dotted key
(docs/format.md, "config.yaml and .env").

* A key is a path of names: ``agents.mock.command``; a name with a dot or other odd
  characters is quoted, ``models."gpt-4.1".name`` (or written as problems show it,
  ``models["gpt-4.1"].name``).
* ``set`` checks the key against the file's JSON Schema (``uwf.config.schema``: a misspelt
  setting is refused with the keys allowed there, though the file itself leaves unknown keys
  alone), then the whole document as every command reads it; nothing is written unless it
  passes. The value is JSON when it parses as JSON (``3``, ``true``, ``["a", "b"]``,
  ``{"command": "uwf-mock"}``), else text; ``null`` removes the setting. The file is
  rewritten atomically under its lock, keeping its mode; comments are not kept (a warning
  says so), as ``uwf setup`` does.
* What ``list``, ``get`` and ``set`` print has every known secret masked
  (``uwf.util.secrets``: a store URL's password, the values of ``.env`` and of the variables
  config.yaml names), as everything uwf prints.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from uwf.cas import wording
from uwf.config.config import CONFIG_FILE, config_path, problems
from uwf.util import fsio, yamlio
from uwf.util.errors import InvalidInput, UsageError, UwfError
from uwf.util.tuples import NamedTuple

if TYPE_CHECKING:
    from uwf.util.outputs import ConfigSet

__all__ = ["flatten", "get_value", "list_config", "parse_key", "set_value"]

_BARE = re.compile(r'[^.\["\s]+')
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def parse_key(key: str) -> list[str]:
    """The names of a dotted key (a usage error, exit 2, when it is not one): bare names
    joined by dots, a name quoted ``"like.this"`` after a dot or in brackets ``["like.this"]``."""
    names: list[str] = []
    at = 0
    while True:
        bracket = key.startswith("[", at) and bool(names)
        start = at + 1 if bracket else at
        found = _QUOTED.match(key, start) or (None if bracket else _BARE.match(key, start))
        if found is None:
            break
        quoted = found.group(1) if found.re is _QUOTED else None
        try:
            name = json.loads(f'"{quoted}"') if quoted is not None else found.group(0)
        except ValueError:
            break
        at = found.end()
        if bracket:
            if not key.startswith("]", at):
                break
            at += 1
        if not name:
            break
        names.append(name)
        if at == len(key):
            return names
        if key.startswith(".", at):
            at += 1
        elif not key.startswith("[", at):
            break
    shown = wording.literal(key, 80)
    raise UsageError(
        f"invalid config key {shown}: expected names joined by dots, e.g. agents.mock.command "
        '(quote a name holding a dot: models."gpt-4.1".name)'
    )


class _Setting(NamedTuple):
    schema: dict[str, Any]  # what the key holds
    where: str  # the key as problems show it


def _setting(names: list[str]) -> _Setting:
    """The schema of the setting ``names`` reach, or the problem of the first name the
    config.yaml schema has no place for."""
    from uwf.config.schema import CONFIG

    schema: dict[str, Any] = CONFIG
    for depth, name in enumerate(names):
        here = wording.loc(*names[: depth + 1])
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        if name in properties:
            schema = properties[name]
        elif isinstance(extra, dict):
            schema = extra
        elif properties:
            known = ", ".join(sorted(properties))
            raise InvalidInput(f'{here}: unknown key "{name}" (known keys: {known})')
        else:
            above = wording.loc(*names[:depth])
            raise InvalidInput(
                f"{here}: {above} is {wording.expected(schema)}, not a mapping of settings"
            )
    return _Setting(schema, wording.loc(*names))


def _document(root: Path) -> tuple[dict[str, Any], str]:
    """config.yaml as a mapping (empty when missing or empty) and its text."""
    path = config_path(root)
    try:
        data = fsio.read_bytes(path)
    except OSError as exc:
        raise UwfError(f"cannot read {path}: {exc.strerror or exc}") from None
    if data is None or not data.strip():
        return {}, ""
    try:
        doc = yamlio.load(data, source=CONFIG_FILE, path=path)
    except InvalidInput as exc:
        raise InvalidInput(f"invalid {CONFIG_FILE}: {exc.message} (fix or remove {path})") from None
    if doc is None:
        return {}, data.decode("utf-8", "replace")
    if not isinstance(doc, dict):
        raise InvalidInput(
            f"invalid {CONFIG_FILE}: expected a mapping of settings, got {wording.kind(doc)} "
            f"(fix or remove {path})"
        )
    return doc, data.decode("utf-8", "replace")


def _masked(root: Path, value: Any) -> Any:
    """``value`` with every secret this machine knows masked (``***``)."""
    from uwf.config import secrets as known
    from uwf.util import secrets

    known.install(root)
    return secrets.redact_payload(value)


def list_config(root: Path) -> dict[str, Any]:
    """The whole of config.yaml, secrets masked (``{}`` when there is none)."""
    return dict(_masked(root, _document(root)[0]))


def get_value(root: Path, key: str) -> Any:
    """The value config.yaml sets at ``key`` (secrets masked); null for a setting it leaves
    unset. A key the schema has no place for is an error."""
    names = parse_key(key)
    _setting(names)
    node: Any = _document(root)[0]
    for name in names:
        if not isinstance(node, dict) or name not in node:
            return None
        node = node[name]
    return _masked(root, node)


def _value(text: str) -> Any:
    """A value as given on the command line: JSON when it parses, else the text itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def set_value(root: Path, key: str, text: str) -> tuple[ConfigSet, list[str]]:
    """Set ``key`` to the value ``text`` gives (null removes it) and write config.yaml, if the
    whole document then passes its schema; what ``config set`` prints, and its warnings."""
    names = parse_key(key)
    setting = _setting(names)
    value = _value(text)
    root.mkdir(parents=True, exist_ok=True)
    path = config_path(root)
    with fsio.locked(path):
        doc, before = _document(root)
        node = doc
        for depth, name in enumerate(names[:-1]):
            child = node.get(name)
            if child is None:
                child = node[name] = {}
            elif not isinstance(child, dict):
                here = wording.loc(*names[: depth + 1])
                raise InvalidInput(
                    f"{setting.where}: {here} is {wording.kind(child)} in {CONFIG_FILE}, not a "
                    f"mapping (uwf config set {here} '{{}}' replaces it)"
                )
            node = child
        previous = node.get(names[-1])
        if value is None:
            node.pop(names[-1], None)
        else:
            node[names[-1]] = value
        found = problems(doc)
        if found:
            raise _refused(setting.where, found)
        warnings = []
        if any(line.lstrip().startswith("#") for line in before.splitlines()):
            warnings.append(f"{CONFIG_FILE}'s comments are not kept: config set rewrites the file")
        _write(path, doc)
    done: ConfigSet = {"key": setting.where, "value": value, "previous": previous}
    return cast("ConfigSet", _masked(root, done)), warnings


def _refused(where: str, found: list[str]) -> InvalidInput:
    """The problems the document would have: nothing is written."""
    if len(found) == 1:
        return InvalidInput(f"cannot set {where}: {found[0]} ({CONFIG_FILE} unchanged)")
    lines = [
        f"cannot set {where}: {CONFIG_FILE} would have {len(found)} problems (it is unchanged)",
        *(f"  - {line}" for line in found),
    ]
    return InvalidInput("\n".join(lines))


def _write(path: Path, doc: dict[str, Any]) -> None:
    import yaml

    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, default_flow_style=False)
    fsio.atomic_write(path, text.encode("utf-8"), mode=mode)


def flatten(value: Any, prefix: tuple[str, ...] = ()) -> list[tuple[str, Any]]:
    """Every setting of a document as (dotted key, value): mappings walked, anything else a
    value (a list too); an empty mapping is a value."""
    if isinstance(value, dict) and value:
        out: list[tuple[str, Any]] = []
        for name, child in value.items():
            out += flatten(child, (*prefix, str(name)))
        return out
    return [(wording.loc(*prefix), value)] if prefix else []
