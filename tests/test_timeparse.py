"""The ``--after``/``--before`` time parser (docs/format.md, "Thread state").

Relative values count back from "now"; a bare date is UTC midnight; a date-time without an
offset is local time; ``Z`` or an explicit offset is taken as given. Anything else is one
error line that names the input.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from uwf.util.errors import InvalidInput
from uwf.util.timeparse import parse_time_ms

NOW = 1_780_000_000_123  # a fixed "now" (2026-05-28), so relative values are exact
MINUTE, HOUR, DAY = 60_000, 3_600_000, 86_400_000


def utc_ms(year: int, month: int, day: int, hour: int = 0, minute: int = 0) -> int:
    """Milliseconds since the epoch of a UTC calendar time (the expected values)."""
    return int(dt.datetime(year, month, day, hour, minute, tzinfo=dt.UTC).timestamp() * 1000)


def error_for(text: str) -> str:
    return f"invalid time format: {text} (expected ISO date or relative like '7d')"


@pytest.fixture
def eastern(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Run with the local time zone fixed at UTC-5 (no DST), then restore the real one."""
    monkeypatch.setenv("TZ", "EST+5")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(
    ("text", "back"),
    [("7d", 7 * DAY), ("24h", 24 * HOUR), ("30m", 30 * MINUTE), ("1d", DAY), ("0m", 0)],
)
def test_relative_values_subtract_from_now(text: str, back: int) -> None:
    assert parse_time_ms(text, now_ms=NOW) == NOW - back


def test_relative_value_defaults_to_the_real_clock() -> None:
    before = time.time_ns() // 1_000_000
    got = parse_time_ms("1h")
    after = time.time_ns() // 1_000_000
    assert before - HOUR <= got <= after - HOUR


@given(n=st.integers(min_value=0, max_value=10**6), unit=st.sampled_from(["d", "h", "m"]))
def test_relative_any_count(n: int, unit: str) -> None:
    size = {"d": DAY, "h": HOUR, "m": MINUTE}[unit]
    assert parse_time_ms(f"{n}{unit}", now_ms=NOW) == NOW - n * size


def test_surrounding_whitespace_is_trimmed() -> None:
    assert parse_time_ms("  7d\n", now_ms=NOW) == NOW - 7 * DAY
    assert parse_time_ms(" 2026-05-20 ") == utc_ms(2026, 5, 20)


def test_date_only_is_utc_midnight(eastern: None) -> None:
    # even with a non-UTC local zone, a bare date is UTC midnight (JavaScript Date.parse)
    assert parse_time_ms("2026-05-20") == utc_ms(2026, 5, 20)


def test_naive_datetime_is_local_time(eastern: None) -> None:
    # 14:30 at UTC-5 is 19:30 UTC
    assert parse_time_ms("2026-05-20T14:30:00") == utc_ms(2026, 5, 20, 19, 30)


def test_z_suffix_is_utc(eastern: None) -> None:
    assert parse_time_ms("2026-05-20T14:30:00Z") == utc_ms(2026, 5, 20, 14, 30)
    assert parse_time_ms("2026-05-20T14:30:00.250Z") == utc_ms(2026, 5, 20, 14, 30) + 250


def test_explicit_offset_is_taken_as_given(eastern: None) -> None:
    assert parse_time_ms("2026-05-20T14:30:00+02:00") == utc_ms(2026, 5, 20, 12, 30)


@pytest.mark.parametrize(
    "text", ["not-a-date", "2026-13-01", "invalid", "", "7w", "-7d", "7 d", "2026-05-32"]
)
def test_rejects_unparsable_input(text: str) -> None:
    with pytest.raises(InvalidInput) as exc:
        parse_time_ms(text, now_ms=NOW)
    assert str(exc.value) == error_for(text)


def test_error_quotes_the_input_untrimmed() -> None:
    with pytest.raises(InvalidInput) as exc:
        parse_time_ms(" nope ")
    assert str(exc.value) == error_for(" nope ")
