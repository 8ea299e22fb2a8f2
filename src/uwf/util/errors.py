"""The one exception family uwf raises for anything a user can cause.

`uwf.cli.main.main()` and every agent print ``error: <message>`` once (``report``) and exit
with the error's code. Anything that is not a ``UwfError`` is a bug and gets a traceback only
under ``UWF_DEBUG=1``.

Exit codes (docs/errors.md, "Exit codes"): 1 an error, 2 a usage error. The commands that
step threads (``thread step`` and the commands built on it) speak the loop contract, where
some errors have codes of their own (``loop_code``): 3 the thread is not active, 4 busy,
5 the agent failed, 6 waiting for a person. A signal that stops uwf exits 128 + its number.
"""

from __future__ import annotations

import signal
import sys

DEFER_EXIT = 75  # EX_TEMPFAIL: an agent that exits with it defers its step ("not now")


def oneline(text: str) -> str:
    """``text`` as is when it is one printable line, else JSON-quoted: a value from the user
    never splits an error message over two lines."""
    if text.isprintable():
        return text
    import json  # not at import: `uwf --help` loads this module and no JSON (test_startup.py)

    return json.dumps(text)


class UwfError(Exception):
    """A failure with a message meant for the user."""

    exit_code = 1
    loop_code: int | None = None  # the code under the loop contract, when it differs

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


class Collision(UwfError):
    """Two different nodes with one hash (XXH64 is not collision-resistant)."""


class Damaged(UwfError):
    """State uwf can tell is damaged — a file emptied or cut, a head that is not a hash, a
    lost pack index: the commands that depend on it fail rather than read it as nothing
    (docs/reliability.md, "Repairing damaged state")."""


class SchemaViolation(UwfError):
    """A payload that does not satisfy its JSON Schema."""


class NotActive(InvalidInput):
    """A thread that is not active (completed, killed, max rounds): nothing left to do."""

    loop_code = 3


class Busy(UwfError):
    """A lock held by another process."""

    loop_code = 4


class HeldBack(Busy):
    """A step a fleet limit holds back (docs/format.md, "Limits"): busy, exit 4."""


class Conflict(UwfError):
    """A compare-and-swap that lost the race (another writer moved the head)."""

    loop_code = 4


class NothingToStep(UwfError):
    """``thread step --next`` found no thread to step: none active, idle and not waiting."""

    loop_code = 3


class AgentFailed(UwfError):
    """An agent process that failed, timed out or answered wrongly."""

    loop_code = 5


class Stopped(UwfError):
    """A step stopped on request (``thread stop``) before it landed: not a failure of the
    thread, so its thread state records none."""


class Deferred(UwfError):
    """ "Not now": an agent deferred its step (a person must answer, a rate limit…).

    An agent process exits 75 (EX_TEMPFAIL) with it; ``uwf thread step`` then records that
    the thread waits for the role, leaves the head where it was and exits 6 (docs/format.md,
    "The agent protocol").
    """

    exit_code = DEFER_EXIT
    loop_code = 6


class Interrupted(BaseException):
    """A signal (SIGINT, SIGTERM, SIGHUP) stopped the command; exit 128 + its number.

    A ``BaseException`` like ``KeyboardInterrupt``, so that no ``except Exception`` on the
    way up can swallow it: cleanups run (``finally``) and the agent's process group is
    killed, then ``report`` prints ``error: interrupted (SIGTERM)``.
    """

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.message = f"interrupted ({signal.Signals(signum).name})"
        self.exit_code = 128 + signum
        super().__init__(self.message)


def printable(message: str) -> str:
    """An error message as it may reach a terminal and a log: every known secret replaced by
    ``***`` and control characters escaped (an agent's stderr quoted in it cannot move the
    cursor, retitle the window or write the clipboard)."""
    from uwf.util.secrets import redact
    from uwf.util.terminal import visible

    return visible(redact(message))


#: The exit code of an unexpected exception (a bug): ``internal_error`` words it.
INTERNAL_EXIT = 70


def internal_error(exc: BaseException) -> str:
    """The one line an unexpected exception (a bug, exit 70) is reported as, by ``uwf`` and
    by the agents (``error: `` before it, ``printable`` over it): its type and message, and how
    to see the traceback."""
    return f"internal error: {type(exc).__name__}: {exc} (UWF_DEBUG=1 shows the traceback)"


def exit_code(exc: UwfError | Interrupted, *, loop: bool = False) -> int:
    """The code a command exits with for ``exc`` (``loop``: under the loop contract)."""
    if loop and isinstance(exc, UwfError) and exc.loop_code is not None:
        return exc.loop_code
    return exc.exit_code


def report(exc: UwfError | Interrupted, *, loop: bool = False) -> int:
    """Print ``error: <message>`` on stderr once and return the exit code.

    The one place that turns an error into what the user sees, shared by ``uwf`` and the
    agents: known secrets are masked and control characters escaped (``printable``).
    """
    sys.stderr.write(f"error: {printable(exc.message)}\n")
    sys.stderr.flush()
    return exit_code(exc, loop=loop)
