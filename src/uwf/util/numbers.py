"""Positive numbers from the command line and the environment, with one wording for errors.

    positive_seconds("2.5", "--http-timeout")   -> 2.5
    positive_int("0", "--max-turns", UsageError) -> UsageError("--max-turns must be …, got: 0")

``what`` names the option or variable (``--timeout``, ``$UWF_LLM_TIMEOUT``); ``error`` is the
class raised (``UsageError`` for an agent's own options, exit 2; ``InvalidInput`` otherwise).
The value is quoted with :func:`oneline`, so a bad value never splits the error line.
"""

from __future__ import annotations

import math

from uwf.util.errors import InvalidInput, UwfError, oneline


def positive_seconds(value: str, what: str, error: type[UwfError] = InvalidInput) -> float:
    """A finite number of seconds above zero (``1``, ``0.5``, ``2e1``); nan and inf refused."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not (number > 0 and math.isfinite(number)):
        raise error(f"{what} must be a positive number of seconds, got: {oneline(value)}")
    return number


def as_count(value: str) -> int | None:
    """A whole number of at least 0, written in decimal digits (an optional ``+``), or None."""
    text = value.strip()
    digits = text[1:] if text.startswith("+") else text
    if not (digits.isascii() and digits.isdigit()):
        return None
    return int(digits)


def as_positive_int(value: str) -> int | None:
    """``as_count`` above 0, or None."""
    number = as_count(value)
    return number if number is not None and number >= 1 else None


def positive_int(value: str, what: str, error: type[UwfError] = InvalidInput) -> int:
    """``as_positive_int``, or ``<what> must be a positive integer, got: <value>``."""
    number = as_positive_int(value)
    if number is None:
        raise error(f"{what} must be a positive integer, got: {oneline(value)}")
    return number
