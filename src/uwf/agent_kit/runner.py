"""The agent flow every ``uwf-*`` agent shares (docs/agents.md, "A Python agent on the agent kit").

An agent supplies ``run`` (and optionally ``resume`` for correction prompts); the kit does
the rest: arguments, context from the chain, the format instruction, the two-layer extract
(frontmatter fast path, up to two corrections, then the LLM fallback), the StepNode write,
and printing its hash. Every failure is one ``error: …`` line on stderr and exit 1.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from uwf.agent_kit.context import AgentContext, build_context
from uwf.model import turns as model_turns
from uwf.model.turns import TURN_SCHEMA, detail_schema
from uwf.util.errors import Interrupted, UwfError, report

__all__ = ["TURN_SCHEMA", "Agent", "RunResult", "cli", "detail_schema", "execute", "main"]

MAX_CORRECTIONS = 2


@dataclass
class RunResult:
    """What one run (or resume) of an agent produced."""

    output: str
    detail: str  # hash of the detail node; after corrections it should cover every run
    session: str | None = None


class Agent(Protocol):
    label: str  # what the StepNode's ``agent`` field says, e.g. "uwf-mock"

    def run(self, ctx: AgentContext) -> RunResult: ...

    def resume(self, ctx: AgentContext, session: str | None, message: str) -> RunResult | None:
        """Send a correction prompt; None when the agent cannot continue a session."""
        ...


def parse_args(argv: Sequence[str]) -> tuple[str, str, str]:
    """``<thread-id> <role>`` (edge prompt in UWF_EDGE_PROMPT) or the v0.5.0 named form."""
    args = list(argv)
    if "--thread" in args or "--role" in args:
        named: dict[str, str] = {}
        for flag in ("--thread", "--role", "--prompt"):
            if flag in args:
                i = args.index(flag)
                if i + 1 < len(args):
                    named[flag] = args[i + 1]
        if not named.get("--thread") or not named.get("--role"):
            raise UwfError(
                "usage: <agent> <thread-id> <role>  |  "
                "<agent> --thread <id> --role <role> --prompt <text>"
            )
        return named["--thread"], named["--role"], named.get("--prompt", "")
    if len(args) != 2:
        raise UwfError("usage: <agent> <thread-id> <role>  (edge prompt in $UWF_EDGE_PROMPT)")
    return args[0], args[1], os.environ.get("UWF_EDGE_PROMPT", "")


def store_turns(ctx: AgentContext, turns: list[dict[str, Any]]) -> list[str]:
    """Store each turn as an AgentTurn node; return their hashes in order."""
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
) -> str:
    """Store the turns, then a ``SESSION_FIELDS`` detail under ``schema``; its hash."""
    refs = store_turns(ctx, turns)
    return ctx.store.put(
        ctx.store.put_schema(schema),
        {
            "sessionId": session_id,
            "model": model,
            "duration": max(0, duration_ms),
            "turnCount": len(refs),
            "turns": refs,
        },
    )


def _extract(agent: Agent, ctx: AgentContext, first: RunResult) -> tuple[str, RunResult]:
    """The output hash, and the last run (whose detail covers the corrections too).

    Each correction prompt names what the role schema rejected (``notes: False is not of
    type 'string'``), and so does the error when nothing could be extracted.
    """
    from uwf.agent_kit import extract, frontmatter, prompts

    result = first
    for attempt in range(MAX_CORRECTIONS + 1):
        found = frontmatter.offer(result.output, ctx.schema_hash, ctx.store)
        if found.hash is not None:
            return found.hash, result
        problems = found.problems
        if attempt == MAX_CORRECTIONS:
            break
        again = agent.resume(ctx, result.session, prompts.correction_message(problems))
        if again is None:
            break
        result = again
    output_hash = extract.extract(ctx.root, result.output, ctx.schema_hash, ctx.store)
    if output_hash is not None:
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


def execute(agent: Agent, argv: Sequence[str]) -> str:
    """Run the whole agent flow and return the new StepNode's hash."""
    from uwf.agent_kit import prompts
    from uwf.backend import open_backend
    from uwf.config.config import apply_dotenv
    from uwf.protocol import schemas

    thread, role, edge_prompt = parse_args(argv)
    backend = open_backend()
    apply_dotenv(backend.root)
    ctx = build_context(backend, thread, role, edge_prompt)
    if ctx.schema is not None:
        ctx.format_instruction = prompts.build_output_format_instruction(ctx.schema)
    first = agent.run(ctx)
    output_hash, last = _extract(agent, ctx, first)
    step: dict[str, Any] = {
        "start": ctx.start.hash,
        "prev": ctx.prev,
        "role": role,
        "output": output_hash,
        "detail": last.detail,  # unlike v0.5.0 (first run only): corrections stay visible
        "agent": agent.label,
        "edgePrompt": edge_prompt,
        "depth": ctx.depth + 1,
    }
    h = schemas.ensure(ctx.store)
    return str(ctx.store.put(h.step, step))


def main(agent: Agent, argv: Sequence[str] | None = None) -> None:
    """Console-script entry: print the StepNode hash, or one error line and exit 1."""
    from uwf.util.signals import interrupt_on_signals

    try:
        with interrupt_on_signals():
            h = execute(agent, sys.argv[1:] if argv is None else argv)
    except (UwfError, Interrupted) as exc:
        sys.exit(report(exc))
    except Exception as exc:
        if os.environ.get("UWF_DEBUG") == "1":
            raise
        sys.stderr.write(f"error: internal error: {type(exc).__name__}: {exc}\n")
        sys.exit(70)
    sys.stdout.write(h + "\n")
    sys.stdout.flush()


def cli(
    make: Callable[[list[str]], tuple[Agent, list[str]]],
    argv: Sequence[str] | None = None,
    help_text: str | None = None,
) -> None:
    """Console-script entry for an agent with options of its own: ``make`` parses them
    (raising UwfError, e.g. UsageError for exit 2) and returns the agent and the arguments
    left for the kit (``<thread-id> <role>``)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if help_text is not None and args[:1] in (["-h"], ["--help"]):
        sys.stdout.write(help_text)
        return
    try:
        agent, rest = make(args)
    except UwfError as exc:
        sys.exit(report(exc))
    main(agent, rest)
