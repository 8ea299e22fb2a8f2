"""The one exception family uwf raises for anything a user can cause.

`uwf.cli.main.main()` prints ``error: <message>`` once and exits with ``exit_code``.
Anything that is not a ``UwfError`` is a bug and gets a traceback only under ``UWF_DEBUG=1``.
"""

from __future__ import annotations

import json


def oneline(text: str) -> str:
    """``text`` as is when it is one printable line, else JSON-quoted: a value from the user
    never splits an error message over two lines."""
    return text if text.isprintable() else json.dumps(text)


class UwfError(Exception):
    """A failure with a message meant for the user."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class UsageError(UwfError):
    """A command line that cannot be run as written (exit 2)."""

    exit_code = 2


class InvalidInput(UwfError):
    """A value from the user or a file that is malformed."""


class NotFound(UwfError):
    """Something named by the user does not exist."""


class CorruptNode(UwfError):
    """A CAS file whose content does not hash to its name."""


class SchemaViolation(UwfError):
    """A payload that does not satisfy its JSON Schema."""


class Busy(UwfError):
    """A lock held by another process."""


class Conflict(UwfError):
    """A compare-and-swap that lost the race."""


class AgentFailed(UwfError):
    """An agent process that failed, timed out or answered wrongly."""
