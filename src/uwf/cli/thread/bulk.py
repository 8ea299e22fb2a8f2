"""`uwf thread kill`, `thread stop`, `thread retry` and `thread rerun`: on one thread, or in
bulk on the threads named and those the filters of `thread list` match (docs/scale-out.md,
"Bulk actions"; the engine's side is ``uwf.engine.threads.bulk``). Registered on the thread
group by ``uwf.cli.thread``.

Each command has two forms. One thread named, with no filter and no ``--dry-run``: the single
form, whose output and exit codes are what they always were. Anything else: the bulk form,
one ``BulkLine`` per thread, exit 1 when any of them has an error.
"""

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from uwf.cli.options import (
    AfterOpt,
    AgentOpt,
    BeforeOpt,
    CwdOpt,
    Format,
    FormatOpt,
    NoCwdOpt,
    ParentOpt,
    StatusFilterOpt,
    TimeoutOpt,
    WorkflowFilterOpt,
    backend,
    complete_threads,
    emit,
    emit_stream,
    loop_contract,
    thread_cwd,
)
from uwf.util.errors import UsageError, UwfError

if TYPE_CHECKING:
    from uwf.engine.threads.bulk import Action, Filters

ThreadsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="THREAD",
        help="Thread ids (26-character ULIDs); with the filters, or instead of them.",
        show_default=False,
        autocompletion=complete_threads,
    ),
]
BulkDryRunOpt = Annotated[
    bool,
    typer.Option(
        "--dry-run",
        help='Print the line of each thread it would touch, with "dryRun": true; change nothing.',
    ),
]

BULK_HELP = """\
Threads are named, or selected with the filters of `thread list` (--status, --workflow,
--after, --before, --parent), or both: the threads named, in order, then those the filters
match, newest first, each once. With neither, nothing is done (exit 2): --status active
selects every active thread.

One thread named, with no filter and no --dry-run, is the single form above. Otherwise it
prints one JSON line per thread: {"thread","action","workflow","status"} (as selected) and
"result" (what the single form prints), "skipped" (why a thread a filter matched was left
alone) or "error" and "exit" (a thread named that the action does not apply to, or an action
that failed: the single form's message and exit code); the other threads go on. Exit 0 when
no line has an error, else 1. --dry-run prints the same lines, with "dryRun": true and no
"result", and changes nothing."""


def _filters(
    status: str | None,
    workflow: str | None,
    after: str | None,
    before: str | None,
    parent: str | None,
) -> "Filters":
    from uwf.engine.threads.bulk import Filters

    return Filters(status, workflow, after, before, parent)


def _single(threads: list[str] | None, filters: "Filters", dry_run: bool) -> str | None:
    """The one thread of the single form, or None (the bulk form)."""
    if threads is not None and len(threads) == 1 and not dry_run and not filters.selects():
        return threads[0]
    return None


# The parameters every bulk command takes, in the order its --help lists them: the threads
# named, the filters of `thread list`, then the command's own options, then --dry-run and
# --format. Written once here; `_bulk_command` gives each command this signature.
_FILTER_PARAMS = [
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=annotation)
    for name, annotation in (
        ("status", StatusFilterOpt),
        ("workflow", WorkflowFilterOpt),
        ("after", AfterOpt),
        ("before", BeforeOpt),
        ("parent", ParentOpt),
    )
]
_TAIL_PARAMS = [
    inspect.Parameter(
        "dry_run", inspect.Parameter.KEYWORD_ONLY, default=False, annotation=BulkDryRunOpt
    ),
    inspect.Parameter("fmt", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=FormatOpt),
]
_SHARED = {"threads", "filters", "dry_run", "fmt"}

BulkBody = Callable[..., None]


def _bulk_command(threads_arg: object = ThreadsArg) -> Callable[[BulkBody], BulkBody]:
    """Make ``body(threads, filters, dry_run, fmt, **own)`` a command whose signature (what
    Typer reads: ``inspect.signature`` and the annotations) is the shared one around the
    body's own options, so the four commands declare the threads, the filters, --dry-run and
    --format once."""

    def wrap(body: BulkBody) -> BulkBody:
        own = [
            p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
            for p in inspect.signature(body).parameters.values()
            if p.name not in _SHARED
        ]

        def command(threads: list[str] | None = None, **given: Any) -> None:
            # Typer passes every parameter of the signature below by name
            filters = _filters(*(given.pop(p.name) for p in _FILTER_PARAMS))
            body(threads, filters, given.pop("dry_run"), given.pop("fmt"), **given)

        threads = inspect.Parameter(
            "threads", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=threads_arg
        )
        params = [threads, *_FILTER_PARAMS, *own, *_TAIL_PARAMS]
        command.__signature__ = inspect.Signature(params, return_annotation=None)  # type: ignore[attr-defined]
        command.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}
        command.__name__ = command.__qualname__ = body.__name__
        command.__module__ = body.__module__
        command.__doc__ = f"{inspect.getdoc(body)}\n\n{BULK_HELP}"
        return command

    return wrap


