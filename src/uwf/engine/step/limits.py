"""Fleet limits around a step's agent (docs/format.md, "Limits").

``held`` takes, before the agent is spawned, a slot of every limit the plan names — the
agent alias's, then its provider's — through the backend, so every ``thread step``, ``--next``
and ``uwf worker`` on every machine sharing the store counts against the same limits. A limit
that is reached holds the step back: ``HeldBack`` (busy, exit 4) with the reason; nothing ran
and nothing is recorded as a failure.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from uwf.backend.base import Backend
from uwf.engine.step.plan import Limit, StepPlan
from uwf.util.errors import HeldBack


def reason(limit: Limit, which: str) -> str:
    """Why ``limit`` holds a step back (``which``: ``concurrency`` or ``perMinute``)."""
    kind = "agent" if limit.section == "agents" else "provider"
    where = f"limits.{limit.section}.{limit.name}.{which}"
    if which == "concurrency":
        return f"{kind} {limit.name} is at its limit of {limit.concurrency} steps at once ({where})"
    return f"{kind} {limit.name} is at its limit of {limit.per_minute} steps a minute ({where})"


@contextlib.contextmanager
def held(backend: Backend, plan: StepPlan) -> Iterator[None]:
    """A slot of each of the plan's limits for the block, or HeldBack."""
    with contextlib.ExitStack() as stack:
        for limit in plan.limits:
            name = f"{limit.section}/{limit.name}"
            try:
                stack.enter_context(backend.limits.hold(name, limit.concurrency, limit.per_minute))
            except HeldBack as exc:
                raise HeldBack(
                    f"thread {plan.thread} is held back: {reason(limit, exc.message)}"
                ) from None
        yield
