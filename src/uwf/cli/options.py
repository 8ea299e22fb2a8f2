"""Options and helpers shared by every command group.

Commands stay thin: parse arguments, call one domain function with the backend (or the
storage root), and ``emit`` the plain data it returns. Errors are raised, never printed here.
No ``from __future__ import annotations`` in CLI modules: Typer would evaluate every string
annotation on every call.
"""

import contextlib
import inspect
import os
import sys
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import typer

from uwf.util.errors import InvalidInput, UsageError, UwfError, exit_code
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


class ListFormat(StrEnum):
    """``--format`` of the commands a person also reads at a terminal: JSON (the contract),
    YAML, or an aligned table (``thread list``, ``thread show``, ``thread steps``,
    ``workflow list``)."""

    json = "json"
    yaml = "yaml"
    table = "table"


TableFormatOpt = Annotated[
    ListFormat | None,
    typer.Option(
        "--format",
        help="Output encoding: json (compact, default), yaml, or table (aligned columns for "
        "a person; scripts should read json).",
        case_sensitive=False,
        show_default=False,
    ),
]


# A table: its header (None: none) and its rows (``uwf.cli.columns.table``).
Rows = tuple[list[str] | None, list[list[object]]]


def emit_listing(value: Any, fmt: ListFormat | None, rows: Callable[[], Rows]) -> None:
    """Print ``value`` as JSON or YAML (``emit``), or, with ``--format table``, the header and
    rows ``rows`` makes of it: the one table renderer of every listing."""
    if fmt is ListFormat.table:
        from uwf.cli.columns import table

        header, body = rows()
        typer.echo(table(body, header), nl=False)
        return
    emit(value, Format(fmt.value) if fmt is not None else None)


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
        help="Agent command line, split like a shell would (overrides config); "
        "python:<module:function> runs a Python agent in this process.",
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
        help="The thread's working directory: its agents start there (recorded with it; "
        "default: the current directory).",
        show_default=False,
    ),
]
NoCwdOpt = Annotated[
    bool,
    typer.Option(
        "--no-cwd",
        help="Record no working directory: its agents start wherever the step runs (a fleet "
        "whose machines do not share paths).",
    ),
]


def thread_cwd(cwd: str | None, no_cwd: bool) -> str | None:
    """The working directory a new thread records: ``--cwd``, else none with ``--no-cwd``,
    else the current directory (docs/format.md, "Working directories")."""
    if no_cwd:
        if cwd is not None:
            raise UsageError("--cwd and --no-cwd exclude each other")
        return None
    if cwd is not None:
        return cwd
    try:
        here = os.getcwd()
    except OSError:  # the directory was removed under us
        raise InvalidInput(
            "the current directory no longer exists: give the thread --cwd DIR (or --no-cwd)"
        ) from None
    shell = os.environ.get("PWD", "")  # the path as the shell shows it, symbolic links kept
    try:
        return shell if shell and os.path.samefile(shell, here) else here
    except OSError:
        return here


WorkflowFilterOpt = Annotated[
    str | None,
    typer.Option(
        "--workflow",
        help="Only threads of this workflow: a name (any of its versions) or a hash.",
        show_default=False,
    ),
]

