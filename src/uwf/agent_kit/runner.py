"""The agent flow every ``uwf-*`` agent shares (docs/agents.md, "A Python agent on the agent kit").

An agent supplies ``run`` (and optionally ``resume`` for correction prompts); the kit does
the rest: arguments, context from the chain (with compaction summaries: ``ctx.history``), the
format instruction, the two-layer extract (frontmatter fast path, up to two corrections, then
the LLM fallback), the artifacts left in ``$UWF_ARTIFACTS_DIR``, the StepNode write, and
printing its hash. Every node the step puts is held by ``ctx.store`` and written with the
others in one ``put_many`` once the StepNode is put (one pack, one transaction). Every
failure is one ``error: …`` line on stderr and exit 1 (2 for a usage error:
``uwf.agent_kit.args``, the command line every agent shares).
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from uwf.adapters import otel
from uwf.agent_kit.context import AgentContext, build_context
from uwf.agent_kit.target import Target, plain
from uwf.model import turns as model_turns
from uwf.model.turns import TURN_SCHEMA, detail_schema
from uwf.util.errors import (
    INTERNAL_EXIT,
    Interrupted,
    UwfError,
    internal_error,
    printable,
    report,
)
from uwf.util.tuples import NamedTuple

if TYPE_CHECKING:
    import argparse

    from uwf.agent_kit import args
    from uwf.backend.base import Backend
    from uwf.model.agentcall import AgentCall

__all__ = [
    "TURN_SCHEMA",
    "Agent",
    "RunResult",
    "Target",
    "cli",
    "cost_fields",
    "detail_schema",
    "execute",
    "main",
]

MAX_CORRECTIONS = 2


class RunResult(NamedTuple):
    """What one run (or resume) of an agent produced."""

    output: str
    detail: str  # hash of the detail node; after corrections it should cover every run
    session: str | None = None
    output_hash: str | None = None  # the output node, when the agent stored it (no extract)


class Agent(Protocol):
    label: str  # what the StepNode's ``agent`` field says, e.g. "uwf-mock"

    def run(self, ctx: AgentContext) -> RunResult: ...

    def resume(self, ctx: AgentContext, session: str | None, message: str) -> RunResult | None:
        """Send a correction prompt; None when the agent cannot continue a session."""
        ...


def store_turns(ctx: AgentContext, turns: list[dict[str, Any]]) -> list[str]:
    """Store each turn as an AgentTurn node; return their hashes in order. Turns not shown
    live yet are published now (``agent_kit.live``)."""
    from uwf.agent_kit import live

    live.publish_new(turns)
    return model_turns.store_turns(ctx.store, turns)


#: The fields of a detail that records a model session (``uwf-builtin``, ``uwf-hermes``).
SESSION_FIELDS: dict[str, Any] = {
    "sessionId": {"type": "string"},
    "model": {"type": "string"},
    "duration": {"type": "integer", "minimum": 0},
    "turnCount": {"type": "integer", "minimum": 0},
}


def store_session_detail(
    ctx: AgentContext,
    schema: dict[str, Any],
    session_id: str,
    model: str,
    duration_ms: int,
    turns: list[dict[str, Any]],
    extra: dict[str, Any] | None = None,
) -> str:
    """Store the turns, then a ``SESSION_FIELDS`` detail (plus ``extra`` and the cost fields)
    under ``schema``; its hash."""
    refs = store_turns(ctx, turns)
    return ctx.store.put(
        ctx.store.put_schema(schema),
        {
            "sessionId": session_id,
            "model": model,
            "duration": max(0, duration_ms),
            "turnCount": len(refs),
            "turns": refs,
            **(extra or {}),
            **cost_fields(ctx),
        },
    )


def _extract(
    agent: Agent, ctx: AgentContext, first: RunResult, span: otel.Span
) -> tuple[str, RunResult]:
    """The output hash, and the last run (whose detail covers the corrections too).

    Each correction prompt names what the role schema rejected (``notes: False is not of
    type 'string'``), and so does the error when nothing could be extracted.
    """
    from uwf.agent_kit import fastpath

    if first.output_hash is not None:
        span.event("extract", {"method": "agent"})
        return first.output_hash, first
    result = first
    for attempt in range(MAX_CORRECTIONS + 1):
        _suspend_if_asked(result.output, ctx.routing_key)
        found = fastpath.offer(result.output, ctx.schema_hash, ctx.store)
        if found.hash is not None:
            span.event("extract", {"method": "frontmatter", "corrections": attempt})
            return found.hash, result
        problems = found.problems
        if attempt == MAX_CORRECTIONS:
            break
        span.event("correction", {"attempt": attempt + 1})
        from uwf.agent_kit import prompts  # only a correction needs them

        again = agent.resume(ctx, result.session, prompts.correction_message(problems))
        if again is None:
            break
        result = again
    from uwf.agent_kit import extract  # only an answer the fast path could not read needs it

    calls = ctx.meter.usage.calls if ctx.meter.usage else 0
    output_hash = extract.extract(
        ctx.root, result.output, ctx.schema_hash, ctx.store, on_reply=ctx.meter.add
    )
    if output_hash is not None:
        span.event("extract", {"method": "llm"})
        if ctx.meter.usage and ctx.meter.usage.calls > calls:  # the extract's tokens count too
            result = result._replace(detail=_with_cost(ctx, result.detail))
        return output_hash, result
    raw = " ".join(result.output[:500].split())
    what = (
        f"agent output does not satisfy the role schema ({'; '.join(problems)})"
        if problems
        else "agent output does not contain valid YAML frontmatter matching the role schema"
    )
    raise UwfError(
        f"{what}, and no extract model is configured (set models.extract or defaultModel in "
        f"config.yaml). Raw output (first 500 chars): {raw}"
    )


def _suspend_if_asked(answer: str, key: str) -> None:
    """``Deferred`` when the answer's frontmatter says ``<key>: $SUSPEND`` (any role may): the
    agent exits 75 with ``$SUSPEND: <reason>`` and the thread waits (docs/format.md,
    "Suspending and resuming")."""
    from uwf.agent_kit import fastpath
    from uwf.util.errors import Deferred

    reason = fastpath.suspension(answer, key)
    if reason is not None:
        raise Deferred(f"$SUSPEND: {reason}")


def cost_fields(ctx: AgentContext, *, duration: bool = True) -> dict[str, Any]:
    """The cost fields of this step's detail as of now (docs/format.md, "Cost"): its duration
    (unless ``duration`` is False: ``uwf-mock`` stays reproducible), the tokens of the model
    calls ``ctx.meter`` saw, and the chain's total."""
    from uwf.model import cost

    ms = ctx.meter.elapsed_ms() if duration else None
    return cost.fields(ctx.store, ctx.head_node, ms, ctx.meter.usage)


