"""`uwf store …`: create or migrate a store's schema, and copy one store into another."""

from typing import TYPE_CHECKING, Annotated

import typer

from uwf.cli.lazy import App
from uwf.cli.options import FormatOpt, backend, emit

if TYPE_CHECKING:
    from uwf.util.outputs import StoreInitialised

app = App(
    help="Create, migrate and copy stores (a directory or a postgresql:// URL).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

StoreArg = Annotated[
    str,
    typer.Argument(help="A directory (a storage root) or a postgresql:// URL.", show_default=False),
]


@app.command()
def init(fmt: FormatOpt = None) -> None:
    """Create the store's schema, or migrate it to this uwf's version (also done on first use).

    Prints {"store","schema","from"}: the store (never with its password), the schema version
    it is at now and the one it was at (0: it was empty).
    """
    storage = backend()
    versions = storage.init()
    shown: StoreInitialised = {
        "store": storage.name,
        "schema": versions["to"],
        "from": versions["from"],
    }
    emit(shown, fmt)


@app.command()
def copy(
    source: StoreArg,
    target: StoreArg,
    overwrite: Annotated[
        bool,
        typer.Option(
            "--overwrite",
            help="Set registry entries that name another version in TO to FROM's (threads "
            "that differ are still reported and left as they are).",
        ),
    ] = False,
    fmt: FormatOpt = None,
) -> None:
    """Copy every node, active thread, archived thread and registry entry of FROM into TO.

    Idempotent: a second run copies nothing, and a run cut short (a crash, Ctrl-C) is finished
    by running it again. Nodes keep their timestamps. TO is checked against FROM afterwards.
    A thread that differs in TO (another head), and a registry entry that names another
    workflow version in TO (unless --overwrite), is reported and left as it is. Prints
    {"from","to","nodes","registry","history","threads","verified"} with
    {"copied","present"} counts; progress goes to stderr.
    """
    from uwf.backend import open_backend
    from uwf.engine.store.copy import copy_store

    with open_backend(source) as src, open_backend(target) as dst:
        result = copy_store(
            src,
            dst,
            lambda line: typer.echo(f"store copy: {line}", err=True),
            overwrite=overwrite,
        )
    emit(result, fmt)
