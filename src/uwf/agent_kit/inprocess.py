"""Agents on the kit run in uwf's own process (docs/api.md, "Python agents").

The engine calls a Python agent with an ``AgentCall`` (``model.agentcall``) and takes the
StepNode hash it returns. ``run`` drives any agent of the kit (``runner.Agent``: ``uwf-mock``,
``uwf-builtin``, your own) through the kit's whole flow — context, extract, artifacts, the
StepNode write — from such a call, as ``runner.main`` does from a command line: the same
nodes, the same detail. ``FunctionAgent`` is the short way: a function that returns the
step's output (a mapping the role's schema checks) or its answer (text with YAML
frontmatter, extracted as any agent's), made an agent by ``uwf.agent`` (``uwf.api``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from uwf.agent_kit import runner
from uwf.agent_kit.context import AgentContext
from uwf.agent_kit.target import Target
from uwf.model.agentcall import AgentCall
from uwf.model.cost import COST_FIELDS
from uwf.util.errors import Deferred, InvalidInput, UwfError

__all__ = ["DETAIL", "FunctionAgent", "named", "put_output", "run"]

#: The detail of a function agent's step: the function, its answer as one turn, its cost.
DETAIL = runner.detail_schema("FunctionDetail", {"function": {"type": "string"}}, COST_FIELDS)


def run(agent: runner.Agent, call: AgentCall) -> str:
    """Run ``agent`` on the kit for ``call``; the hash of the StepNode it wrote."""
    return runner.execute(agent, Target(call.thread, call.role, call.prompt), call=call)


#: What a function agent returns: the output itself, or an answer to extract it from.
Answer = Mapping[str, Any] | str


class FunctionAgent:
    """A function ``(ctx: AgentContext) -> output mapping | answer text`` as an agent of the
    kit (``run``/``resume``) and as a Python agent (called with an ``AgentCall``).

    A mapping is the step's output: checked against the role's schema (a refusal fails the
    step, naming each problem), stored, and recorded as the step's one turn (its JSON). A
    string is an answer: its frontmatter is the output, as for any agent. Either way a
    routing field of ``$SUSPEND`` suspends the step (the thread waits). The detail is a
    ``FunctionDetail``: the function's name, the turn, the step's duration and the chain's
    cost."""

    def __init__(self, function: Callable[[AgentContext], Answer], label: str | None = None):
        import functools

        self.function = function
        functools.update_wrapper(self, function)  # its name, module and doc: the agent's
        module, qualified, name = named(function)
        self.reference = f"{module}:{qualified}"  # how plans and failure records name it
        self.label: str = label or name

    def __call__(self, call: AgentCall, /) -> str:
        return run(self, call)

    def run(self, ctx: AgentContext) -> runner.RunResult:
        answer = self.function(ctx)
        output_hash = None
        if isinstance(answer, Mapping):
            output_hash, text = put_output(ctx, answer)
        elif isinstance(answer, str):
            text = answer
        else:
            raise UwfError(
                f"agent {self.reference} returned {type(answer).__name__}: a function agent "
                "returns the step's output (a mapping) or its answer (text with YAML frontmatter)"
            )
        turns = runner.store_turns(ctx, [{"role": "assistant", "content": text}])
        detail_type = ctx.store.put_schema(DETAIL)
        payload = {"function": self.reference, "turns": turns, **runner.cost_fields(ctx)}
        detail = ctx.store.put(detail_type, payload)
        return runner.RunResult(text, detail, output_hash=output_hash)

    def resume(self, ctx: AgentContext, session: str | None, message: str) -> None:
        return None  # a function is called once per step: no correction turns


def put_output(ctx: AgentContext, given: Mapping[str, Any]) -> tuple[str, str]:
    """An output given as a mapping, stored under the role's schema: (its hash, its JSON for
    the step's turn). ``$SUSPEND`` in its routing field suspends the step instead (docs/format.md,
    "Suspending and resuming"), as in an answer's frontmatter; the schema's problems, each
    named, when it refuses the output."""
    output = dict(given)
    if output.get(ctx.routing_key) == "$SUSPEND":
        reason = output.get("reason")
        said = reason.strip() if isinstance(reason, str) and reason.strip() else "no reason given"
        raise Deferred(f"$SUSPEND: {said}")
    text = json.dumps(output, ensure_ascii=False, sort_keys=True)
    if ctx.schema is not None:
        from uwf.cas import fastschema

        if fastschema.is_valid(ctx.schema, output, ctx.schema_hash) is not True:
            from uwf.cas.schema import field_problems

            found = field_problems(ctx.schema, output)
            if found:
                raise InvalidInput(
                    f"agent output does not satisfy the role schema ({'; '.join(found)})"
                )
    return str(ctx.store.put(ctx.schema_hash, output)), text


def named(thing: object) -> tuple[str, str, str]:
    """(module, qualified name, name) of a function or class, else of the object's class."""
    import types

    kinds = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)
    found = thing if isinstance(thing, kinds) else type(thing)
    return found.__module__ or "?", found.__qualname__, found.__name__
