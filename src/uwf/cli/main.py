"""The ``uwf`` entry point: builds the app and prints every error exactly once.

``main()`` runs the Typer app in non-standalone mode so that it alone decides what reaches
the terminal: a UwfError prints ``error: <message>`` and exits 1 (its exit code); a usage
error prints ``error: <message>`` and exits 2; anything else is a bug, shown as one line
unless ``UWF_DEBUG=1`` asks for the traceback.
"""

import gc
import os
import signal
import sys
from typing import Annotated, Any

# Typer's import makes ~100,000 objects that live as long as the process, and the collector
# would walk them again and again while they are made (~12 M instructions, ~5 % of every
# call: docs/performance.md, "Processes and start-up"). So it pauses for the imports below;
# what they made is then frozen (never walked again) and the collector resumes as it was.
_COLLECTING = gc.isenabled()
gc.disable()
import typer  # noqa: E402

from uwf import __version__  # noqa: E402
from uwf.cli.lazy import HelpInstead, Root  # noqa: E402
from uwf.cli.options import FormatOpt, begin_invocation  # noqa: E402
from uwf.util.errors import (  # noqa: E402
    INTERNAL_EXIT,
    Interrupted,
    UwfError,
    internal_error,
    report,
)

gc.freeze()
if _COLLECTING:
    gc.enable()

HELP = """Stateless workflow engine for teams of LLM agents.

A workflow is a YAML file of roles and a status-based routing graph. A thread is an immutable
chain of content-addressed nodes; `uwf thread step` runs exactly one moderator -> agent ->
extract cycle and exits.

Data lives under $UNCAGED_WORKFLOW_STORAGE_ROOT, else $WORKFLOW_STORAGE_ROOT, else
~/.uncaged/workflow; threads, nodes and the registry can live in PostgreSQL instead
(--store, $UWF_STORE or store: in config.yaml; docs/scale-out.md)."""

# Every command of `uwf`, one line each: name -> ("module:app" of a group or "module:function"
# of a command, its one-line help).
# A module is imported only when its command runs (see cli/lazy.py and docs/architecture.md);
# the help must be the first paragraph of the command's own help (tests/test_cli_lazy.py).
COMMANDS = {
    "setup": ("uwf.cli.setup:setup", "Configure a provider, a model and the default agent."),
    "ui": (
        "uwf.cli.ui:ui",
        "Serve a local web page of threads and workflows (read-only; Ctrl-C stops it).",
    ),
    "workflow": (
        "uwf.cli.workflow:app",
        "Store, show and list workflows, and move the registry between their versions.",
    ),
    "thread": ("uwf.cli.thread:app", "Start, step, inspect, fork and kill threads."),
    "step": ("uwf.cli.step:app", "Inspect and fork individual steps."),
    "cas": ("uwf.cli.cas:app", "Inspect and write the content-addressed store directly."),
    "log": (
        "uwf.cli.log:app",
        "Read and prune the process debug log (<root>/logs/YYYY-MM-DD.jsonl, one file per UTC "
        "day).",
    ),
    "config": (
        "uwf.cli.config:app",
        "Read and change config.yaml (the storage root's) by dotted key.",
    ),
    "store": (
        "uwf.cli.store:app",
        "Create, migrate and copy stores (a directory or a postgresql:// URL).",
    ),
    "worker": (
        "uwf.cli.worker:app",
        "Step threads until stopped: `thread step --next` in a loop, with back-off.",
    ),
    "eval": (
        "uwf.cli.evals:app",
        "Measure workflows on tasks: run them, list the runs, report on them.",
    ),
    "skill": (
        "uwf.cli.skill:app",
        "Texts for agents: the CLI reference embedded in every role prompt.",
    ),
}


class UwfRoot(Root):
    table = COMMANDS


def make_app(completion: bool) -> typer.Typer:
    """The root app; with Typer's ``--install-completion`` and ``--show-completion`` when
    ``completion`` (see ``root_command``)."""
    root = typer.Typer(
        name="uwf",
        cls=UwfRoot,
        help=HELP,
        no_args_is_help=True,
        add_completion=completion,
        rich_markup_mode=None,
        pretty_exceptions_enable=False,
    )
    root.callback()(_root)
    return root