def _bulk(
    action: "Action",
    threads: list[str] | None,
    filters: "Filters",
    dry_run: bool,
    fmt: Format | None,
) -> None:
    """Select the targets, print each one's line as it is done, then fail if any failed."""
    from uwf.engine.threads import bulk

    storage = backend()
    command = f"thread {action.name}"
    targets = bulk.select(storage, command, threads or [], filters)
    failed = 0
    for line in bulk.run(storage, action, targets, dry_run=dry_run):
        emit_stream(line, fmt)
        failed += "error" in line
    if failed:
        verb = "would fail" if dry_run else "failed"
        raise UwfError(
            f'{command}: {failed} of {len(targets)} threads {verb} (see the lines with "error")'
        )


@_bulk_command()
def kill(threads: list[str] | None, filters: "Filters", dry_run: bool, fmt: Format | None) -> None:
    """Archive active threads with status killed (their active child threads first).

    The single form prints {"thread","killed":true}; a thread that is not active is an
    error (exit 1).
    """
    from uwf.engine.threads import bulk

    one = _single(threads, filters, dry_run)
    if one is not None:
        from uwf.engine.threads import lifecycle

        emit(lifecycle.kill(backend(), one), fmt)
        return
    _bulk(bulk.Kill(), threads, filters, dry_run, fmt)


@_bulk_command()
def stop(threads: list[str] | None, filters: "Filters", dry_run: bool, fmt: Format | None) -> None:
    """End the background runs (thread step --background) of threads, and their agents.

    The head stays where it was and the thread active. The single form prints
    {"thread","stopped":true} once the run has ended, its agent's process group killed; with
    no background run, {"thread","stopped":false} and a warning (removing what a run that
    died left behind). Works from any machine that shares the storage backend. In bulk, a
    thread with no background run is skipped, named or not.
    """
    from uwf.engine.threads import bulk

    one = _single(threads, filters, dry_run)
    if one is not None:
        from uwf.engine.step.background import stop as stop_run

        result, warning = stop_run(backend(), one)
        if warning:
            typer.echo(f"warning: {warning}", err=True)
        emit(result, fmt)
        return
    _bulk(bulk.Stop(), threads, filters, dry_run, fmt)


@_bulk_command()
def retry(threads: list[str] | None, filters: "Filters", dry_run: bool, fmt: Format | None) -> None:
    """Step failed or failing threads again: end their last failure.

    A thread whose retry policy's last attempt failed is failed (thread list --status failed)
    and never stepped; one that is failing waits for its next allowed attempt (docs/format.md,
    "Retries"). This ends the failure: the next step runs at once, attempts counted from
    zero; the head does not move. The single form prints {"thread","retried","failure"} (the
    failure ended).
    """
    from uwf.engine.threads import bulk

    one = _single(threads, filters, dry_run)
    if one is not None:
        from uwf.engine.threads import steer

        emit(steer.retry(backend(), one), fmt)
        return
    _bulk(bulk.Retry(), threads, filters, dry_run, fmt)


StepsArg = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="STEP|THREAD",
        help="A StepNode hash (13 characters) or thread ids (the last step of each).",
        show_default=False,
    ),
]


@_bulk_command(StepsArg)
def rerun(
    threads: list[str] | None,
    filters: "Filters",
    dry_run: bool,
    fmt: Format | None,
    agent: AgentOpt = None,
    timeout: TimeoutOpt = None,
    edge_prompt: Annotated[
        str | None,
        typer.Option(
            "--edge-prompt",
            metavar="TEXT",
            help="The instruction the role gets instead of the graph's edge prompt.",
            show_default=False,
        ),
    ] = None,
    cwd: CwdOpt = None,
    no_cwd: NoCwdOpt = False,
) -> None:
    """Run a step's role again from the step's parent, in a new thread.

    Forks at the step's parent (its previous step, or the task) and runs the same role once,
    with --agent, --timeout or --edge-prompt when given; the original thread is untouched. A
    thread stands for its last step (active or ended); its re-run works in the thread's
    working directory, a step's in the current directory (a step names no thread) — unless
    --cwd gives one, or --no-cwd records none.
    The single form (one step or thread) prints the step's line
    ({"workflow","thread","head","role","done","status"}, thread being the new one) plus
    "rerunOf", with the exit codes of thread step (an error names the new thread). In bulk,
    each thread's last step is re-run in turn, and the re-runs' exit codes are the lines'
    "exit".
    """
    from uwf.engine.threads import bulk

    thread_cwd(cwd, no_cwd)  # --cwd with --no-cwd is refused before anything runs
    action = bulk.Rerun(
        agent=agent, timeout=timeout, edge_prompt=edge_prompt, cwd=cwd, no_cwd=no_cwd
    )
    one = _single(threads, filters, dry_run)
    if one is None:
        if any(len(t) != 26 for t in threads or []):
            raise UsageError(
                "a bulk thread rerun takes thread ids, not step hashes: re-run one step "
                "alone (uwf thread rerun STEP)"
            )
        _bulk(action, threads, filters, dry_run, fmt)
        return
    from uwf.engine.threads import steer

    storage = backend()
    step, cwd = action.of_thread(storage, one) if len(one) == 26 else (one, thread_cwd(cwd, no_cwd))
    with loop_contract():
        emit_stream(
            steer.rerun(
                storage, step, agent=agent, timeout=timeout, edge_prompt=edge_prompt, cwd=cwd
            ),
            fmt,
        )
