"""What an agent that runs in uwf's own process is given (docs/api.md, "Python agents").

A process agent is spawned as ``<command> [args] <thread> <role>`` with the edge prompt and
the step's variables in its environment, and prints the hash of the StepNode it wrote. A
Python agent is a callable ``agent(call: AgentCall) -> str`` that gets the same things as an
``AgentCall`` — the backend itself instead of ``$UWF_STORE`` — and returns the same hash. The
engine (``engine.step.inproc``) makes the call and the agent kit turns it into its context
(``agent_kit.inprocess``), so both share this class, as they share ``model.answer``.

Stopping is cooperative: Python cannot kill a thread. ``should_stop`` turns True when the
step no longer wants an answer — its timeout passed, ``thread kill`` ended the thread, a stop
was asked for — and an agent should then return (or raise) soon; whatever it returns after
that is ignored (docs/api.md, "Timeouts and stopping").
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from uwf.util import clock

if TYPE_CHECKING:
    from uwf.backend.base import Backend
    from uwf.util.base32 import NodeHash
    from uwf.util.ulid import ThreadId

__all__ = ["AgentCall", "PythonAgent", "Stderr"]

SLICE = 0.05  # seconds: the longest pause of ``AgentCall.sleep`` between two looks at a stop


class Stderr(Protocol):
    """Where an agent writes what a process would write to stderr: lines shown live with the
    agent's name before them, the last ones quoted when the step fails."""

    def write(self, text: str) -> int: ...

    def flush(self) -> None: ...


class AgentCall:
    """One run of a Python agent: the step's thread, role, prompt and surroundings.

    ``args`` are the alias's ``args`` (config.yaml) as a process would get them before
    ``<thread> <role>``; ``env`` the environment a process agent of this step would get
    (uwf's, plus ``<root>/.env`` where unset, plus the step's variables); ``cwd`` where the
    agent works (None: the directory uwf runs in: a Python agent never changes directory,
    it is shared by the process); ``children`` the final heads of the children a fan-out's
    join gathers; ``artifacts`` the run's fresh artifacts directory; ``deadline`` the moment
    (``uwf.util.clock.monotonic``) at which the step times out, None for no timeout.
    """

    __slots__ = (
        "_stop",
        "args",
        "artifacts",
        "backend",
        "children",
        "cwd",
        "deadline",
        "env",
        "head",
        "prompt",
        "role",
        "stderr",
        "thread",
    )

    def __init__(
        self,
        *,
        backend: Backend,
        thread: ThreadId,
        role: str,
        prompt: str,
        head: NodeHash,
        args: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        children: tuple[NodeHash, ...] | None = None,
        artifacts: str | None = None,
        deadline: float | None = None,
        stderr: Stderr | None = None,
    ) -> None:
        self.backend = backend
        self.thread = thread
        self.role = role
        self.prompt = prompt
        self.head = head  # the head the step was planned from
        self.args = args
        self.env: Mapping[str, str] = env if env is not None else {}
        self.cwd = cwd
        self.children = children
        self.artifacts = artifacts
        self.deadline = deadline
        self.stderr = stderr
        self._stop = threading.Event()

    def should_stop(self) -> bool:
        """Whether the step no longer wants this agent's answer (timeout, kill, stop)."""
        return self._stop.is_set() or (
            self.deadline is not None and clock.monotonic() >= self.deadline
        )

    def remaining(self) -> float | None:
        """Seconds until the step's timeout (0 once passed), None without a timeout."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - clock.monotonic())

    def sleep(self, seconds: float) -> bool:
        """Pause ``seconds`` on ``uwf.util.clock`` (in slices of at most ``SLICE``, so that a
        stop is seen within one; a test's clock moves on by them at once), or less when the
        step stops wanting the answer; whether it still wants it."""
        end = clock.monotonic() + seconds
        while not self.should_stop():
            left = end - clock.monotonic()
            if left <= 0:
                return True
            clock.sleep(min(left, SLICE))
        return False

    def stop(self) -> None:
        """Tell the agent to stop (the engine does, when it gives up on the answer)."""
        self._stop.set()


class PythonAgent(Protocol):
    """A Python agent: called once per step, returns the hash of the StepNode it wrote (the
    process protocol's stdout); raises ``uwf.util.errors.Deferred`` to defer the step, or
    another error to fail it."""

    def __call__(self, call: AgentCall, /) -> str: ...
