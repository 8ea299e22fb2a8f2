"""Python agents for the API (docs/api.md, "Python agents"): ``agent`` makes a function that
returns the step's output an agent that runs in uwf's process, on the agent kit."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast, overload

from uwf.agent_kit import runner
from uwf.agent_kit.context import AgentContext
from uwf.agent_kit.inprocess import Answer, FunctionAgent, run
from uwf.model.agentcall import AgentCall, PythonAgent

__all__ = ["AgentCall", "AgentContext", "FunctionAgent", "PythonAgent", "agent", "kit_agent"]

Function = Callable[[AgentContext], Answer]


@overload
def agent(function: Function, /) -> FunctionAgent: ...


@overload
def agent(*, label: str | None = None) -> Callable[[Function], FunctionAgent]: ...


def agent(
    function: Function | None = None, /, *, label: str | None = None
) -> FunctionAgent | Callable[[Function], FunctionAgent]:
    """``@uwf.agent`` (or ``@uwf.agent(label="reviewer-bot")``): the function becomes a
    Python agent. It is called with the step's ``AgentContext`` (``ctx.role``, ``ctx.task``,
    ``ctx.edge_prompt``, ``ctx.history``, ``ctx.should_stop()``…) and returns the step's
    output (a mapping, checked against the role's schema) or its answer (text with YAML
    frontmatter). ``label`` is what the StepNode's ``agent`` field says (default: the
    function's name)."""
    if function is None:
        return lambda f: FunctionAgent(f, label)
    return FunctionAgent(function, label)


def kit_agent(agent: runner.Agent | Callable[[], runner.Agent]) -> PythonAgent:
    """An agent written on the agent kit (docs/agents.md, "A Python agent on the agent kit":
    ``label``, ``run(ctx)``, ``resume``) as a Python agent: ``agent`` itself, or, given a
    factory (a class, a function), a new agent for each step (an agent that keeps a step's
    session in its attributes). The kit's whole flow runs in this process."""
    if not isinstance(agent, type) and callable(getattr(agent, "run", None)):
        one = cast(runner.Agent, agent)
        make: Callable[[], runner.Agent] = lambda: one  # noqa: E731
    else:
        make = cast(Callable[[], runner.Agent], agent)

    def python_agent(call: AgentCall, /) -> str:
        return run(make(), call)

    return python_agent
