"""`uwf worker`: step the most urgent idle thread, again and again; `uwf worker list`: the
workers of the store (docs/scale-out.md, "Running a fleet")."""

from typing import TYPE_CHECKING, Annotated

import typer

from uwf.cli.lazy import App
from uwf.cli.options import (
    AgentOpt,
    TableFormatOpt,
    TimeoutOpt,
    WorkflowFilterOpt,
    backend,
    emit_listing,
    emit_stream,
)
from uwf.util.errors import InvalidInput, UsageError

if TYPE_CHECKING:
    from uwf.util.outputs import WorkerListed

app = App(rich_markup_mode=None, invoke_without_command=True, no_args_is_help=False)


# Longer than 60 lines: a Typer command's parameters and help text are its declaration.
@app.callback()
def worker(
    ctx: typer.Context,
    max_steps: Annotated[
        int | None,
        typer.Option("--max-steps", help="Stop after N steps.", show_default=False),
    ] = None,
    idle_exit: Annotated[
        float | None,
        typer.Option(
            "--idle-exit",
            metavar="SECONDS",
            help="Stop after this many seconds with nothing to step (default: never).",
            show_default=False,
        ),
    ] = None,
    workflow: WorkflowFilterOpt = None,
    threads: Annotated[
        list[str] | None,
        typer.Option(
            "--thread",
            metavar="ID",
            help="Only this thread and its fan-outs' children (repeatable); "
            "stop once all of them have ended.",
            show_default=False,
        ),
    ] = None,
    agent: AgentOpt = None,
    timeout: TimeoutOpt = None,
    drain_timeout: Annotated[
        float,
        typer.Option(
            "--drain-timeout",
            metavar="SECONDS",
            help="On SIGTERM, let the step in flight finish for up to this long, then stop "
            "its agent (0: stop it at once).",
        ),
    ] = 10.0,
    heartbeat: Annotated[
        float,
        typer.Option(
            "--heartbeat",
            metavar="SECONDS",
            help="Seconds between two heartbeats in the worker registry (`uwf worker list`); "
            "a worker silent for 3 of them is lost.",
        ),
    ] = 10.0,
) -> None:
    """Step threads until stopped: `thread step --next` in a loop, with back-off.

    Each round steps the most urgent, else oldest, active thread that is not waiting and that
    no one else is stepping (on this machine or, with PostgreSQL, any other), so N workers
    on N machines share the work with no coordinator. With nothing to step it waits, longer
    each time (0.05 s doubling up to 5 s). A thread whose step failed is left alone until its
    retry policy allows the next attempt while other threads go on. With --thread it steps
    those threads only (`uwf eval run --local-workers` starts its workers so) and exits 0
    once every one of them has ended.

    Prints one JSON line per step attempt: the step's {"workflow","thread","head","role",
    "done","status"} plus "ms", or {"thread","error","exit","ms"} for a step that failed
    (exit: its `thread step` exit code). Its own lines (idle, stopping) go to stderr. It
    registers in the store and beats every --heartbeat seconds: `uwf worker list` shows it.

    \b
    SIGTERM drains: the step in flight may finish within --drain-timeout seconds, then its
    agent is stopped and the thread's head does not move; no other step starts, and it
    exits 0. SIGINT (or a second SIGTERM, a second or more after the first) stops the agent
    at once. An agent killed by a signal with the worker (systemd's KillMode=control-group;
    use KillMode=mixed) is a shutdown: no failed attempt is counted. It also exits 0 after
    --max-steps steps or --idle-exit seconds without work; 1 on an error before it could
    start; 2 on a usage error.
    """
    if ctx.invoked_subcommand is not None:
        options = (max_steps, idle_exit, workflow, threads, agent, timeout)
        if any(v is not None for v in options) or (drain_timeout, heartbeat) != (10.0, 10.0):
            command = ctx.invoked_subcommand
            raise UsageError(f"`uwf worker {command}` takes none of the options of `uwf worker`")
        return
    _run(max_steps, idle_exit, workflow, threads, agent, timeout, drain_timeout, heartbeat)


