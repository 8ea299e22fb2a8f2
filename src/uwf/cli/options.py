"""Options and helpers shared by every command group.

Commands stay thin: parse arguments, call one domain function with the backend (or the
storage root), and ``emit`` the plain data it returns. Errors are raised, never printed here.
No ``from __future__ import annotations`` in CLI modules: Typer would evaluate every string
annotation on every call.
"""

import contextlib
import inspect
import sys
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from uwf.util.errors import UwfError, exit_code
from uwf.util.root import storage_root

if TYPE_CHECKING:
    from uwf.backend.base import Backend


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

# Shell completion of arguments (cli/complete.py, imported only when a shell asks).


def complete_threads(incomplete: str) -> list[tuple[str, str]]:
    from uwf.cli import complete

    return complete.threads(incomplete)


def complete_workflows(incomplete: str) -> list[tuple[str, str]]:
    from uwf.cli import complete

    return complete.workflows(incomplete)


def complete_agents(incomplete: str) -> list[tuple[str, str]]:
    from uwf.cli import complete

    return complete.agents(incomplete)


def with_completion_options(command: Any) -> Any:
    """The root ``command`` with Typer's ``--install-completion`` and ``--show-completion``
    (README, "Shell completion"); building them also registers Typer's shell classes."""
    if not any(param.name == "install_completion" for param in command.params):
        command.params.extend(typer.main.get_install_completion_arguments())
    return command


ThreadArg = Annotated[
    str,
    typer.Argument(
        help="Thread id (a 26-character ULID).",
        show_default=False,
        autocompletion=complete_threads,
    ),
]
StepHashArg = Annotated[
    str, typer.Argument(help="Hash of a StepNode (13 characters).", show_default=False)
]

AgentOpt = Annotated[
    str | None,
    typer.Option(
        "--agent",
        help="Agent command line, split like a shell would (overrides config).",
        show_default=False,
        autocompletion=complete_agents,
    ),
]
TimeoutOpt = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        help="Seconds before the agent's process group is killed "
        "(default: config agentTimeout, else none).",
        show_default=False,
    ),
]
CwdOpt = Annotated[
    str | None,
    typer.Option(
        "--cwd",
        metavar="DIR",
        help="The thread's working directory: its agents start there (recorded with it).",
        show_default=False,
    ),
]
WorkflowFilterOpt = Annotated[
    str | None,
    typer.Option(
        "--workflow",
        help="Only threads of this workflow: a name (any of its versions) or a hash.",
        show_default=False,
    ),
]
WaitOpt = Annotated[
    bool,
    typer.Option(
        "--wait", help="Wait for a step already running on this thread instead of failing."
    ),
]

QuotaOpt = Annotated[
    str,
    typer.Option("--quota", help="Character budget of the rendered markdown.", show_default=True),
]


def add_alias(
    app: typer.Typer, function: Callable[..., Any], name: str, current: str, hidden: bool = True
) -> None:
    """Register ``function`` in ``app`` under ``name`` (``"thread exec"``: its v0.5.0 name) as
    an alias of ``current``: its help is one line naming the current name, then the command's
    full help (``function``'s docstring); command listings say ``Alias of `uwf <current>`.``"""
    line = f"Alias of `uwf {current}`, the current name (`uwf {name}` is its v0.5.0 name)."
    help_text = f"{line}\n\n{inspect.getdoc(function) or ''}"
    short = f"Alias of `uwf {current}`."
    app.command(name.split()[-1], hidden=hidden, help=help_text, short_help=short)(function)


def root() -> Path:
    """This machine's storage root (docs/format.md, "Storage root"): config, .env, logs."""
    return storage_root()


def _context() -> Any:
    """The click context of the running command, None outside one. Typer (pinned) has no
    public name for it: ``typer.main`` imports click's ``get_current_context`` without
    re-exporting it, hence the one ignore."""
    return typer.main.get_current_context(silent=True)  # type: ignore[attr-defined]


def _global(key: str) -> Any:
    """A root option (``uwf --format … --store …``) of the running command, None if unset."""
    ctx = _context()
    while ctx is not None:
        if isinstance(ctx.obj, dict) and ctx.obj.get(key) is not None:
            return ctx.obj[key]
        ctx = ctx.parent
    return None


def backend() -> "Backend":
    """The storage backend of this invocation (``uwf.backend.open_backend`` chooses it from
    ``--store``, ``$UWF_STORE``, ``store:`` in config.yaml, or the storage root)."""
    from uwf.backend import open_backend

    opened = open_backend(_global("store"))
    ctx = _context()
    if ctx is not None:
        ctx.call_on_close(opened.close)  # connections of a PostgreSQL backend
    return opened


def resolve_format(fmt: Format | None, default: Format = Format.json) -> Format:
    """The per-command ``--format`` if given, else the global one, else ``default``."""
    if fmt is not None:
        return fmt
    found = _global("format")
    return Format(found) if found is not None else default


def render(value: Any, fmt: Format | None = None, default: Format = Format.json) -> str:
    from uwf.util import jsonfmt  # not at import: `uwf --help` prints no JSON

    if resolve_format(fmt, default) is Format.yaml:
        return jsonfmt.dump_yaml(value)
    return jsonfmt.dumps(value) + "\n"


def emit(value: Any, fmt: Format | None = None, default: Format = Format.json) -> None:
    """Print one structured result on stdout (``default``: the encoding when no ``--format``)."""
    typer.echo(render(value, fmt, default), nl=False)


def read_text_file(path: Path) -> str:
    """A UTF-8 text file given on the command line, or one ``error:`` line saying why not."""
    from uwf.util.errors import InvalidInput

    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidInput(f"cannot read {path}: not UTF-8 text") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc.strerror or exc}") from None


def emit_markdown(text: str) -> None:
    """Print markdown as is, with exactly one final newline."""
    typer.echo(text if text.endswith("\n") else text + "\n", nl=False)


def emit_stream(value: Any, fmt: Format | None = None) -> None:
    """Print one item of a stream as it happens: a JSON line, or a YAML document (``---``)."""
    from uwf.util import jsonfmt

    if resolve_format(fmt) is Format.yaml:
        typer.echo("---\n" + jsonfmt.dump_yaml(value), nl=False)
    else:
        typer.echo(jsonfmt.dumps(value))
    sys.stdout.flush()


@contextlib.contextmanager
def loop_contract() -> Iterator[None]:
    """Errors raised in the block exit with their loop-contract code (docs/errors.md):
    3 not active, 4 busy, 5 agent failed. Only the commands that step threads use it."""
    try:
        yield
    except UwfError as exc:
        exc.exit_code = exit_code(exc, loop=True)
        raise


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
    """Print a routing graph (``uwf.engine.views.graph.Graph``) as Mermaid or DOT text."""
    from uwf.engine.views.graph import render

    typer.echo(render(graph, fmt.value), nl=False)
