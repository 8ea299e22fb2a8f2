"""`uwf skill …`: texts for agents and the people who drive them."""

import typer

from uwf.cli.lazy import App
from uwf.cli.options import emit_markdown

app = App(
    help="Texts for agents: the CLI reference embedded in every role prompt.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command("cli")
def cli(ctx: typer.Context) -> None:
    """Print the uwf CLI reference (markdown, generated from the commands themselves)."""
    from uwf.cli.reference import render_reference

    emit_markdown(render_reference(ctx.find_root().command))
