"""The ``thread`` commands of a thread's life: start, show, list, steps, compact, fork
(over ``engine/threads``: ``lifecycle``, ``listing``, ``steplist``, ``longthreads``,
``refork``)."""

from pathlib import Path
from typing import Annotated

import typer

from uwf.cli.options import (
    AfterOpt,
    BeforeOpt,
    CwdOpt,
    FormatOpt,
    NoCwdOpt,
    ParentOpt,
    Rows,
    StatusFilterOpt,
    TableFormatOpt,
    ThreadArg,
    WorkflowFilterOpt,
    backend,
    complete_workflows,
    emit,
    emit_listing,
    list_page,
    read_input,
    thread_cwd,
)
from uwf.util.errors import UsageError


def start(
    workflow: Annotated[
        str,
        typer.Argument(
            help="Workflow: a hash, a file path, a project-local name (.workflow/ or .workflows/ "
            "up the tree), a registered name, or a file in workflowPaths (config.yaml).",
            show_default=False,
            autocompletion=complete_workflows,
        ),
    ],
    prompt: Annotated[
        str, typer.Option("--prompt", "-p", help="The task. '-' reads stdin.", show_default=False)
    ],
    max_rounds: Annotated[
        int | None,
        typer.Option(
            "--max-rounds",
            help="Archive the thread (status max_rounds) after this many steps.",
            show_default=False,
        ),
    ] = None,
    cwd: CwdOpt = None,
    no_cwd: NoCwdOpt = False,
    priority: Annotated[
        int,
        typer.Option(
            "--priority",
            help="Higher is stepped first by --next and workers (see thread priority).",
        ),
    ] = 0,
    key: Annotated[
        str | None,
        typer.Option(
            "--key",
            metavar="KEY",
            help="Start at most once per KEY and workflow name: a later start with the same "
            "key prints the thread the first one created.",
            show_default=False,
        ),
    ] = None,
    fmt: FormatOpt = None,
) -> None:
    """Create a thread for a workflow and a task. Runs nothing.

    The thread records its working directory, --cwd or else the current directory: its
    agents start there (an edge's location is relative to it), and a project workflow name
    is looked up from there. With --no-cwd it records none, and its agents start wherever
    the step runs.

    Prints {"workflow","thread"}; with --key also "key" and "existing" (true: the key named
    a thread already, which is printed and nothing is written; a retried CI job starts its
    work once).
    """
    from uwf.engine.threads import lifecycle as threads

    text = read_input("-", "task") if prompt == "-" else prompt
    emit(
        threads.start(
            backend(),
            workflow,
            text,
            max_rounds,
            thread_cwd(cwd, no_cwd),
            key=key,
            priority=priority,
        ),
        fmt,
    )


def show(
    thread: ThreadArg,
    full: Annotated[
        bool,
        typer.Option("--full", help='Also list the whole chain ("chain"), as `thread steps` does.'),
    ] = False,
    fmt: TableFormatOpt = None,
) -> None:
    """Show a thread's head, status and number of steps.

    Prints {"workflow","thread","head","done","status","steps","cost"}, plus "waiting"
    ({"role","since","reason"}) when its agent deferred, "failure" ({"error","code","at",
    "attempts","since","role","agent","host","limit","retryAt","exhausted"}: the attempts that
    failed since its last step; status failing, or failed after the last attempt its retry
    policy allows), "background" ({"pid","host","since","log"}) while a background run
    holds it, and "children" ([{"thread","status"}], in item order) while it waits for the
    child threads a fan-out started. With --full also "chain": the StartNode ({"hash",
    "workflow","prompt","timestamp"}) and every step, oldest first ({"hash","role",
    "output","detail","agent","timestamp"}, the output expanded). --format table prints one
    field per line.
    """
    from uwf.engine.threads import lifecycle as threads

    storage = backend()
    shown = threads.show(storage, thread, full=full)

    def rows() -> Rows:  # the table's module: with --format table only
        from uwf.cli.tables import show_rows

        return show_rows(storage, shown)

    emit_listing(shown, fmt, rows)


def list_(
    all_: Annotated[bool, typer.Option("--all", help="Include archived threads.")] = False,
    status: StatusFilterOpt = None,
    workflow: WorkflowFilterOpt = None,
    after: AfterOpt = None,
    before: BeforeOpt = None,
    skip: Annotated[str, typer.Option("--skip", help="Skip the N newest.")] = "0",
    take: Annotated[
        str | None, typer.Option("--take", help="Return at most N.", show_default=False)
    ] = None,
    offset: Annotated[
        str | None,
        typer.Option("--offset", help="--skip by uwf 0.8's name.", show_default=False),
    ] = None,
    limit: Annotated[
        str | None,
        typer.Option("--limit", help="--take by uwf 0.8's name.", show_default=False),
    ] = None,
    parent: ParentOpt = None,
    fmt: TableFormatOpt = None,
) -> None:
    """List threads, newest first (active only unless --all, --status or --parent).

    Each: {"thread","workflow","head","status","task","createdAt"}, where task is the first
    line of the thread's task (up to 100 characters) and createdAt its creation time (unix
    ms); plus "waiting" and "failure" as `thread show` prints them, and "fanOut"
    ({"children","active"}) for a parent waiting for its fan-out's children. --format table
    prints aligned columns: thread, age, status (a fan-out parent's: "fanned out (3 children,
    1 active)"), workflow, task, last failure. The filters (--status,
    --workflow, --after, --before, --parent) select the threads of the bulk actions too
    (thread kill, stop, retry, rerun).
    """
    from uwf.engine.threads.listing import list_threads

    skip_n, take_n = list_page(skip, take, offset, limit)

    storage = backend()
    items = list_threads(
        storage,
        all_=all_,
        status=status,
        workflow=workflow,
        after=after,
        before=before,
        skip=skip_n,
        take=take_n or None,
        parent=parent,
    )

    def rows() -> Rows:  # the table's module: with --format table only
        from uwf.cli.tables import list_rows

        return list_rows(storage, items)

    emit_listing(items, fmt, rows)


