"""Thread ids: standard ULIDs (26 Crockford characters, 48-bit ms time in the first 10)."""

from __future__ import annotations

from typing import NewType

from uwf.util.base32 import ALPHABET, describe
from uwf.util.errors import InvalidInput

_INDEX = {c: i for i, c in enumerate(ALPHABET)}

ThreadId = NewType("ThreadId", str)
"""A thread id: a checked ULID (see ``check_thread_id``)."""


def new_thread_id(now_ms: int | None = None) -> ThreadId:
    """A fresh ULID. Imported lazily: only `thread start` and `fork` pay for python-ulid."""
    from ulid import ULID

    if now_ms is None:  # the clock of uwf.util.clock, which a test may have moved
        from uwf.util import clock

        now_ms = clock.now_ms()
    # An int is taken as milliseconds; a float of seconds would lose the last ms to rounding.
    return ThreadId(str(ULID.from_timestamp(int(now_ms))))


def is_thread_id(text: object) -> bool:
    """26 Crockford digits, the first 0-7 (48 bits of time); checked like ``is_hash``."""
    return (
        isinstance(text, str)
        and len(text) == 26
        and text[0] in "01234567"
        and not text.strip(ALPHABET)
    )


def check_thread_id(text: str) -> ThreadId:
    if not is_thread_id(text):
        raise InvalidInput(f"invalid thread id: {describe(text)} (expected a 26-character ULID)")
    return ThreadId(text)


def timestamp_ms(thread_id: str) -> int | None:
    """The creation time encoded in a ULID (ms since the epoch), or None if it is not one."""
    if not is_thread_id(thread_id):
        return None
    value = 0
    for ch in thread_id[:10]:
        value = (value << 5) | _INDEX[ch]
    return value


def now_ms() -> int:
    """Milliseconds since the epoch, on uwf's clock (``uwf.util.clock``; imported on first
    use: ``thread show`` reads no clock)."""
    from uwf.util import clock

    return clock.now_ms()