def _with_cost(ctx: AgentContext, detail: str) -> str:
    """The detail again with up-to-date cost fields, when it records cost at all."""
    node = ctx.store.get(detail)
    payload = node.payload if node is not None else None
    if node is None or not isinstance(payload, dict) or "total" not in payload:
        return detail
    schema = ctx.store.get(node.type)
    found = schema.payload if schema is not None else None
    declared = found.get("properties") or {} if isinstance(found, dict) else {}
    fresh = cost_fields(ctx, duration="durationMs" in payload)
    fresh = {key: value for key, value in fresh.items() if key in declared}
    return str(ctx.store.put(node.type, {**payload, **fresh}))


def _with_artifacts(ctx: AgentContext, detail: str) -> str:
    """The detail, listing the files the agent left in ``$UWF_ARTIFACTS_DIR`` (stored now)."""
    given = ctx.artifacts_dir  # in uwf's process: the step's, not uwf's environment's
    directory = str(given) if given is not None else ""
    if not directory:
        return detail
    if not os.path.islink(directory):  # a link in its place is refused by store_dir
        try:
            with os.scandir(directory) as entries:
                if next(entries, None) is None:  # left empty, as most steps leave it
                    return detail
        except OSError:  # gone
            return detail
    from pathlib import Path

    from uwf.config.config import load_config
    from uwf.model import artifacts

    limit = load_config(ctx.root).artifact_max_bytes
    found, skipped = artifacts.store_dir(ctx.store, Path(directory), limit)
    for warning in skipped:
        ctx.stderr.write(f"warning: {warning}\n")
    return artifacts.attach(ctx.store, detail, found) if found else detail


def _with_previous_attempts(ctx: AgentContext, detail: str) -> str:
    """The detail, keeping the failed attempts this step came after (docs/format.md,
    "Previous attempts"), when there were some."""
    if ctx.previous_attempts is None:
        return detail
    from uwf.model import attempts

    return str(attempts.attach(ctx.store, detail, ctx.previous_attempts))


def _step_node(agent: Agent, ctx: AgentContext, span: otel.Span) -> str:
    """Run the agent, extract its output and write the StepNode; its hash."""
    from uwf.protocol import schemas

    first = agent.run(ctx)
    output_hash, last = _extract(agent, ctx, first, span)
    step: dict[str, Any] = {
        "start": ctx.start.hash,
        "prev": ctx.prev,
        "role": ctx.role,
        "output": output_hash,
        # unlike v0.5.0 (first run only): corrections stay visible
        "detail": _with_previous_attempts(ctx, _with_artifacts(ctx, last.detail)),
        "agent": agent.label,
        "edgePrompt": ctx.edge_prompt,
        "depth": ctx.depth + 1,
    }
    h = schemas.ensure(ctx.store)
    if ctx.children is not None:  # the join of a fan-out (docs/format.md, "Fan-out and join")
        step["children"] = list(ctx.children)
        if ctx.compact is not None:
            step["compact"] = ctx.compact
        return str(ctx.store.put(h.step_join, step))
    if ctx.compact is not None:  # only then the extended type (docs/format.md, "Compaction")
        step["compact"] = ctx.compact
        return str(ctx.store.put(h.step_compact, step))
    return str(ctx.store.put(h.step, step))


