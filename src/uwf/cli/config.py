"""`uwf config list/get/set`: this machine's config.yaml by dotted key (docs/format.md,
"config.yaml and .env"). Thin wrappers over :mod:`uwf.engine.local.config`."""

from typing import Annotated

import typer

from uwf.cli.lazy import App
from uwf.cli.options import FormatOpt, TableFormatOpt, emit, emit_listing, root

app = App(
    help="""Read and change config.yaml (the storage root's) by dotted key.

A key names a setting by the path of names that leads to it: defaultAgent,
agents.mock.command, limits.providers.openai.concurrency; a name holding a dot is quoted:
models."gpt-4.1".name. What is printed has every known secret masked (***).""",
    no_args_is_help=True,
    rich_markup_mode=None,
)

KeyArg = Annotated[
    str,
    typer.Argument(
        metavar="KEY",
        help='A dotted key, e.g. agents.mock.command (quote a name with a dot: models."gpt-4.1").',
        show_default=False,
    ),
]


@app.command("list")
def list_(fmt: TableFormatOpt = None) -> None:
    """Print the whole of config.yaml ({} when there is none).

    JSON (or YAML) of the file's mapping; --format table prints one line per setting: its
    dotted key and its value (a list as JSON). Secrets are masked.
    """
    from uwf.engine.local import config

    document = config.list_config(root())

    def rows() -> tuple[list[str], list[list[object]]]:
        from uwf.util import jsonfmt

        shown: list[list[object]] = [
            [key, value if isinstance(value, str) else jsonfmt.dumps(value)]
            for key, value in config.flatten(document)
        ]
        return ["KEY", "VALUE"], shown

    emit_listing(document, fmt, rows)


@app.command("get")
def get(key: KeyArg, fmt: FormatOpt = None) -> None:
    """Print the value config.yaml sets at KEY, as JSON (null: a setting it leaves unset).

    A key config.yaml has no place for (a misspelt setting) is an error naming the keys
    allowed there. Secrets are masked.
    """
    from uwf.engine.local import config

    emit(config.get_value(root(), key), fmt)


@app.command("set", context_settings={"ignore_unknown_options": True})
def set_(
    key: KeyArg,
    value: Annotated[
        str,
        typer.Argument(
            metavar="VALUE",
            help='JSON when it parses as JSON (3, true, ["a", "b"], {"command": "x"}), else '
            "text; null removes the setting.",
            show_default=False,
        ),
    ],
    fmt: FormatOpt = None,
) -> None:
    """Set KEY to VALUE in config.yaml, checked before anything is written.

    The key must be a setting config.yaml's schema knows (a misspelt one is refused with the
    keys allowed there), and the whole file must then pass the checks every command makes;
    otherwise nothing is written and each problem is named. Missing mappings on the way are
    created; the file is rewritten atomically, keeping its mode (its comments are not kept: a
    warning says so). Prints {"key","value","previous"}, secrets masked.
    """
    from uwf.engine.local import config

    done, warnings = config.set_value(root(), key, value)
    for warning in warnings:
        typer.echo(f"warning: {warning}", err=True)
    emit(done, fmt)
