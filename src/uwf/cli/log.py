"""`uwf log …`: read and prune the process debug log (``<root>/logs/YYYY-MM-DD.jsonl``)."""

from typing import Annotated

import typer

from uwf.cli.options import FormatOpt, emit, root

app = typer.Typer(
    help="Read and prune the process debug log (<root>/logs/YYYY-MM-DD.jsonl, one file per "
    "UTC day).",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command("list")
def list_(fmt: FormatOpt = None) -> None:
    """List the log files with their size, newest first."""
    from uwf.engine import logs

    emit(logs.list_logs(root()), fmt)


@app.command("show")
def show(
    thread: Annotated[
        str | None, typer.Option("--thread", help="Only entries of this thread id.")
    ] = None,
    process: Annotated[
        str | None,
        typer.Option("--process", help="Only entries of this process (the pid field, exact)."),
    ] = None,
    date: Annotated[
        str | None, typer.Option("--date", help="Only the file of this day (YYYY-MM-DD).")
    ] = None,
    fmt: FormatOpt = None,
) -> None:
    """Show log entries, oldest first; filters combine."""
    from uwf.engine import logs

    emit(logs.show_logs(root(), thread=thread, process=process, date=date), fmt)


@app.command("clean")
def clean(
    before: Annotated[
        str, typer.Option("--before", help="Delete the files of days before this (YYYY-MM-DD).")
    ],
    fmt: FormatOpt = None,
) -> None:
    """Delete the log files of days before a date."""
    from uwf.engine import logs

    emit(logs.clean_logs(root(), before=before), fmt)
