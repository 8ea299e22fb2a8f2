"""The ``thread`` commands that show a thread: read, step-details, graph, watch (its lines
drawn by ``watching``), export (over ``engine/views`` and the web view)."""

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from uwf.cli.options import (
    Format,
    FormatOpt,
    GraphFormat,
    GraphFormatOpt,
    QuotaOpt,
    StepHashArg,
    ThreadArg,
    backend,
    complete_threads,
    emit,
    emit_graph,
    emit_markdown,
)
from uwf.util.errors import Interrupted, InvalidInput, UsageError

if TYPE_CHECKING:
    from uwf.util.outputs import Exported


def read(
    thread: ThreadArg,
    quota: QuotaOpt = "4000",
    before: Annotated[
        str | None,
        typer.Option("--before", help="Show only steps before this step hash.", show_default=False),
    ] = None,
    start_: Annotated[
        bool, typer.Option("--start", help="Include the task section even with --before.")
    ] = False,
    full: Annotated[
        bool,
        typer.Option(
            "--full", help="Ignore compaction summaries: show the steps they cover instead."
        ),
    ] = False,
) -> None:
    """Render a thread as markdown, newest steps first to fit the quota.

    A thread that is running, waiting (for a person, or for its fan-out's children), failing
    or failed says so on a State line at the top, with what continues it. Each step shows
    its role's goal (once per role), the edge prompt it was given, its output
    (the last assistant turn of its detail) and the artifacts it recorded. Walking back, the
    first step that carries a compaction summary ends the walk: the summary is shown in place
    of the steps before it, with where it is (--full shows those steps instead, marking where
    summaries are).
    """
    from uwf.engine.views.read import parse_quota, read_thread

    emit_markdown(read_thread(backend(), thread, parse_quota(quota), before, start_, full))


def step_details(step_hash: StepHashArg, fmt: FormatOpt = None) -> None:
    """Show a step's detail node with its references expanded (YAML unless --format json)."""
    from uwf.engine.views.read import step_details

    emit(step_details(backend(), step_hash), fmt, default=Format.yaml)


def graph(thread: ThreadArg, fmt: GraphFormatOpt = GraphFormat.mermaid) -> None:
    """Print the thread's workflow graph with the path it took, as Mermaid or DOT text.

    Edges the thread took are drawn thick and labelled with how often ("rejected ×2"); the
    edge an active thread takes next is dashed; visited roles are shaded and the current
    role (the one that runs next, $END once completed, the last role once killed) is
    highlighted.
    """
    from uwf.engine.views.timeline import thread_graph

    emit_graph(thread_graph(backend(), thread), fmt)


def watch(
    thread: Annotated[
        str | None,
        typer.Argument(
            help="Thread id (a 26-character ULID); omit with --all.",
            show_default=False,
            autocompletion=complete_threads,
        ),
    ] = None,
    all_: Annotated[
        bool, typer.Option("--all", help="Follow every active thread, and new ones, until Ctrl-C.")
    ] = False,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between two polls of the store.")
    ] = 0.25,
) -> None:
    """Follow a thread live: each step as it starts and lands, then the thread's end.

    Prints a line when a step starts (number, role, agent command) and when it lands
    (number, role, status, agent, duration, first line of its output). Exits 0 when the
    thread ends ($END, kill or max rounds), after a line with its final status. Polls the
    head and the step lock (passively: watching never delays or blocks a step). A live status
    line when stdout is a terminal, plain lines when not.
    """
    from uwf.cli.thread.watching import watch as follow
    from uwf.engine.views.follow import AllFollower, Follower

    if (thread is None) == (not all_):
        raise UsageError("give a thread id or --all (not both)")
    if not 0 < interval <= 60:
        raise InvalidInput(f"--interval must be a number of seconds in (0, 60], got: {interval}")
    terminal = sys.stdout.isatty()
    if thread is not None:
        one = Follower(backend(), thread)
        follow(one.poll, lambda: one.done, interval, terminal, show_thread=False)
        return
    every = AllFollower(backend())
    try:
        follow(every.poll, lambda: False, interval, terminal, show_thread=True)
    except (KeyboardInterrupt, Interrupted):
        return  # Ctrl-C is how --all ends


def export(
    thread: ThreadArg,
    html: Annotated[
        Path,
        typer.Option(
            "--html",
            metavar="FILE",
            help="Write the thread page to FILE ('-' for stdout).",
            show_default=False,
        ),
    ],
) -> None:
    """Write the thread page as one self-contained HTML file (needs the ui extra).

    The file has the same content as the `uwf ui` thread page — graph, task, every step with
    its prompt, output, detail and turns — with its CSS and SVG inline and no script: it makes
    no request when opened, so a CI job can attach it as an artifact or mail it.
    Prints {"thread","file","bytes"}.
    """
    from uwf.web import require

    require()
    from uwf.web.pages import export_thread

    text = export_thread(backend(), thread)
    if str(html) == "-":
        sys.stdout.write(text)
        return
    from uwf.util import fsio

    data = text.encode("utf-8")
    fsio.atomic_write(html, data)
    exported: Exported = {"thread": thread, "file": str(html), "bytes": len(data)}
    emit(exported)
