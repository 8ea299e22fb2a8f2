"""`uwf step …`: the v0.5.0 names of the step commands, plus `step read` and
`step artifacts`."""

from pathlib import Path
from typing import Annotated

import typer

from uwf.cli import thread as thread_cli
from uwf.cli.lazy import App
from uwf.cli.options import (
    FormatOpt,
    QuotaOpt,
    StepHashArg,
    add_alias,
    backend,
    emit,
    emit_markdown,
)

app = App(help="Inspect and fork individual steps.", no_args_is_help=True, rich_markup_mode=None)

for name, current, function in (
    ("list", "thread steps", thread_cli._steps),
    ("show", "thread step-details", thread_cli._step_details),
    ("fork", "thread fork", thread_cli._fork),
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
