"""uwf's agent in the benchmark: ``uwf-mock`` answering from ``workload.py`` instead of a file.

    <uwf venv>/bin/python benchmarks/mock_agent.py <thread-id> <role>

The same agent as ``uwf-mock`` (``uwf.agents.mock``) on the agent kit, with the same detail
(``MockDetail``: the scenario, the role's visit number, the chain's cost total and the
turn), but its answer for step ``n`` of a thread is ``workload.answer(task, role, n)``: a
different, realistic answer at every step, the same one the peers' nodes produce for that
step. (A scenario file holding an answer for every visit of a 10,000-step thread would be
15 MB, over the 1 MiB uwf-mock reads.) ``uwf_bench.ChainBuilder`` writes long threads node
for node as this agent does; ``tests/test_benchmarks.py`` checks it against real steps.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import workload

from uwf.agent_kit import runner
from uwf.agents import mock

if TYPE_CHECKING:  # the agent's own process imports neither (docs/performance.md)
    from uwf.agent_kit.context import AgentContext
    from uwf.model.agentcall import AgentCall

LABEL = mock.LABEL  # the StepNode says uwf-mock: the same agent, with generated answers
SCENARIO = f"workload.py, seed {workload.SEED}"  # what the detail's "scenario" records


def detail_payload(visit: int, total: dict[str, Any], turns: list[str]) -> dict[str, Any]:
    """The MockDetail payload of a step (shared with ``uwf_bench.ChainBuilder``)."""
    return {"scenario": SCENARIO, "visit": visit, **total, "turns": turns}


class WorkloadAgent(mock.MockAgent):
    """``uwf-mock`` whose entry for a step is ``workload.answer`` for it."""

    def __init__(self) -> None:
        super().__init__(name=SCENARIO)

    def pick(self, ctx: AgentContext) -> tuple[str, int, Any]:
        visit = mock.role_visit(ctx, self.label)
        return ctx.role, visit, workload.answer(ctx.task, ctx.role, ctx.depth + 1)


def inprocess(call: AgentCall) -> str:
    """The same agent in uwf's process (``uwf_warm.py``): a Python agent."""
    from uwf.agent_kit.inprocess import run

    return run(AGENT, call)


AGENT = WorkloadAgent()

# ``inprocess`` named as ``--agent`` or config.yaml's ``python:`` take it, the benchmarks'
# directory on the step's PYTHONPATH (``importable``; docs/api.md, "Python agents").
REFERENCE = "python:mock_agent:inprocess"


def importable(env: dict[str, str]) -> dict[str, str]:
    """``env`` with this directory first on PYTHONPATH, so that a ``uwf`` process started with
    it can import this module (``REFERENCE``)."""
    here = os.path.dirname(os.path.realpath(__file__))
    return env | {"PYTHONPATH": os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)}


if __name__ == "__main__":
    runner.main(AGENT)
