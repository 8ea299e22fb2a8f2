"""`uwf log …`: read and prune the process debug log (``<root>/logs/YYYY-MM-DD.jsonl``)."""

from typing import Annotated

import typer

from uwf.cli.lazy import App
from uwf.cli.options import FormatOpt, emit, emit_stream, root
from uwf.util.errors import Interrupted

app = App(
    help="Read and prune the process debug log (<root>/logs/YYYY-MM-DD.jsonl, one file per "
    "UTC day).",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command("list")
def list_(fmt: FormatOpt = None) -> None:
    """List the log files with their size, newest first."""
    from uwf.engine.local import logs

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
    take: Annotated[
        str | None,
        typer.Option(
            "--take", help="Only the last N entries (after the filters).", show_default=False
        ),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Then keep printing new entries as they are written, until Ctrl-C.",
        ),
    ] = False,
    fmt: FormatOpt = None,
) -> None:
    """Show log entries, oldest first; filters combine.

    Prints a JSON array; with --follow one JSON object per line (JSON Lines; --format yaml:
    one YAML document per entry) as entries are written, until Ctrl-C or SIGTERM (exit 0).
    """
    from uwf.engine.local import logs
    from uwf.util.numbers import positive_int

    n = positive_int(take, "--take") if take is not None else None
    if not follow:
        emit(logs.show_logs(root(), thread=thread, process=process, date=date, take=n), fmt)
        return
    entries = logs.follow_logs(root(), thread=thread, process=process, date=date, take=n)
    try:
        for entry in entries:
            emit_stream(entry, fmt)
    except (KeyboardInterrupt, Interrupted):
        return  # Ctrl-C is how --follow ends


@app.command("clean")
def clean(
    before: Annotated[
        str, typer.Option("--before", help="Delete the files of days before this (YYYY-MM-DD).")
    ],
    fmt: FormatOpt = None,
) -> None:
    """Delete the log files of days before a date."""
    from uwf.engine.local import logs

    emit(logs.clean_logs(root(), before=before), fmt)
