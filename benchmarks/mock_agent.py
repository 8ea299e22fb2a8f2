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

from typing import Any

import workload

from uwf.agent_kit import runner
from uwf.agent_kit.context import AgentContext
from uwf.agents import mock

LABEL = mock.LABEL  # the StepNode says uwf-mock: the same agent, with generated answers
SCENARIO = f"workload.py, seed {workload.SEED}"  # what the detail's "scenario" records


def detail_payload(visit: int, total: dict[str, Any], turns: list[str]) -> dict[str, Any]:
    """The MockDetail payload of a step (shared with ``uwf_bench.ChainBuilder``)."""
    return {"scenario": SCENARIO, "visit": visit, **total, "turns": turns}


class WorkloadAgent:
    label = LABEL

    def run(self, ctx: AgentContext) -> runner.RunResult:
        output = workload.answer(ctx.task, ctx.role, ctx.depth + 1)
        visit = mock._visit(ctx)
        turns = runner.store_turns(ctx, [{"role": "assistant", "content": output}])
        total = runner.cost_fields(ctx, duration=False)
        detail_type = ctx.store.put_schema(mock.DETAIL)
        return runner.RunResult(
            output, ctx.store.put(detail_type, detail_payload(visit, total, turns))
        )

    def resume(self, ctx: AgentContext, session: str | None, message: str) -> None:
        return None


if __name__ == "__main__":
    runner.main(WorkloadAgent())