def execute(
    agent: Agent, target: Target, backend: Backend | None = None, call: AgentCall | None = None
) -> str:
    """Run the whole agent flow and return the new StepNode's hash (on ``backend``, else the
    one of the environment). With tracing on it is one span, a child of the step's
    (``TRACEPARENT``, or the step's own span in uwf's process), with an event per correction
    and extract.

    ``call``: the agent runs in uwf's process (``agent_kit.inprocess``; docs/api.md, "Python
    agents"): the call's backend, children and artifacts directory are used, and the
    live-turns file and previous attempts its environment names; nothing of the process is
    changed (no ``.env`` applied to ``os.environ``: the call's environment has it; no secrets
    registered: uwf's process did)."""
    from uwf.backend import open_for_agent
    from uwf.config import secrets
    from uwf.config.envfile import apply_dotenv

    thread, role, edge_prompt = target
    attributes = {"uwf.thread": thread, "uwf.role": role, "uwf.agent": agent.label}
    with otel.span("uwf.agent", attributes) as span:
        try:
            from uwf.agent_kit import live

            # before anything runs a command: none inherits the live-turns file
            with live.installed(call.env if call is not None else None):
                if call is not None:
                    backend = call.backend
                else:
                    backend = backend if backend is not None else open_for_agent()
                    secrets.install(backend.root)
                    apply_dotenv(backend.root)
                ctx = build_context(backend, thread, role, edge_prompt, call)
                h = _step_node(agent, ctx, span)
                ctx.flush()  # the step's nodes, durable together before their hash is printed
        except UwfError as exc:
            llm = sys.modules.get("uwf.adapters.llm")  # imported only by agents that call models
            if llm is not None and isinstance(exc, llm.RateLimited) and backend is not None:
                from uwf.agent_kit.backoff import back_off

                back_off(backend, exc)  # pause its provider fleet-wide; the step still fails
            span.set("uwf.exit_code", exc.exit_code)
            span.fail(exc.message)
            raise
        span.set("uwf.step", h)
        return h


def main(agent: Agent, target: Target | None = None) -> None:
    """Run ``agent`` on ``target``: print the StepNode hash, or one error line and exit 1.

    Without ``target``, the console-script entry of an agent with no options of its own
    (docs/agents.md, "A Python agent on the agent kit"): its command line is the kit's, read
    without argparse when it is uwf's plain ``<thread-id> <role>`` (``target.plain``)."""
    from uwf.util.signals import interrupt_on_signals

    if target is None:
        try:
            target = plain(sys.argv[1:])
        except UwfError as exc:
            sys.exit(report(exc))
    if target is None:
        from uwf.agent_kit import args

        prog = os.path.basename(sys.argv[0]) or agent.label
        cli(args.parser(prog, f"{agent.label}: a uwf agent on the agent kit."), lambda _: agent)
        return

    try:
        with interrupt_on_signals():
            h = execute(agent, target)
    except (UwfError, Interrupted) as exc:
        sys.exit(report(exc))
    except Exception as exc:
        if os.environ.get("UWF_DEBUG") == "1":
            raise
        sys.stderr.write(f"error: {printable(internal_error(exc))}\n")
        sys.exit(INTERNAL_EXIT)
    sys.stdout.write(h + "\n")
    sys.stdout.flush()
    # As in uwf's own main: freezing what is alive spares the full garbage collection at exit
    # (~5 ms of every step's agent; docs/performance.md, "Start-up"). Every file is closed and
    # fsynced and stdout flushed by now.
    gc.freeze()


def cli(
    parser: args.Parser,
    make: Callable[[argparse.Namespace], Agent],
    argv: Sequence[str] | None = None,
) -> None:
    """Console-script entry of an agent: parse ``argv`` with ``parser`` (the kit's arguments
    and the agent's options; a usage error exits 2), make the agent from the options with
    ``make`` (which may raise a UsageError too: ``args.fail``), and run it."""
    try:
        options, target = parser.parse(sys.argv[1:] if argv is None else argv)
        agent = make(options)
    except UwfError as exc:
        sys.exit(report(exc))
    main(agent, target)
