"""`uwf thread step`: running a thread's steps, in the foreground or in a background run
(docs/architecture.md, "Background runs"; `thread stop` is in ``uwf.cli.thread.bulk``).
Registered on the thread group by ``uwf.cli.thread``."""

from typing import TYPE_CHECKING, Annotated

import typer

from uwf.cli.options import (
    AgentOpt,
    Format,
    FormatOpt,
    TimeoutOpt,
    WaitOpt,
    WorkflowFilterOpt,
    backend,
    emit,
    emit_stream,
    loop_contract,
)
from uwf.util.errors import UsageError

if TYPE_CHECKING:
    from uwf.util.outputs import BackgroundStarted

# The arguments and options of `thread step` of its own (the others are shared: cli/options.py).
ThreadOrNextArg = Annotated[
    str | None,
    typer.Argument(help="Thread id (a 26-character ULID); omit with --next.", show_default=False),
]
NextOpt = Annotated[
    bool,
    typer.Option(
        "--next",
        help="Step the oldest active thread that is not waiting and that no one is "
        "stepping (exit 3 when there is none).",
    ),
]
CountOpt = Annotated[
    str, typer.Option("--count", "-c", help="Run up to N steps, stopping when the thread is done.")
]
DryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run", help="Print the next role, its prompt and the agent command; run nothing."
    ),
]
BackgroundOpt = Annotated[
    bool,
    typer.Option(
        "--background",
        help='Run the steps in a detached process; print {"thread","pid","log"} '
        "and return at once.",
    ),
]


def step(
    thread: ThreadOrNextArg = None,
    next_: NextOpt = False,
    workflow: WorkflowFilterOpt = None,
    agent: AgentOpt = None,
    count: CountOpt = "1",
    dry_run: DryRunOpt = False,
    timeout: TimeoutOpt = None,
    wait: WaitOpt = False,
    background: BackgroundOpt = False,
    fmt: FormatOpt = None,
) -> None:
    """Run one moderator -> agent -> extract cycle (or up to -c N of them).

    --next picks the thread: the oldest active one that is not waiting and that no process
    (on any machine sharing the store) is stepping; `while uwf thread step --next; do :; done`
    on N machines drains the work with no coordinator. With -c N, --next picks again for each
    step and stops early, exit 0, once nothing is left.

    Prints one JSON object per step as it lands (JSON Lines; --format yaml: one YAML document
    per step): {"workflow","thread","head","role","done","status"}, where status is the
    thread's status after the step (active, completed, max_rounds or killed). With -c N the
    steps that landed are printed even when a later one fails; the exit code is that of the
    last attempt. --dry-run prints the plan of the next step instead and runs nothing.

    --background starts a detached run of the same loop (its own session, stdin /dev/null,
    output to <root>/runs/<thread>.log), prints {"thread","pid","log"} and returns once the run
    holds the thread. It steps until $END, max rounds, a failure or -c N; meanwhile the thread
    is "running", and other steps on it are refused as busy. `uwf thread stop` ends it.

    \b
    Exit codes (docs/errors.md):
      0  a step ran, --dry-run printed the plan, or --background started a run
      1  an error in uwf, the store or the configuration
      2  a usage error
      3  the thread is not active (completed, killed, max rounds): nothing left to do;
         with --next: no thread to step (none active, idle and not waiting)
      4  busy: another step holds the thread (or moved its head meanwhile)
      5  the agent failed: exit code, timeout, no or a bad StepNode, rejected output
      6  waiting: the agent deferred the step (exit 75; e.g. a person answers later with
         uwf thread answer); the thread shows status waiting
      128+n  stopped by signal n (SIGINT, SIGTERM, SIGHUP); the head did not move
    """
    n = _checked_count(count, thread, next_, workflow, dry_run, wait, background)
    with loop_contract():
        if thread is None:
            _step_next(n, workflow, agent, timeout, fmt)
        elif background:
            emit(_launch(thread, n, agent, timeout), fmt)
        elif dry_run:
            from uwf.engine.step import dry_run as plan_only

            emit(plan_only(backend(), thread, agent=agent, timeout=timeout), fmt)
        else:
            _step_thread(thread, n, agent, timeout, wait, fmt)


def _checked_count(
    count: str,
    thread: str | None,
    next_: bool,
    workflow: str | None,
    dry_run: bool,
    wait: bool,
    background: bool,
) -> int:
    """``--count`` as a number, once the arguments of ``thread step`` go together."""
    from uwf.util.numbers import positive_int

    n = positive_int(count, "--count", UsageError)
    if (thread is None) == (not next_):
        raise UsageError("give a thread id or --next (not both)")
    if workflow is not None and not next_:
        raise UsageError("--workflow needs --next")
    if next_ and (dry_run or wait):
        raise UsageError("--dry-run and --wait need a thread id, not --next")
    if next_ and background:
        raise UsageError("--background needs a thread id, not --next")
    if background and (dry_run or wait):
        raise UsageError("--background cannot be combined with --dry-run or --wait")
    return n


def _step_thread(
    thread: str, n: int, agent: str | None, timeout: float | None, wait: bool, fmt: Format | None
) -> None:
    """``thread step THREAD [-c N]``: up to N steps of one thread, under one lock."""
    from uwf.engine import step as engine

    ran = 0

    def landed(result: engine.StepResult) -> None:
        nonlocal ran
        ran += 1
        emit_stream(result.as_json(), fmt)
        if n > 1:
            done = " (done)" if result.done else ""
            typer.echo(f"step {ran}/{n}: {result.role or '-'} -> {result.head}{done}", err=True)

    with engine.packing_in_a_process():  # this command exits after its steps
        engine.step_many(
            backend(), thread, n, on_result=landed, agent=agent, timeout=timeout, wait=wait
        )


def _step_next(
    n: int, workflow: str | None, agent: str | None, timeout: float | None, fmt: Format | None
) -> None:
    """``thread step --next [-c N]``: up to N steps, each of the thread ``--next`` picks."""
    from uwf.engine.step import fleet, packing_in_a_process
    from uwf.util.errors import NothingToStep

    storage = backend()
    versions = fleet.workflow_versions(storage, workflow) if workflow is not None else None
    for ran in range(n):
        try:
            with packing_in_a_process():  # this command exits after its steps
                result = fleet.step_next(storage, versions=versions, agent=agent, timeout=timeout)
        except NothingToStep:
            if ran == 0:
                raise
            return
        emit_stream(result.as_json(), fmt)
        if n > 1:
            typer.echo(
                f"step {ran + 1}/{n}: {result.thread} {result.role or '-'} -> {result.head}",
                err=True,
            )


def _launch(
    thread: str, count: int, agent: str | None, timeout: float | None
) -> "BackgroundStarted":
    from uwf.cli.background import WORKER
    from uwf.engine.step.background import launch

    return launch(backend(), thread, count=count, agent=agent, timeout=timeout, worker=WORKER)
