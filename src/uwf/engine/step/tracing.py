"""What the step's span records (docs/format.md, "Traces"): the thread, workflow, role,
agent, the heads before and after, the status, the exit code of the step and its duration.
With tracing off every call here is a no-op on ``otel.NO_SPAN``."""

from __future__ import annotations

from uwf.adapters.otel import Span
from uwf.engine.step.commit import StepResult
from uwf.engine.step.plan import StepPlan


def planned(span: Span, plan: StepPlan) -> None:
    span.set("uwf.workflow", plan.workflow)
    span.set("uwf.workflow.name", plan.workflow_name)
    span.set("uwf.role", plan.role)
    span.set("uwf.agent", plan.argv[0] if plan.argv and plan.role else None)
    span.set("uwf.depth", plan.depth)


def landed(span: Span, result: StepResult) -> None:
    span.set("uwf.step", result.head)
    span.set("uwf.status", result.status)
    span.set("uwf.done", result.done)
    span.set("uwf.exit_code", 0)


def failed(span: Span, message: str, code: int) -> None:
    span.set("uwf.exit_code", code)
    span.fail(message)
