"""Fleet limits around a step's agent (docs/format.md, "Limits").

``held`` takes, before the agent is spawned, a slot of every limit the plan names — the
agent alias's, then its provider's — through the backend, so every ``thread step``, ``--next``
and ``uwf worker`` on every machine sharing the store counts against the same limits. A limit
that is reached holds the step back: ``HeldBack`` (busy, exit 4) with the reason; nothing ran
and nothing is recorded as a failure. A limit whose file is damaged (docs/reliability.md,
"Repairing damaged state") holds the step back too, with the error naming the file: uwf
cannot tell how many steps it allows, and no thread is failed for it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from uwf.backend.base import Backend
from uwf.engine.step.plan import Limit, StepPlan
from uwf.util.errors import Damaged, HeldBack
from uwf.util.ulid import now_ms


def reason(limit: Limit, which: str) -> str:
    """Why ``limit`` holds a step back (``which``: ``concurrency`` or ``perMinute``)."""
    kind = "agent" if limit.section == "agents" else "provider"
    where = f"limits.{limit.section}.{limit.name}.{which}"
    if which == "concurrency":
        return f"{kind} {limit.name} is at its limit of {limit.concurrency} steps at once ({where})"
    return f"{kind} {limit.name} is at its limit of {limit.per_minute} steps a minute ({where})"


@contextlib.contextmanager
def held(backend: Backend, plan: StepPlan) -> Iterator[None]:
    """A slot of each of the plan's limits for the block, or HeldBack (also while a provider
    of the plan backs off after a 429: ``back_off``)."""
    with contextlib.ExitStack() as stack:
        for limit in plan.limits:
            name = f"{limit.section}/{limit.name}"
            try:
                until = backend.limits.paused(name) if limit.section == "providers" else None
            except Damaged as exc:
                raise HeldBack(f"thread {plan.thread} is held back: {exc.message}") from None
            if until is not None:
                raise HeldBack(
                    f"thread {plan.thread} is held back: provider {limit.name} answered 429 "
                    f"(rate limited); no step of it starts for {_seconds(until)} s"
                )
            try:
                stack.enter_context(backend.limits.hold(name, limit.concurrency, limit.per_minute))
            except Damaged as exc:
                raise HeldBack(f"thread {plan.thread} is held back: {exc.message}") from None
            except HeldBack as exc:
                raise HeldBack(
                    f"thread {plan.thread} is held back: {reason(limit, exc.message)}"
                ) from None
        yield


def _seconds(until: int) -> int:
    return max(1, -(-(until - now_ms()) // 1000))
