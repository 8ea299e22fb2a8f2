"""`uwf step …`: the v0.5.0 names of the step commands, plus `step read`, `step artifacts`
and `step turns`."""

from pathlib import Path
from typing import Annotated

import typer

from uwf.cli.lazy import App
from uwf.cli.options import (
    FormatOpt,
    QuotaOpt,
    StepHashArg,
    ThreadArg,
    add_alias,
    backend,
    emit,
    emit_markdown,
    emit_stream,
)
from uwf.cli.thread import lifecycle, views

app = App(help="Inspect and fork individual steps.", no_args_is_help=True, rich_markup_mode=None)

for name, current, function in (
    ("list", "thread steps", lifecycle.steps),
    ("show", "thread step-details", views.step_details),
    ("fork", "thread fork", lifecycle.fork),
):
    add_alias(app, function, f"step {name}", current, hidden=False)


@app.command()
def read(
    step_hash: StepHashArg,
    quota: QuotaOpt = "4000",
) -> None:
    """Render one step's turns as markdown, newest turns first to fit the quota.

    Each turn is headed with its number and who spoke (assistant, tool, user), then its text
    and every tool call it made, with the call's arguments.
    """
    from uwf.engine.views.read import parse_quota, read_step

    emit_markdown(read_step(backend(), step_hash, parse_quota(quota)))


@app.command()
def artifacts(
    step_hash: StepHashArg,
    extract: Annotated[
        Path | None,
        typer.Option(
            "--extract",
            metavar="DIR",
            help="Write the artifacts under DIR (created if missing; no file is overwritten).",
            show_default=False,
        ),
    ] = None,
    fmt: FormatOpt = None,
) -> None:
    """List the files a step produced (its artifacts), or write them back with --extract.

    Prints [{"path","hash","size"}] (with --extract, each also has "file": where it was
    written). Text artifacts are Text nodes, anything else Blob nodes; both come back byte
    for byte.
    """
    from uwf.engine.threads.longthreads import extract_artifacts, step_artifacts

    if extract is None:
        emit(step_artifacts(backend(), step_hash), fmt)
    else:
        emit(extract_artifacts(backend(), step_hash, extract), fmt)


@app.command()
def turns(
    thread: ThreadArg,
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Follow the step in flight (or the next one to start) and print each turn as "
            "its agent writes it; exit when that step ends.",
        ),
    ] = False,
    interval: Annotated[
        float, typer.Option("--interval", help="Seconds between two polls (with --live).")
    ] = 0.25,
    fmt: FormatOpt = None,
) -> None:
    """Print the turns of a thread's step in flight, one JSON line each.

    Each line: {"thread","step","role","running","turn"}: the step's number and role, whether
    the turn was read from the running step (true) or from its landed detail (false), and the
    turn ({"index","role","content","toolCalls","reasoning","truncated"}, the last three when
    set). Without --live: the turns written so far, or with no step in flight those of the
    thread's last step. With --live it follows the step in flight — or waits for the next
    one to start — prints each turn as it is written and exits 0 when that step ends (landed
    or not) or the thread ends; Ctrl-C stops it. uwf-builtin writes each turn as it goes,
    other agents when their run ends; a step run on another machine shows its turns there,
    and here once it lands.
    """
    from uwf.util.errors import Interrupted, InvalidInput

    if not 0 < interval <= 60:
        raise InvalidInput(f"--interval must be a number of seconds in (0, 60], got: {interval}")
    from uwf.engine.views import live as follow

    storage = backend()
    if not live:
        for line in follow.turns_now(storage, thread):
            emit_stream(line, fmt)
        return
    import time

    follower = follow.TurnFollower(storage, thread)
    try:
        while True:
            for line in follower.poll():
                emit_stream(line, fmt)
            if follower.ended or follower.gone:
                return
            time.sleep(interval)
    except (KeyboardInterrupt, Interrupted):
        return  # Ctrl-C is how a wait for a step ends
    finally:
        follower.close()
