"""``uwf.open_store`` and ``Store``: workflows and threads driven from Python (docs/api.md).

Every method is the engine function the CLI command of the same name calls, with the same
checks, locks and errors (``uwf.api.errors``), returning the records of ``uwf.api.types``
instead of the CLI's JSON. An ``agent`` is what ``--agent`` takes (an alias of config.yaml or
a command line, ``python:<reference>`` included), or a Python agent itself — a callable run in
this process (``uwf.agent``, or ``agent(call) -> StepNode hash``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uwf.api import types
from uwf.api.types import StepResult
from uwf.backend.base import Backend
from uwf.util.errors import Deferred, HeldBack, NothingToStep, UsageError

if TYPE_CHECKING:
    from uwf.engine.step import Runner
    from uwf.model.agentcall import AgentCall

__all__ = ["Agent", "Store", "check_workflow", "open_store"]

#: An agent: an alias or a command line (as ``--agent``), or a Python agent.
Agent = str | Callable[["AgentCall"], str]


def open_store(spec: str | Path | None = None) -> Store:
    """The store ``spec`` names, by the CLI's rules (``--store``): a directory, or a
    ``postgresql://`` URL (``pip install 'uwf[postgres]'``); None: ``$UWF_STORE``, else
    ``store:`` in ``<root>/config.yaml``, else the storage root (``$UNCAGED_WORKFLOW_STORAGE_ROOT``,
    else ``~/.uncaged-workflow``). Close it when done (or use it as a context manager)."""
    from uwf.backend import open_backend
    from uwf.util import secrets

    backend = open_backend(spec)
    store = str(spec) if spec is not None else None
    secrets.register(
        lambda: _secret_values(backend.root, store), stamp=lambda: _secrets_stamp(backend.root)
    )  # read on first redaction
    return Store(backend)


def _secrets_stamp(root: Path) -> object:
    from uwf.config.secrets import stamp

    return stamp(root)


def _secret_values(root: Path, store: str | None) -> list[str]:
    """This machine's secrets and the store URL's password, as the CLI registers them
    (``cli.options.backend``): everything shown, logged or stored is redacted of them."""
    from uwf.config.secrets import secret_values

    return secret_values(root, store)


def check_workflow(path: str | Path) -> types.WorkflowCheck:
    """Every check ``put_workflow`` makes, with nothing written anywhere: the hash it would
    give, or the problems that refuse the file."""
    from uwf.engine.workflows.stored import check_workflow as checked

    found = checked(Path(path))
    return types.WorkflowCheck(
        found.file, found.name, found.hash, tuple(found.problems), tuple(found.warnings)
    )


class Store:
    """An open store: its workflows and threads. ``backend`` is the engine's interface to
    it, for what the API does not cover (not part of the stable API)."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend

    @property
    def root(self) -> Path:
        """This machine's storage root: config.yaml, ``.env``, logs, caches."""
        return self.backend.root

    def close(self) -> None:
        """Close what the store opened (a PostgreSQL store's connections)."""
        self.backend.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- workflows -------------------------------------------------------------------------

    def put_workflow(self, path: str | Path) -> types.WorkflowPut:
        """Check a workflow file (or folder) and store it; its name now runs this version."""
        from uwf.engine.workflows.stored import put_workflow

        put = put_workflow(self.backend, Path(path))
        return types.WorkflowPut(put.name, put.hash, tuple(put.warnings))

    def check_workflow(self, path: str | Path) -> types.WorkflowCheck:
        """``check_workflow``: nothing is written."""
        return check_workflow(path)

    def workflows(self, cwd: str | Path | None = None) -> tuple[types.WorkflowInfo, ...]:
        """The workflows ``start`` can run from ``cwd`` (default: the current directory):
        project files first, then the stored ones they do not shadow."""
        from uwf.engine.workflows.stored import list_workflows

        found = list_workflows(self.backend, Path(cwd) if cwd is not None else Path.cwd())
        return tuple(types.WorkflowInfo(w["name"], w["hash"], w["origin"]) for w in found)

    # -- threads: start, step, steer ---------------------------------------------------------

    def start(
        self,
        workflow: str,
        task: str,
        *,
        max_rounds: int | None = None,
        cwd: str | Path | None = None,
        key: str | None = None,
        priority: int = 0,
    ) -> types.Started:
        """A new thread of ``workflow`` (a name, a file, or a Workflow hash) on ``task``; runs
        nothing. With ``key``, at most one thread per key and workflow name: a start retried
        returns the first (``existing``)."""
        from uwf.engine.threads.lifecycle import start

        got = start(self.backend, workflow, task, max_rounds, cwd, key, priority)
        return types.Started(
            got["thread"], got["workflow"], got.get("key"), got.get("existing", False)
        )

    def step(
        self,
        thread: str,
        *,
        agent: Agent | None = None,
        timeout: float | None = None,
        wait: bool = False,
    ) -> StepResult:
        """Exactly one step of ``thread`` (``thread step``): ``Busy`` when another step holds
        it (unless ``wait``), ``NotActive`` once it ended, ``AgentFailed`` when the agent
        failed, ``Deferred`` when it waits; the head moves only when the step landed."""
        from uwf.engine.step import step

        command, runner = self._agent(agent)
        return step(self.backend, thread, agent=command, timeout=timeout, wait=wait, runner=runner)

    def run(
        self,
        thread: str,
        *,
        agent: Agent | None = None,
        count: int | None = None,
        timeout: float | None = None,
    ) -> types.Run:
        """Steps of ``thread`` until it ends (``outcome`` done), waits (a deferral, a
        suspension, a fan-out's children: ``waiting``) or ``count`` steps ran (``count``).
        Any other failure is raised; the steps before it stay landed."""
        from uwf.engine.step import step

        if count is not None and count < 1:
            raise UsageError(f"count must be a positive integer, got: {count}")
        command, runner = self._agent(agent)
        landed: list[StepResult] = []
        while count is None or len(landed) < count:
            try:
                result = step(self.backend, thread, agent=command, timeout=timeout, runner=runner)
            except Deferred:
                waiting = self.show(thread).waiting
                return types.Run(thread, tuple(landed), "waiting", waiting)
            landed.append(result)
            if result.done:
                return types.Run(thread, tuple(landed), "done")
        return types.Run(thread, tuple(landed), "count")

    def step_next(
        self,
        *,
        agent: Agent | None = None,
        workflow: str | None = None,
        timeout: float | None = None,
    ) -> StepResult | None:
        """One step of the most urgent thread no one steps (``thread step --next``); None
        when there is none (or a fleet limit holds back every candidate)."""
        from uwf.engine.step import fleet

        versions = fleet.workflow_versions(self.backend, workflow) if workflow else None
        command, runner = self._agent(agent)
        try:
            return fleet.step_next(
                self.backend, versions=versions, agent=command, timeout=timeout, runner=runner
            )
        except (NothingToStep, HeldBack):
            return None

    def drain(
        self,
        *,
        agent: Agent | None = None,
        workflow: str | None = None,
        count: int | None = None,
        timeout: float | None = None,
    ) -> tuple[StepResult, ...]:
        """``step_next`` until nothing is left to step (or ``count`` steps): what a
        ``uwf worker`` does, in this process, without waiting for more. A step that fails
        is raised, as by ``step``; one that defers leaves its thread waiting and goes on."""
        landed: list[StepResult] = []
        while count is None or len(landed) < count:
            try:
                result = self.step_next(agent=agent, workflow=workflow, timeout=timeout)
            except Deferred:
                continue  # that thread waits now: --next passes it over
            if result is None:
                break
            landed.append(result)
        return tuple(landed)

    def fork(
        self, node: str, *, at: int | None = None, cwd: str | Path | None = None
    ) -> types.Forked:
        """A new thread whose head is ``node`` (a StepNode or StartNode hash), or, with
        ``at``, step ``at`` of the thread ``node`` (0: its start; its working directory is
        kept unless ``cwd`` is given). Copies nothing."""
        from uwf.engine.threads import lifecycle, steplist

        if at is not None:
            node, workdir = steplist.step_hash_at(self.backend, node, at)
            cwd = cwd if cwd is not None else workdir
        forked = lifecycle.fork(self.backend, node, cwd)
        return types.Forked(forked["thread"], forked["forkedFrom"]["step"])

    def kill(self, thread: str) -> None:
        """End an active thread (status ``killed``); a step running on it stops its agent."""
        from uwf.engine.threads.lifecycle import kill

        kill(self.backend, thread)

    def answer(
        self,
        thread: str,
        output: Mapping[str, Any] | None = None,
        *,
        text: str | None = None,
        status: str | None = None,
        message: str | None = None,
        wait: bool = False,
    ) -> StepResult:
        """Write the step of the role ``thread`` waits for (or runs next) as a person would
        (``thread answer``): ``text`` (an answer with YAML frontmatter), then the fields of
        ``output`` over it, then ``status`` as its routing field; ``message`` its content."""
        from uwf.engine.threads.steer import answer_step

        fields = dict(output) if output is not None else {}
        return answer_step(
            self.backend,
            thread,
            fields=fields,
            text=text,
            message=message,
            wait=wait,
            status=status,
        )

    def resume(
        self,
        thread: str,
        text: str | None = None,
        *,
        agent: Agent | None = None,
        timeout: float | None = None,
    ) -> StepResult:
        """Run the role a waiting thread waits for again, told ``text`` (``thread resume``);
        an ended thread is resumed as a new thread (the result's ``thread``)."""
        from uwf.engine.threads.resume import resume

        command, runner = self._agent(agent)
        line = resume(self.backend, thread, text, agent=command, timeout=timeout, runner=runner)
        return StepResult(
            line["workflow"],
            line["thread"],
            line["head"],
            line["role"],
            line["done"],
            line["status"],
        )

    # -- reading -----------------------------------------------------------------------------

    def show(self, thread: str) -> types.ThreadState:
        """Where ``thread`` is (``thread show``): a few reads, whatever its length."""
        from uwf.engine.threads.lifecycle import show

        return types.state_of(show(self.backend, thread))

    def steps(self, thread: str) -> types.Steps:
        """Its StartNode and every step, oldest first, outputs expanded (``thread steps``)."""
        from uwf.engine.threads.steplist import steps

        return types.steps_of(steps(self.backend, thread))

    def read(
        self,
        thread: str,
        *,
        quota: int | None = None,
        before: str | None = None,
        show_start: bool = False,
        full: bool = False,
    ) -> str:
        """The thread as markdown (``thread read``): newest steps first within ``quota``
        characters (default 4000), each with its role's goal, prompt, output, artifacts."""
        from uwf.engine.views.read import DEFAULT_QUOTA, read_thread

        given = DEFAULT_QUOTA if quota is None else quota
        return read_thread(self.backend, thread, given, before, show_start, full)

    def threads(
        self,
        *,
        status: str | None = None,
        workflow: str | None = None,
        all: bool = False,
        after: str | None = None,
        before: str | None = None,
        skip: int = 0,
        take: int | None = None,
        parent: str | None = None,
    ) -> tuple[types.ThreadSummary, ...]:
        """Threads newest first, with ``thread list``'s filters: active ones, plus ended ones
        with ``all`` or an ended ``status`` (comma-separated, or ``active``); ``workflow`` a
        name or hash; ``after``/``before`` ``7d``, ``24h``, a date; ``parent`` a fan-out's."""
        from uwf.engine.threads.listing import list_threads

        found = list_threads(
            self.backend,
            all_=all,
            status=status,
            workflow=workflow,
            after=after,
            before=before,
            skip=skip,
            take=take,
            parent=parent,
        )
        return tuple(types.summary_of(item) for item in found)

    # -- agents ------------------------------------------------------------------------------

    def _agent(self, agent: Agent | None) -> tuple[str | None, Runner]:
        """What ``agent`` means to the engine: its ``--agent``, and the runner — the
        default (a process, or a ``python:`` agent in this process), or for a Python agent
        given as a callable, one that calls it in this process."""
        from uwf.engine.step.run import process_runner

        if agent is None or isinstance(agent, str):
            return agent, process_runner
        if not callable(agent):
            raise UsageError(f"an agent is a string or a callable, got {type(agent).__name__}")
        from uwf.engine.step.inproc import InProcess, reference

        return reference(agent), InProcess(self.backend, agent)
