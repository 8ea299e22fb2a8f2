"""Known secrets, and their redaction from everything uwf prints, logs or stores.

A secret is known to a process in two ways: the password of any URL (``scheme://user:PASSWORD@``,
found by its shape wherever it appears) and the values the sources registered here return
(``uwf.config.secrets`` registers the values of the variables docs/architecture.md,
"Security", lists: provider API keys, ``PGPASSWORD``, the variables named in ``secrets:`` of
config.yaml, every ``<root>/.env`` entry, store URL passwords). Sources are read once, on the
first redaction, so a command that never prints, logs or stores agent text never reads them.

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
_values: tuple[str, ...] | None = None
_url: re.Pattern[str] | None = None


def register(source: Callable[[], Iterable[str]], key: str = "store") -> None:
    """Set the source of secret values named ``key`` (replacing the one of that name: a
    process that opens its store again, as tests and embedders do, keeps one); it is called
    once, on the first redaction after this."""
    global _values
    _sources[key] = source
    _values = None


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
