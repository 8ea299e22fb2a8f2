"""`uwf step …`: the v0.5.0 names of the step commands, plus `step read`."""

import typer

from uwf.cli import thread as thread_cli
from uwf.cli.options import QuotaOpt, backend, emit_markdown

app = typer.Typer(
    help="Inspect and fork individual steps.", no_args_is_help=True, rich_markup_mode=None
)

app.command("list", help="Alias of `thread steps`.")(thread_cli._steps)
app.command("show", help="Alias of `thread step-details`.")(thread_cli._step_details)
app.command("fork", help="Alias of `thread fork`.")(thread_cli._fork)


@app.command()
def read(
    step_hash: thread_cli.StepHashArg,
    quota: QuotaOpt = "4000",
) -> None:
    """Render one step's turns as markdown, newest turns first to fit the quota.

    Each turn is headed with its number and who spoke (assistant, tool, user), then its text
    and every tool call it made, with the call's arguments.
    """
    from uwf.engine.read import parse_quota, read_step

    emit_markdown(read_step(backend(), step_hash, parse_quota(quota)))