def _version(value: bool) -> None:
    if value:
        typer.echo(f"uwf {__version__}")
        raise typer.Exit()


def _root(
    ctx: typer.Context,
    fmt: FormatOpt = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            metavar="URL",
            help="The store: a postgresql:// URL or a directory (default: $UWF_STORE, else "
            "store: in config.yaml, else the storage root).",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", help="Print the version and exit.", is_eager=True, callback=_version
        ),
    ] = False,
) -> None:
    begin_invocation(ctx, fmt, store)


app = make_app(completion=False)

# Commands that show the root's own options (the CLI reference lists them all).
SHOWS_ROOT_OPTIONS = ("skill",)


def _fail(message: str, code: int) -> int:
    from uwf.util.errors import printable

    sys.stderr.write(f"error: {printable(message)}\n")
    sys.stderr.flush()
    return code


def root_command(argv: list[str]) -> Any:
    """The root click command for ``argv``.

    It has ``--install-completion`` and ``--show-completion`` (Typer's own; README,
    "Shell completion") when they can matter: the root's options or help are asked for (the
    first argument is an option, or there is none), a command shows them (``uwf skill cli``)
    or a shell asks for completions (``$_UWF_COMPLETE``; building them also registers
    Typer's shell classes). A command (``uwf thread show …``) does not pay for building them.
    """
    completion = (
        not argv
        or argv[0].startswith("-")
        or argv[0] in SHOWS_ROOT_OPTIONS
        or bool(os.environ.get("_UWF_COMPLETE"))
    )
    return typer.main.get_command(make_app(completion) if completion else app)


SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")  # the shells Typer has scripts for


def show_completion(shell: str) -> int:
    """``uwf --show-completion SHELL``: the completion script of the shell named, whatever
    shell runs uwf (where Typer detects the shell its option takes no value, and the
    argument was ignored). The script comes from the shell-completion protocol itself:
    ``$_UWF_COMPLETE=source_<shell>`` asks the command for it."""
    if shell not in SHELLS:
        return _fail(f"unknown shell: {shell} (one of: {', '.join(SHELLS)})", 2)
    import contextlib
    import io

    os.environ["_UWF_COMPLETE"] = f"source_{shell}"
    out = io.StringIO()
    code: object = 0
    with contextlib.redirect_stdout(out):
        try:
            root_command([]).main(args=[], prog_name="uwf")
        except SystemExit as exc:  # the protocol's answer ends with sys.exit
            code = exc.code
    typer.echo(out.getvalue().strip())  # zsh's "#compdef" must be the first line
    return code if isinstance(code, int) else 0


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (no sys.exit, for tests and embedding)."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) == 2 and args[0] == "--show-completion" and not args[1].startswith("-"):
        return show_completion(args[1])
    command = root_command(sys.argv[1:] if argv is None else argv)
    try:
        result = command.main(args=argv, prog_name="uwf", standalone_mode=False)
    except (UwfError, Interrupted) as exc:
        return report(exc)
    except typer.Abort:
        return _fail("aborted", 130)
    except KeyboardInterrupt:  # SIGINT outside ``interrupt_on_signals`` (embedding, tests)
        return report(Interrupted(signal.SIGINT))
    except HelpInstead as exc:  # a group called without a subcommand
        sys.stderr.write(exc.text + "\n")
        return 2
    except typer.TyperException as exc:  # click's errors: usage (2), files
        return _fail(" ".join(exc.format_message().split()), exc.exit_code)
    except BrokenPipeError:
        return 0
    except Exception as exc:
        if os.environ.get("UWF_DEBUG") == "1":
            raise
        return _fail(internal_error(exc), INTERNAL_EXIT)
    return result if isinstance(result, int) else 0


def main() -> None:
    from uwf.util.signals import interrupt_on_signals

    with interrupt_on_signals():
        code = run(sys.argv[1:])
    # The process ends here. Freezing what is alive spares the interpreter's full garbage
    # collection at exit, which walks every object Typer and uwf created: ~7 ms of every call
    # (docs/performance.md, "Start-up"). Nothing in uwf relies on the collector to finish a
    # write (files are closed and fsynced explicitly; stdout and stderr are flushed at exit).
    gc.freeze()
    sys.exit(code)


if __name__ == "__main__":
    main()
