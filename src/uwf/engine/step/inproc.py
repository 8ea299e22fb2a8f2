"""Python agents run in uwf's own process (docs/api.md, "Python agents").

An alias with ``python:`` in config.yaml (or ``--agent python:<reference>``, or a callable
given to ``uwf.api``) names a ``PythonAgent``: ``agent(call) -> StepNode hash``
(``model.agentcall``). ``InProcess`` is the step runner that calls it, with the contract of a
process agent — the rest of the step (plan, limits, artifacts directory, commit, failure
record, retry policy) is the same code:

- **No process.** The agent runs on a *lane*: a daemon thread of this process kept between
  steps (no thread is started per step once one exists), while the stepping thread waits for
  it and watches the clock and the stop requests, as it watches an agent process.
- **Timeout, stop, kill.** Python cannot kill a thread, so stopping is cooperative: at the
  timeout, or when ``thread kill`` ended the thread or a stop was asked for, the step stops
  waiting at once and ``call.should_stop()`` turns True. The step then fails exactly as with
  a process (timed out: exit 5 and a failure record; stopped or killed: as ``thread stop`` /
  ``thread kill``) and whatever the agent answers later is ignored: the head never moves for
  it. A callable that ignores ``should_stop`` runs on in its lane until it returns — nodes it
  writes are garbage for ``cas gc`` — and that lane is never used again.
- **Outcomes as exit codes.** The hash it returns is its stdout; ``Deferred`` is exit 75 (the
  thread waits), a ``UwfError`` its exit code, ``SystemExit(n)`` exit ``n``, any other
  exception exit 70 (an internal error of the agent); each with its ``error:`` line written
  to the agent's stderr, which is shown live with the agent's name before each line and
  whose tail the step's error quotes.
"""

from __future__ import annotations

import contextvars
import importlib
import threading
import time
from collections.abc import Callable
from typing import Any

from uwf.adapters.pipes import LiveLines, Tail
from uwf.adapters.process import STDERR_TAIL, Finished
from uwf.backend.base import Backend
from uwf.config.config import PYTHON_PREFIX
from uwf.engine.step.plan import StepPlan
from uwf.model.agentcall import AgentCall, PythonAgent
from uwf.model.artifacts import ENV as ARTIFACTS_ENV
from uwf.util import clock
from uwf.util.errors import DEFER_EXIT, Deferred, InvalidInput, UwfError, oneline

__all__ = ["ENTRY_POINTS", "OWN", "InProcess", "reference", "resolve", "run"]

ENTRY_POINTS = "uwf.agents"  # the entry-point group naming Python agents
# uwf's own entry points of that group (pyproject.toml; a test checks they agree): found
# without reading every installed distribution's metadata, which costs a cold step more than
# loading the agent (~70 M instructions: docs/performance.md, "Processes and start-up")
OWN = {
    "uwf-mock": "uwf.agents.mock:inprocess",
    "uwf-builtin": "uwf.agents.builtin.cli:inprocess",
    "uwf-cmd": "uwf.agents.cmd:inprocess",
}
POLL = 0.5  # seconds between two looks at the stop requests while an agent runs
INTERNAL = 70  # an exception that is not a UwfError: a bug of the agent (as in the kit's main)


class InProcess:
    """A step runner (``engine.step.Runner``) that runs a Python agent on ``backend``:
    ``agent``, else the one the plan's agent command names (``python:<reference>``)."""

    def __init__(self, backend: Backend, agent: PythonAgent | None = None) -> None:
        self.backend = backend
        self.agent = agent

    def __call__(
        self, plan: StepPlan, env: dict[str, str], should_stop: Callable[[], bool]
    ) -> Finished:
        assert plan.role is not None
        agent = self.agent
        if agent is None:
            if plan.python is None:
                raise InvalidInput(f"not a Python agent: {oneline(plan.argv[0])}")
            agent = resolve(plan.python)
        call = AgentCall(
            backend=self.backend,
            thread=plan.thread,
            role=plan.role,
            prompt=plan.prompt,
            head=plan.head,
            args=tuple(plan.argv[1:-2]),
            env=env,
            cwd=plan.cwd,
            children=plan.children,
            artifacts=env.get(ARTIFACTS_ENV),
            deadline=None if plan.timeout is None else clock.monotonic() + plan.timeout,
            stderr=Stderr(f"{plan.argv[0]}: "),
        )
        return run(agent, call, should_stop)


# -- resolving a reference -------------------------------------------------------------------

_resolved: dict[str, PythonAgent] = {}


def resolve(ref: str) -> PythonAgent:
    """The agent ``ref`` names: ``package.module:attribute`` (dots after the colon walk
    attributes), or the name of an entry point of the ``uwf.agents`` group. Loaded once per
    process; InvalidInput (exit 1, a configuration error, as a missing agent command) when it
    cannot be loaded or is not callable."""
    found = _resolved.get(ref)
    if found is None:
        found = _load(OWN.get(ref, ref))
        _resolved[ref] = found
    return found


def _load(ref: str) -> PythonAgent:
    shown = oneline(ref)
    try:
        if ":" in ref:
            module, _, attribute = ref.partition(":")
            found: Any = importlib.import_module(module)
            for part in attribute.split("."):
                found = getattr(found, part)
        else:
            found = _entry_point(ref)
    except UwfError:
        raise
    except Exception as exc:
        raise InvalidInput(
            f"cannot load the Python agent {shown}: {type(exc).__name__}: {exc}"
        ) from None
    if not callable(found):
        raise InvalidInput(f"the Python agent {shown} is not callable")
    agent: PythonAgent = found
    return agent


