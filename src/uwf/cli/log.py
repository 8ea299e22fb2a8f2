"""`uwf log …` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="log commands.", no_args_is_help=True, rich_markup_mode=None)
