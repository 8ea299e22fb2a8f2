"""Known secrets, and their redaction from everything uwf prints, logs or stores.

A secret is known to a process in two ways: the password of any URL (``scheme://user:PASSWORD@``,
found by its shape wherever it appears) and the values the sources registered here return
(``uwf.config.secrets`` registers the values of the variables docs/architecture.md,
"Security", lists: provider API keys, ``PGPASSWORD``, the variables named in ``secrets:`` of
config.yaml, every ``<root>/.env`` entry, store URL passwords). Sources are read once, on the
first redaction, so a command that never prints, logs or stores agent text never reads them; a
process stepping in a loop calls ``refresh`` at each step, which reads them again once what they
read changed (a source's ``stamp``: the identity of the files it reads), so that a key added to
``.env`` while a worker runs is redacted from its next step on.

``redact`` replaces each occurrence with ``***``. Values shorter than ``MIN_LENGTH``
characters are not redacted: they would mask ordinary words and, worse, parts of hashes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

MASK = "***"
MIN_LENGTH = 6
URL_PASSWORD = r"([A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^@\s/]*@"  # scheme://user:PASSWORD@

_sources: dict[str, Callable[[], Iterable[str]]] = {}
_stamps: dict[str, Callable[[], object]] = {}  # what tells that a source would read anew
_seen: dict[str, object] = {}  # each stamp when the values were last read
_values: tuple[str, ...] | None = None
_url: re.Pattern[str] | None = None


def register(
    source: Callable[[], Iterable[str]],
    key: str = "store",
    stamp: Callable[[], object] | None = None,
) -> None:
    """Set the source of secret values named ``key`` (replacing the one of that name: a
    process that opens its store again, as tests and embedders do, keeps one); it is called
    once, on the first redaction after this, and again after a ``refresh`` that finds its
    ``stamp`` changed (without a stamp: never again)."""
    global _values
    _sources[key] = source
    if stamp is None:
        _stamps.pop(key, None)
    else:
        _stamps[key] = stamp
    _values = None


def refresh() -> None:
    """Read the sources again, at the next redaction, if a stamp changed since they were
    read: called once per step by a process that steps in a loop (a few ``stat`` calls)."""
    global _values
    if _values is None:
        return
    for key, stamp in list(_stamps.items()):
        if stamp() != _seen.get(key):
            _values = None
            return


def add(*values: str) -> None:
    """Known secret values (a key typed into ``uwf setup``)."""
    kept = tuple(v for v in values if v)
    if kept:
        register(lambda: kept, key="added:" + "\0".join(kept))


def values() -> tuple[str, ...]:
    """Every known secret value long enough to redact, longest first (so that a secret
    holding another is masked whole)."""
    global _values
    if _values is None:
        found: set[str] = set()
        for key, stamp in list(_stamps.items()):  # before reading: a change meanwhile shows
            _seen[key] = stamp()
        for source in list(_sources.values()):
            found.update(v for v in source() if isinstance(v, str) and len(v) >= MIN_LENGTH)
        _values = tuple(sorted(found, key=len, reverse=True))
    return _values


def url_password(text: str) -> str | None:
    """The password of the first ``scheme://user:password@`` URL in ``text``, if any."""
    global _url
    if "://" not in text:
        return None
    if _url is None:
        _url = re.compile(URL_PASSWORD)
    found = _url.search(text)
    if found is None:
        return None
    password = found.group(0)[len(found.group(1)) : -1]
    return password or None


def redact_urls(text: str) -> str:
    """``text`` with the password of every URL in it replaced (``--store`` URLs in argv)."""
    global _url
    if "://" not in text:
        return text
    if _url is None:
        _url = re.compile(URL_PASSWORD)
    return _url.sub(r"\1***@", text)


def redact(text: str) -> str:
    """``text`` with every known secret and every URL password replaced by ``***``."""
    for secret in values():
        if secret in text:
            text = text.replace(secret, MASK)
    return redact_urls(text)


def redact_payload(value: Any) -> Any:
    """A JSON value with ``redact`` applied to every string in it (keys included); the same
    object when nothing changed, so that a clean payload costs no copy."""
    if not values() and not _may_hold_url(value):
        return value
    return _walk(value)


def _may_hold_url(value: Any) -> bool:
    if isinstance(value, str):
        return "://" in value
    if isinstance(value, dict):
        return any(_may_hold_url(k) or _may_hold_url(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_may_hold_url(v) for v in value)
    return False


def _walk(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        out = {_walk(k): _walk(v) for k, v in value.items()}
        same = len(out) == len(value) and all(k in value and out[k] is value[k] for k in out)
        return value if same else out
    if isinstance(value, list):
        items = [_walk(v) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value