AtOpt = Annotated[
    str | None,
    typer.Option(
        "--at",
        metavar="N",
        help="Step N of the thread (1 is its first step, 0 its start), found by number: a "
        "few reads at any depth.",
        show_default=False,
    ),
]


def _step_number(at: str) -> int:
    from uwf.util.errors import oneline
    from uwf.util.numbers import as_count

    number = as_count(at)
    if number is None:
        raise UsageError(
            f"--at must be a step number (0 is the thread's start), got: {oneline(at)}"
        )
    return number


def steps(thread: ThreadArg, at: AtOpt = None, fmt: TableFormatOpt = None) -> None:
    """List the start node and every step of a thread, oldest first.

    Prints {"thread","workflow","steps","cost"}: the StartNode, then each step with its
    output expanded, durationMs and usage. --format table prints aligned columns: number,
    hash, role, status, agent, time taken, tokens, age. With --at N, print step N alone:
    {"thread","number","hash","role","output","detail","agent","timestamp","durationMs",
    "usage"} ({"thread","number","hash","workflow","prompt","timestamp"} for 0, the start).
    """
    from uwf.cli import tables
    from uwf.engine.threads import steplist

    storage = backend()
    if at is not None:
        found = steplist.step_at(storage, thread, _step_number(at))
        emit_listing(found, fmt, lambda: tables.step_at_rows(storage, found))
        return
    listed = steplist.steps(storage, thread)
    emit_listing(listed, fmt, lambda: tables.steps_rows(storage, listed))


def compact(
    thread: ThreadArg,
    text: Annotated[
        Path | None,
        typer.Option(
            "--text",
            metavar="FILE",
            help="The summary, written by a person or a script ('-' reads stdin). Without it "
            "the configured model writes one now.",
            show_default=False,
        ),
    ] = None,
    fmt: FormatOpt = None,
) -> None:
    """Record a compaction summary of the thread so far, for its next step to carry.

    The next step (by an agent on the agent kit) stores it as its StepNode's compact field:
    from then on agents are given this summary plus the steps after it. Routing never reads
    summaries. Prints {"thread","head","summary","characters"}.
    """
    from uwf.engine.threads.longthreads import compact_thread

    summary = None
    if text is not None:
        summary = read_input(str(text), "summary")
    emit(compact_thread(backend(), thread, summary), fmt)


def fork(
    step_hash: Annotated[
        str,
        typer.Argument(
            help="A StartNode or StepNode hash to fork from (with --at: a thread id).",
            show_default=False,
        ),
    ],
    at: Annotated[
        str | None,
        typer.Option(
            "--at",
            metavar="N",
            help="Fork the thread given as the argument at its step N (0: its start), found "
            "by number.",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            metavar="FILE",
            help="Fork from a copy of the step with this output instead: a frontmatter "
            "document (its markdown body becomes the step's content) or YAML/JSON; '-' reads "
            "stdin. Checked against the role's schema.",
            show_default=False,
        ),
    ] = None,
    edit: Annotated[
        bool,
        typer.Option(
            "--edit",
            help="Open $VISUAL/$EDITOR on the step's output (as frontmatter, with its content) "
            "and fork from the edited copy; a rejected edit opens again.",
        ),
    ] = False,
    workflow: Annotated[
        str | None,
        typer.Option(
            "--workflow",
            help="Go on under this workflow version (a hash, file or name, as for thread "
            "start): the chain is copied onto a new StartNode.",
            show_default=False,
        ),
    ] = None,
    cwd: CwdOpt = None,
    no_cwd: NoCwdOpt = False,
    fmt: FormatOpt = None,
) -> None:
    """Start a new thread whose head is an existing node (nothing is copied).

    With --output or --edit, the new head is a new StepNode with the same start, prev and
    role as the step and the edited output; its detail records that it was edited by hand
    and from which step. With --workflow, the new thread runs another version of the
    workflow (e.g. one fixed after a step failed): every role the chain ran must exist there;
    the task and the steps are copied onto a new StartNode of that version, sharing their
    outputs and details. The new thread's working directory is --cwd, else with --at the
    forked thread's, else the current directory (--no-cwd: none). Prints {"thread","forkedFrom"}
    ({"thread","head","forkedFrom"} when edited; also "workflow" with --workflow).
    """
    from uwf.cli.thread.steering import fork_edited

    if at is not None:
        from uwf.engine.threads.steplist import step_hash_at

        step_hash, kept = step_hash_at(backend(), step_hash, _step_number(at))
        cwd = kept if cwd is None and not no_cwd else thread_cwd(cwd, no_cwd)
    else:
        cwd = thread_cwd(cwd, no_cwd)

    if workflow is not None:
        if output is not None or edit:
            raise UsageError("--workflow cannot be combined with --output or --edit")
        from uwf.engine.threads.refork import fork_onto

        emit(fork_onto(backend(), step_hash, workflow, cwd), fmt)
        return
    from uwf.engine.threads import lifecycle as threads

    if output is None and not edit:
        emit(threads.fork(backend(), step_hash, cwd), fmt)
        return
    emit(fork_edited(backend(), step_hash, output, edit, cwd), fmt)
