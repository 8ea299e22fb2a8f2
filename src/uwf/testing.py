"""A test kit for workflows, and for uwf itself (docs/api.md, "Testing").

- ``ScriptedAgent``: a Python agent that answers each role with the next entry of a script —
  ``uwf-mock``'s scenario, in memory: an answer (text with YAML frontmatter), or
  ``{output, exit, stderr, sleep}`` where ``output`` may be the output itself (a mapping), or
  ``{attempts: [...]}`` for the runs of one visit; or, by ``steps``, uwf 0.8's form. It runs
  in the test's process, on the agent kit, and keeps every call it was given (``calls``).
- ``InProcessRunner``: the engine's step runner for a Python agent in this process
  (``uwf.engine.step.inproc.InProcess``), keeping every plan and environment it was given:
  for tests that drive ``uwf.engine`` directly (a memory backend, say).
- ``Clock``: a clock you move by hand, put in place of uwf's (``uwf.util.clock``) for a
  block: retry back-off, priorities' aging, heartbeats, idle exits and in-process agents'
  timeouts then follow it, and a test skips an hour instead of sleeping through it.
- ``write_step``: a StepNode written for a plan directly, as an agent that is not on the kit
  would write it (``fields`` over it: a StepNode for another step), to test what the engine
  accepts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from uwf.adapters.process import Finished
from uwf.agent_kit.inprocess import run
from uwf.agents.mock import MockAgent
from uwf.backend.base import Backend
from uwf.engine.step.inproc import InProcess
from uwf.engine.step.plan import StepPlan
from uwf.model import chain
from uwf.model.agentcall import AgentCall, PythonAgent
from uwf.protocol import schemas
from uwf.util import clock

__all__ = ["Clock", "InProcessRunner", "ScriptedAgent", "answer", "write_step"]


def answer(body: str = "", **fields: Any) -> str:
    """An answer as an agent writes it: ``fields`` as YAML frontmatter, then ``body``."""
    import yaml

    front = yaml.safe_dump(fields, sort_keys=False, allow_unicode=True) if fields else ""
    return f"---\n{front}---\n{body}"


class ScriptedAgent:
    """A Python agent answering from a script: ``roles`` maps each role to its entries, used
    in visit order (the n-th visit of the role in the thread uses entry n; the last one
    repeats), as ``uwf-mock``'s scenario does (docs/agents.md, "uwf-mock"); or ``steps``, a
    script of uwf 0.8's form played in the thread's order (``(role, entry)`` pairs or
    ``{role, output, …}`` mappings: the thread's n-th step is the n-th, for the role it
    names). A run that suspends counts as a visit, as with ``uwf-mock``. ``label`` is what
    its StepNodes' ``agent`` field says."""

    def __init__(
        self,
        roles: Mapping[str, Sequence[Any] | Any] | None = None,
        *,
        steps: Sequence[Any] | None = None,
        label: str = "scripted",
    ) -> None:
        if (roles is None) == (steps is None):
            raise TypeError("ScriptedAgent takes a script by roles or by steps (one of them)")
        self.agent = MockAgent(roles=roles, steps=steps, name="script", label=label)
        self.calls: list[AgentCall] = []

    @property
    def label(self) -> str:
        return self.agent.label

    def __call__(self, call: AgentCall, /) -> str:
        self.calls.append(call)
        return run(self.agent, call)


class InProcessRunner:
    """The engine's runner (``uwf.engine.step.Runner``) for ``agent`` in this process, on
    ``backend``; ``plans`` and ``envs`` keep what each step gave it."""

    def __init__(self, backend: Backend, agent: PythonAgent) -> None:
        self.inner = InProcess(backend, agent)
        self.plans: list[StepPlan] = []
        self.envs: list[dict[str, str]] = []

    def __call__(
        self, plan: StepPlan, env: dict[str, str], should_stop: Callable[[], bool]
    ) -> Finished:
        self.plans.append(plan)
        self.envs.append(env)
        return self.inner(plan, env, should_stop)


def write_step(backend: Backend, plan: StepPlan, output: Any, **fields: Any) -> str:
    """The StepNode an agent off the kit would write for ``plan``: ``output`` under the role's
    schema, a text detail, then ``fields`` over the StepNode's own (``role="x"``, ``depth=9``:
    a StepNode for another step, which the engine must refuse). Its hash."""
    assert plan.role is not None
    store = backend.nodes
    known = schemas.ensure(store)
    workflow = chain.load_workflow(store, plan.workflow)
    payload = {
        "start": plan.start,
        "prev": None if plan.head == plan.start else plan.head,
        "role": plan.role,
        "output": store.put(workflow.payload["roles"][plan.role]["meta"], output),
        "detail": store.put(known.text, f"detail of {plan.role}"),
        "agent": "write_step",
        "edgePrompt": plan.prompt,
        "depth": plan.depth + 1,
        **fields,
    }
    return str(store.put(known.step, payload))


class Clock:
    """A clock that moves only when told: ``advance(seconds)``, or a ``sleep`` (which
    advances it at once: a loop that sleeps runs without waiting). A ``wait`` for an event
    (a heartbeat's, an in-process agent's end) returns when the event is set or when the
    clock was moved past its timeout. Starts at ``start_ms`` (default: now).

    ``with Clock() as clock:`` puts it in place of uwf's clock for the block (for every
    thread of the process: ``uwf.util.clock.use``)."""

    def __init__(self, start_ms: int | None = None) -> None:
        self._ms = float(time.time_ns() // 1_000_000 if start_ms is None else start_ms)
        self._mono = 0.0
        self._lock = threading.Lock()
        self._use: Any = None

    def now_ms(self) -> int:
        return int(self._ms)

    def monotonic(self) -> float:
        return self._mono

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward (never back)."""
        with self._lock:
            self._ms += max(0.0, seconds) * 1000
            self._mono += max(0.0, seconds)

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def wait(self, event: clock.Waitable, timeout: float | None) -> bool:
        deadline = None if timeout is None else self._mono + timeout
        while not event.wait(0.002):  # the event, or the clock moved on, seen within 2 ms
            if deadline is not None and self._mono >= deadline:
                return event.is_set()
        return True

    def __enter__(self) -> Clock:
        self._use = clock.use(self)
        self._use.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._use.__exit__(*exc)