def _run(
    max_steps: int | None,
    idle_exit: float | None,
    workflow: str | None,
    threads: list[str] | None,
    agent: str | None,
    timeout: float | None,
    drain_timeout: float,
    heartbeat: float,
) -> None:
    from uwf.engine.step import fleet, workers
    from uwf.util.signals import draining

    if max_steps is not None and max_steps < 1:
        raise InvalidInput(f"--max-steps must be a positive integer, got: {max_steps}")
    if idle_exit is not None and not idle_exit >= 0:
        raise InvalidInput(f"--idle-exit must be a number of seconds >= 0, got: {idle_exit}")
    if timeout is not None and not timeout > 0:
        raise InvalidInput(f"--timeout must be a positive number of seconds, got: {timeout}")
    from uwf.util.ulid import check_thread_id

    only = frozenset(check_thread_id(t) for t in threads) if threads else None
    if not 0 <= drain_timeout <= workers.LONGEST_INTERVAL:
        raise InvalidInput(
            f"--drain-timeout must be a number of seconds from 0 to 3600, got: {drain_timeout}"
        )
    if not 0 < heartbeat <= workers.LONGEST_INTERVAL:
        raise InvalidInput(
            f"--heartbeat must be a number of seconds above 0, at most 3600, got: {heartbeat}"
        )
    storage = backend()
    versions = fleet.workflow_versions(storage, workflow) if workflow is not None else None
    work = fleet.Worker(
        storage,
        emit=emit_stream,
        say=lambda line: typer.echo(f"worker: {line}", err=True),
        max_steps=max_steps,
        idle_exit=idle_exit,
        versions=versions,
        only=only,
        agent=agent,
        timeout=timeout,
        drain_timeout=drain_timeout,
    )
    with workers.Heartbeat(storage, heartbeat, lambda: (work.steps, work.failed)) as beat:
        for line in beat.damage:
            typer.echo(f"warning: {line}", err=True)
        work.id = beat.id
        with draining(work.take_signal):
            summary = work.run()
    typer.echo(f"worker: {summary['steps']} steps, {summary['failed']} failed", err=True)


@app.command("list")
def list_workers(fmt: TableFormatOpt = None) -> None:
    """List the workers of the store: running, idle, lost or stopped in the last day.

    Each worker's id, host, pid, state, when it started, its last heartbeat, the steps it
    recorded and the attempts that failed (as of its last heartbeat), and, while it steps,
    the thread and role. A worker is lost when it missed 3 heartbeats (killed, its machine
    gone, or hung); stopped when it exited by itself. Records older than a day are pruned
    when a worker starts. A record that cannot be read is left out with a warning on stderr
    naming its file (docs/reliability.md, "Repairing damaged state").
    """
    from uwf.engine.step import workers

    storage = backend()
    items, damage = workers.listed(storage)
    for line in damage:
        typer.echo(f"warning: {line}", err=True)
    emit_listing(items, fmt, lambda: _rows(items))


def _rows(items: "list[WorkerListed]") -> tuple[list[str], list[list[object]]]:
    from uwf.cli.columns import age
    from uwf.util.ulid import now_ms

    now = now_ms()
    rows: list[list[object]] = [
        [
            i["id"],
            i["host"],
            i["pid"],
            i["state"],
            i.get("thread", ""),
            i.get("role", ""),
            i["steps"],
            i["failed"],
            age(i["started"], now),
            f"{age(i['heartbeat'], now)} ago",
        ]
        for i in items
    ]
    header = [
        "WORKER",
        "HOST",
        "PID",
        "STATE",
        "THREAD",
        "ROLE",
        "STEPS",
        "FAILED",
        "AGE",
        "HEARTBEAT",
    ]
    return header, rows
