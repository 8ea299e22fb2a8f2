"""Options and helpers shared by every command group.

Commands stay thin: parse arguments, call one domain function with the storage root, and
``emit`` the plain data it returns. Errors are raised, never printed here.
"""

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer

from uwf.util import jsonfmt
from uwf.util.root import storage_root


class Format(StrEnum):
    json = "json"
    yaml = "yaml"


FormatOpt = Annotated[
    Format | None,
    typer.Option(
        "--format",
        help="Output encoding: json (compact, default) or yaml.",
        case_sensitive=False,
        show_default=False,
    ),
]

QuotaOpt = Annotated[
    str,
    typer.Option("--quota", help="Character budget of the rendered markdown.", show_default=True),
]


def root() -> Path:
    """The storage root of this invocation (PORT §2)."""
    return storage_root()


def resolve_format(fmt: Format | None, default: Format = Format.json) -> Format:
    """The per-command ``--format`` if given, else the global one, else ``default``."""
    if fmt is not None:
        return fmt
    ctx = typer.main.get_current_context(silent=True)
    while ctx is not None:
        if isinstance(ctx.obj, dict) and ctx.obj.get("format") is not None:
            return Format(ctx.obj["format"])
        ctx = ctx.parent
    return default


def render(value: Any, fmt: Format | None = None, default: Format = Format.json) -> str:
    if resolve_format(fmt, default) is Format.yaml:
        return jsonfmt.dump_yaml(value)
    return jsonfmt.dumps(value) + "\n"


def emit(value: Any, fmt: Format | None = None, default: Format = Format.json) -> None:
    """Print one structured result on stdout (``default``: the encoding when no ``--format``)."""
    typer.echo(render(value, fmt, default), nl=False)


def emit_markdown(text: str) -> None:
    """Print markdown as is, with exactly one final newline."""
    typer.echo(text if text.endswith("\n") else text + "\n", nl=False)


class GraphFormat(StrEnum):
    mermaid = "mermaid"
    dot = "dot"


GraphFormatOpt = Annotated[
    GraphFormat,
    typer.Option(
        "--format",
        help="mermaid (a flowchart that GitHub renders in markdown) or dot (Graphviz).",
        case_sensitive=False,
    ),
]


def emit_graph(graph: Any, fmt: GraphFormat) -> None:
    """Print a routing graph (``uwf.engine.graph.Graph``) as Mermaid or DOT text."""
    from uwf.engine.graph import render

    typer.echo(render(graph, fmt.value), nl=False)
