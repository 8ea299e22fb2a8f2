"""The ``--after``/``--before`` time filter (docs/format.md, "Thread state").

``7d``, ``24h``, ``30m`` count back from now; ``YYYY-MM-DD`` is UTC midnight; an ISO date-time
without an offset is local time; with ``Z`` or an offset it is taken as given.
"""

from __future__ import annotations

import datetime as _dt
import re

from uwf.util.errors import InvalidInput, oneline

_RELATIVE = r"(\d+)(d|h|m)"  # compiled on first use, not at import (test_startup.py)
_UNIT_MS = {"d": 86_400_000, "h": 3_600_000, "m": 60_000}
_DATE = r"\d{4}-\d{2}-\d{2}"


def parse_time_ms(text: str, now_ms: int | None = None) -> int:
    value = text.strip()
    if now_ms is None:
        from uwf.util import clock

        now_ms = clock.now_ms()
    m = re.fullmatch(_RELATIVE, value)
    if m:
        return now_ms - int(m.group(1)) * _UNIT_MS[m.group(2)]
    try:
        if re.fullmatch(_DATE, value):
            day = _dt.date.fromisoformat(value)
            moment = _dt.datetime(day.year, day.month, day.day, tzinfo=_dt.UTC)
        else:
            moment = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.astimezone()  # naive means local time
        return int(moment.timestamp() * 1000)
    except ValueError:
        raise InvalidInput(
            f"invalid time format: {oneline(text)} (expected ISO date or relative like '7d')"
        ) from None
