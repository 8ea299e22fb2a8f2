"""The errors the API raises: uwf's own ``UwfError`` family (``uwf.util.errors``), each
carrying the exit code the CLI gives it (``exit_code``: 1 an error, 2 a usage error) and,
where it differs, the loop contract's (``loop_code``: 3 not active, 4 busy, 5 the agent
failed, 6 waiting; docs/errors.md, "Exit codes"). ``exit_code(error, loop=True)`` is the
code ``uwf thread step`` would have exited with.
"""

from __future__ import annotations

from uwf.util.errors import (
    AgentFailed,
    Busy,
    Conflict,
    Deferred,
    HeldBack,
    Interrupted,
    InvalidInput,
    NotActive,
    NotFound,
    NothingToStep,
    Stopped,
    UsageError,
    UwfError,
    exit_code,
)

__all__ = [
    "AgentFailed",
    "Busy",
    "Conflict",
    "Deferred",
    "HeldBack",
    "Interrupted",
    "InvalidInput",
    "NotActive",
    "NotFound",
    "NothingToStep",
    "Stopped",
    "UsageError",
    "UwfError",
    "exit_code",
]
