"""`uwf step …`: the v0.5.0 names of the step commands, plus `step read`."""

import typer

from uwf.cli import thread as thread_cli
from uwf.cli.options import QuotaOpt, add_alias, backend, emit_markdown

app = typer.Typer(
    help="Inspect and fork individual steps.", no_args_is_help=True, rich_markup_mode=None
)

for name, current, function in (
    ("list", "thread steps", thread_cli._steps),
    ("show", "thread step-details", thread_cli._step_details),
    ("fork", "thread fork", thread_cli._fork),
):
    add_alias(app, function, f"step {name}", current, hidden=False)


@app.command()
def read(
    step_hash: thread_cli.StepHashArg,
    quota: QuotaOpt = "4000",
) -> None:
    """Render one step's turns as markdown, newest turns first to fit the quota."""
    from uwf.engine.read import parse_quota, read_step

    emit_markdown(read_step(backend(), step_hash, parse_quota(quota)))