def _entry_point(name: str) -> Any:
    from importlib.metadata import entry_points

    found = entry_points(group=ENTRY_POINTS, name=name)
    if not found:
        raise InvalidInput(
            f"no Python agent named {oneline(name)}: expected package.module:function, or the "
            f"name of an entry point of the {ENTRY_POINTS} group"
        )
    return next(iter(found)).load()


def reference(agent: object) -> str:
    """How a callable given directly is named in the plan, logs and failure records:
    ``python:<module>:<qualified name>`` (its class's, for an object that is neither a
    function nor a class), or the ``reference`` it gives (an agent made by ``uwf.agent``)."""
    own = getattr(agent, "reference", None)
    if isinstance(own, str) and own:
        return PYTHON_PREFIX + own
    import types

    kinds = (types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)
    found: Any = agent if isinstance(agent, kinds) else type(agent)
    return f"{PYTHON_PREFIX}{found.__module__}:{found.__qualname__}"


# -- running one call ------------------------------------------------------------------------


class Stderr:
    """A Python agent's stderr: each line shown live on ours after ``prefix`` (masked and
    escaped as a process agent's are) and its tail kept for the step's error."""

    def __init__(self, prefix: str) -> None:
        self.tail = Tail(STDERR_TAIL)
        self.live = LiveLines(prefix)
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        data = text.encode("utf-8", "replace")
        with self._lock:
            self.tail.add(data)
            if self.live.alive:
                self.live.feed(data)
        return len(text)

    def flush(self) -> None:
        return None

    def close(self) -> str:
        """End the last line shown; the tail kept."""
        with self._lock:
            if self.live.alive and (self.live.line or self.live.cut):
                self.live.end()
            return self.tail.text()


class _Job:
    """One call on a lane, and how it ended."""

    def __init__(self, agent: PythonAgent, call: AgentCall) -> None:
        self.agent = agent
        self.call = call
        self.context = contextvars.copy_context()  # the step's span is the agent's parent
        self.done = threading.Event()
        self.lock = threading.Lock()
        self.ended = False
        self.abandoned = False
        self.code = 0
        self.stdout = ""

    def execute(self) -> None:
        code, stdout, error = 0, "", None
        try:
            answer = self.context.run(self.agent, self.call)
            if isinstance(answer, str):
                stdout = answer + "\n"
            else:
                code, error = 1, _not_a_hash(answer)
        except Deferred as exc:
            code, error = DEFER_EXIT, exc.message
        except UwfError as exc:
            code, error = exc.exit_code, exc.message
        except SystemExit as exc:
            code, error = _exit_code(exc.code)
        except Exception as exc:
            code, error = INTERNAL, f"internal error: {type(exc).__name__}: {exc}"
        if error is not None and self.call.stderr is not None:
            self.call.stderr.write(f"error: {error}\n")
        with self.lock:
            self.ended = True
            self.code, self.stdout = code, stdout
        self.done.set()

    def give_up(self) -> bool:
        """Stop waiting for the call (it is told to stop); False when it ended just now."""
        with self.lock:
            if self.ended:
                return False
            self.abandoned = True
        self.call.stop()
        return True


def _not_a_hash(answer: object) -> str:
    return (
        f"a Python agent returns the hash of the StepNode it wrote, got {type(answer).__name__}"
        "; a function that returns its output is an agent with @uwf.agent (docs/api.md)"
    )


def _exit_code(code: object) -> tuple[int, str | None]:
    """``sys.exit(code)`` as a process would end: None is 0, an int itself, else 1 with the
    value as its message."""
    if code is None:
        return 0, None
    if isinstance(code, int):
        return code, None
    return 1, str(code)


class _Lane:
    """A daemon thread that runs calls one at a time, kept for the next step."""

    def __init__(self) -> None:
        self._jobs: list[_Job] = []
        self._ready = threading.Condition()
        threading.Thread(target=self._loop, name="uwf-agent", daemon=True).start()

    def submit(self, job: _Job) -> None:
        with self._ready:
            self._jobs.append(job)
            self._ready.notify()

    def _loop(self) -> None:
        while True:
            with self._ready:
                while not self._jobs:
                    self._ready.wait()
                job = self._jobs.pop()
            job.execute()
            if job.abandoned:  # its step went on without it: this lane is not reused
                return


_idle: list[_Lane] = []
_idle_lock = threading.Lock()


def _take_lane() -> _Lane:
    with _idle_lock:
        if _idle:
            return _idle.pop()
    return _Lane()


def _give_back(lane: _Lane) -> None:
    with _idle_lock:
        _idle.append(lane)


def run(agent: PythonAgent, call: AgentCall, should_stop: Callable[[], bool]) -> Finished:
    """Run ``agent`` on ``call`` on a lane and wait for it as for an agent process: until it
    returns, its deadline passes (``timed_out``) or ``should_stop`` answers True
    (``stopped``), polled every ``POLL`` seconds."""
    began = time.monotonic()
    job = _Job(agent, call)
    lane = _take_lane()
    lane.submit(job)
    timed_out = stopped = False
    try:
        while True:
            step = POLL
            left = call.remaining()
            if left is not None:
                step = min(step, left)
            if clock.wait(job.done, step):
                break
            if call.remaining() == 0:
                timed_out = job.give_up()
            elif should_stop():
                stopped = job.give_up()
            if timed_out or stopped:
                break
    except BaseException:  # a signal (Interrupted): the step ends, the agent is told to stop
        job.give_up()
        raise
    if job.ended and not job.abandoned:
        _give_back(lane)
    tail = call.stderr.close() if isinstance(call.stderr, Stderr) else ""
    if timed_out or stopped:
        return Finished(-1, "", tail, timed_out, stopped, int((time.monotonic() - began) * 1000))
    return Finished(job.code, job.stdout, tail, duration_ms=int((time.monotonic() - began) * 1000))
