"""One step of a thread: lock, plan, run, commit (docs/architecture.md, "Where a step happens").

The package is the step's face; its logic lives in a module per stage: ``drive`` (``step``:
the lock, then plan, run and commit, each failure leaving the head where it was), ``plan``
(deciding the step, before and under the lock), ``execute`` (the agent's run and what its
end means), ``run`` (the runners, the agent's environment, its answer), ``commit`` (the
compare-and-swap and what follows it) and ``autopack`` (the store's packing after a step).
"""

from __future__ import annotations

from uwf.engine.step.autopack import packing_in_a_process
from uwf.engine.step.commit import StepResult
from uwf.engine.step.drive import check_timeout, dry_run, hold, step, step_held, step_many
from uwf.engine.step.plan import StepPlan, preplan
from uwf.engine.step.run import Runner

__all__ = [
    "Runner",
    "StepPlan",
    "StepResult",
    "check_timeout",
    "dry_run",
    "hold",
    "packing_in_a_process",
    "preplan",
    "step",
    "step_held",
    "step_many",
]