# The filters of `thread list`, shared by the bulk actions (cli/thread/bulk.py): one
# declaration, so that a filter means the same wherever it selects threads.
StatusFilterOpt = Annotated[
    str | None,
    typer.Option(
        "--status",
        help="idle, running, waiting, failing, failed, completed, killed, max_rounds "
        "(comma-separated), or active (the first five).",
        show_default=False,
    ),
]
AfterOpt = Annotated[
    str | None,
    typer.Option(
        "--after",
        help="Created after: ISO date/time or relative (7d, 24h, 30m).",
        show_default=False,
    ),
]
BeforeOpt = Annotated[
    str | None,
    typer.Option("--before", help="Created before: ISO date/time or relative.", show_default=False),
]
ParentOpt = Annotated[
    str | None,
    typer.Option(
        "--parent",
        help="Only the child threads this thread's fan-outs started (active and archived).",
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
    app: typer.Typer,
    function: "Callable[..., Any] | str",
    name: str,
    current: str,
    hidden: bool = True,
    version: str = "v0.5.0",
) -> None:
    """Register ``function`` in ``app`` under ``name`` (``"thread exec"``: its v0.5.0 name;
    ``"workflow validate"``: uwf 0.8's) as an alias of ``current``: its help is one line
    naming the current name, then the command's full help (``function``'s docstring); command
    listings say ``Alias of `uwf <current>`.`` A "module:function" string is imported only
    when the command is built (``App.lazy``, cli/lazy.py)."""
    line = f"Alias of `uwf {current}`, the current name (`uwf {name}` is its {version} name)."
    short = f"Alias of `uwf {current}`."

    def settings(command: Callable[..., Any]) -> dict[str, Any]:
        help_text = f"{line}\n\n{inspect.getdoc(command) or ''}"
        return {"hidden": hidden, "help": help_text, "short_help": short}

    if isinstance(function, str):
        from uwf.cli.lazy import App

        if not isinstance(app, App):
            raise TypeError("a command named by its module is registered on a lazy App")
        app.lazy(name.split()[-1], function, settings)
    else:
        app.command(name.split()[-1], **settings(function))(function)


def root() -> Path:
    """This machine's storage root (docs/format.md, "Storage root"): config, .env, logs."""
    return storage_root()


class _Invocation:
    """The running command's root options (``uwf --format … --store …``) and the backends it
    opened, set by the root callback (``begin_invocation``) and closed with its context."""

    root_options: ClassVar[dict[str, Any]] = {}
    opened: ClassVar[list["Backend"]] = []
    active: ClassVar[bool] = False


def begin_invocation(ctx: typer.Context, fmt: Format | None, store: str | None) -> None:
    """Called by the root callback before any command runs: remember the root options, and
    close what the command opens (connections of a PostgreSQL backend) when it ends."""
    _Invocation.root_options = {"format": fmt.value if fmt is not None else None, "store": store}
    _Invocation.active = True
    ctx.call_on_close(_end_invocation)


def _end_invocation() -> None:
    opened, _Invocation.opened = _Invocation.opened, []
    _Invocation.root_options, _Invocation.active = {}, False
    for b in opened:
        b.close()


def backend() -> "Backend":
    """The storage backend of this invocation (``uwf.backend.open_backend`` chooses it from
    ``--store``, ``$UWF_STORE``, ``store:`` in config.yaml, or the storage root)."""
    from uwf.backend import open_backend
    from uwf.util import secrets

    store = _Invocation.root_options.get("store")
    opened = open_backend(store)
    secrets.register(
        lambda: _secret_values(opened.root, store), stamp=lambda: _secrets_stamp(opened.root)
    )  # read on first redaction
    if _Invocation.active:
        _Invocation.opened.append(opened)
    return opened


def _secrets_stamp(root: Path) -> object:
    from uwf.config.secrets import stamp

    return stamp(root)


def _secret_values(root: Path, store: str | None) -> list[str]:
    from uwf.config.secrets import secret_values

    return secret_values(root, store)


def resolve_format(fmt: Format | None, default: Format = Format.json) -> Format:
    """The per-command ``--format`` if given, else the global one, else ``default``."""
    if fmt is not None:
        return fmt
    found = _Invocation.root_options.get("format")
    return Format(found) if found is not None else default


def render(value: Any, fmt: Format | None = None, default: Format = Format.json) -> str:
    from uwf.util import jsonfmt  # not at import: `uwf --help` prints no JSON

    if resolve_format(fmt, default) is Format.yaml:
        return jsonfmt.dump_yaml(value)
    return jsonfmt.dumps(value) + "\n"


def emit(value: Any, fmt: Format | None = None, default: Format = Format.json) -> None:
    """Print one structured result on stdout (``default``: the encoding when no ``--format``)."""
    typer.echo(render(value, fmt, default), nl=False)


def read_input(path: str, what: str) -> str:
    """The UTF-8 text of a file given on the command line, ``-`` for stdin (the one reader of
    "a file or ``-``"), or one line naming ``what`` and why: ``cannot read <what> <path>:
    <reason>``."""
    from uwf.util.errors import InvalidInput

    try:
        if path == "-":
            return sys.stdin.buffer.read().decode("utf-8")
        return Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        reason = "not UTF-8 text"
    except OSError as exc:
        reason = exc.strerror or str(exc)
    where = "from stdin" if path == "-" else path
    raise InvalidInput(f"cannot read {what} {where}: {reason}")


def emit_markdown(text: str) -> None:
    """Print markdown as is, with exactly one final newline; on a terminal with control
    characters escaped (it quotes agents: an escape sequence is shown, never obeyed)."""
    from uwf.util.terminal import is_terminal, visible

    if is_terminal(sys.stdout):
        text = visible(text)
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
    """Print a routing graph (``uwf.engine.views.graph.Diagram``) as Mermaid or DOT text."""
    from uwf.engine.views.graph import render

    typer.echo(render(graph, fmt.value), nl=False)


def list_page(
    skip: str, take: str | None, offset: str | None, limit: str | None
) -> tuple[int, int]:
    """A listing's page (``thread list``): how many newest threads to skip and at most how
    many to show (0: all), from ``--skip``/``--take`` or uwf 0.8's ``--offset``/``--limit``."""
    from uwf.util.numbers import as_count

    if offset is not None and skip != "0":
        raise UsageError("--offset is --skip by uwf 0.8's name: give one of them")
    if limit is not None and take is not None:
        raise UsageError("--limit is --take by uwf 0.8's name: give one of them")
    skip_name, skip_text = ("--offset", offset) if offset is not None else ("--skip", skip)
    take_name, take_text = ("--limit", limit) if limit is not None else ("--take", take)
    skip_n = as_count(skip_text)
    if skip_n is None:
        raise UsageError(f"{skip_name} must be a non-negative integer")
    if take_text is None:
        return skip_n, 0
    take_n = as_count(take_text)
    if not take_n:
        raise UsageError(f"{take_name} must be a positive integer")
    return skip_n, take_n
