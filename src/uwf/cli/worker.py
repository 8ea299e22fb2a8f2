"""`uwf worker`: step the oldest idle thread, again and again (docs/scale-out.md)."""

from typing import Annotated

import typer

from uwf.cli.options import AgentOpt, TimeoutOpt, WorkflowFilterOpt, backend, emit_stream
from uwf.util.errors import InvalidInput


# Longer than 60 lines: a Typer command's parameters and help text are its declaration.
def worker(
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
) -> None:
    """Step threads until stopped: `thread step --next` in a loop, with back-off.

    Each round steps the oldest active thread that is not waiting and that no one else is
    stepping (on this machine or, with PostgreSQL, any other), so N workers on N machines
    share the work with no coordinator. With nothing to step it waits, longer each time
    (0.05 s doubling up to 5 s). A thread whose step failed is left alone for a while
    (1 s doubling up to 60 s) while other threads go on. With --thread it steps those
    threads only (`uwf eval run --local-workers` starts its workers so) and exits 0 once
    every one of them has ended.

    Prints one JSON line per step attempt: the step's {"workflow","thread","head","role",
    "done","status"} plus "ms", or {"thread","error","exit","ms"} for a step that failed
    (exit: its `thread step` exit code). Its own lines (idle, stopping) go to stderr.

    \b
    SIGTERM or SIGINT stop it gracefully: the running step's agent is stopped, the thread's
    head does not move, and it exits 0. It also exits 0 after --max-steps steps or
    --idle-exit seconds without work; 1 on an error before it could start; 2 on a usage error.
    """
    from uwf.engine.step import fleet

    if max_steps is not None and max_steps < 1:
        raise InvalidInput(f"--max-steps must be a positive integer, got: {max_steps}")
    if idle_exit is not None and not idle_exit >= 0:
        raise InvalidInput(f"--idle-exit must be a number of seconds >= 0, got: {idle_exit}")
    if timeout is not None and not timeout > 0:
        raise InvalidInput(f"--timeout must be a positive number of seconds, got: {timeout}")
    from uwf.util.ulid import check_thread_id

    only = frozenset(check_thread_id(t) for t in threads) if threads else None
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
    )
    summary = work.run()
    typer.echo(f"worker: {summary['steps']} steps, {summary['failed']} failed", err=True)
