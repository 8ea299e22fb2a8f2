"""`uwf workflow …`: store workflow files, show them, list them, and move between versions.

Thin wrappers over :mod:`uwf.engine.workflows.stored`; each prints one structured value. The seed's
``put`` is the command; ``add`` (the v0.5.0 name) is a hidden alias, as ``validate`` (uwf
0.8's name) is of ``check``.
"""

from pathlib import Path
from typing import Annotated

import typer

from uwf.cli.lazy import App
from uwf.cli.options import (
    FormatOpt,
    GraphFormat,
    GraphFormatOpt,
    TableFormatOpt,
    add_alias,
    backend,
    complete_workflows,
    emit,
    emit_graph,
    emit_listing,
)

app = App(
    help="""Store, show and list workflows, and move the registry between their versions.

A workflow is a YAML file with name, description, roles and a status-based graph:
graph[<role or $START>][<status>] = {role: <next role or $END>, prompt: <mustache template>}.
A file with `version: 1` (uwf 0.8's format) routes on $status, starts on $START.new (and
$START.resume) and has Liquid prompts. A workflow may be a folder with index.yaml, and may
!include files of its directory. `put` validates it completely, stores each role's schema
and the workflow in the CAS, and points the registry entry of its name at the new hash;
`check` validates without storing.""",
    no_args_is_help=True,
    rich_markup_mode=None,
)

FileArg = Annotated[
    Path,
    typer.Argument(
        metavar="FILE",
        help="Workflow YAML file (its stem, or its stem less .workflow, must equal its name), "
        "or a folder with index.yaml.",
        show_default=False,
    ),
]
NameArg = Annotated[
    str, typer.Argument(metavar="NAME", help="Workflow name.", autocompletion=complete_workflows)
]


@app.command("put")
def put(file: FileArg, fmt: FormatOpt = None) -> None:
    """Validate, store and register a workflow file.

    Prints {"name","hash"}.
    Every problem of the file is reported at once, one line each, and nothing is written
    unless the whole file is valid. Warnings go to stderr and do not stop the put: roles
    unreachable from $START, prompt variables the source role's output cannot have, a
    status without an enum. Putting the same file twice gives the same hash. `workflow
    check` runs the same checks without writing.
    """
    from uwf.engine.workflows import stored as workflows

    result = workflows.put_workflow(backend(), file)
    for warning in result.warnings:
        typer.echo(f"warning: {warning}", err=True)
    emit(result.output(), fmt)


add_alias(app, put, "workflow add", "workflow put")


FilesArg = Annotated[
    list[Path],
    typer.Argument(
        metavar="FILE...",
        help="Workflow YAML files (each stem, or stem less .workflow, must equal its name), or "
        "folders with index.yaml.",
        show_default=False,
    ),
]


@app.command("check")
def check(files: FilesArg, fmt: FormatOpt = None) -> None:
    """Run every check of `workflow put` on files, writing nothing.

    Prints [{"file","name","hash","problems"}]: "hash" is the hash `put` would give (null
    when the file is refused). Each problem is also one `error: <file>: <problem>` line on
    stderr, each warning a `warning: <file>: <warning>` line. Exits 1 when any file has a
    problem, else 0 (warnings included).
    """
    from uwf.engine.workflows import stored as workflows

    results = [workflows.check_workflow(file) for file in files]
    for result in results:
        for warning in result.warnings:
            typer.echo(f"warning: {result.file}: {warning}", err=True)
        for problem in result.problems:
            typer.echo(f"error: {result.file}: {problem}", err=True)
    emit([r.output() for r in results], fmt)
    if any(r.problems for r in results):
        raise typer.Exit(1)


add_alias(app, check, "workflow validate", "workflow check", version="uwf 0.8")


@app.command("show")
def show(
    ident: Annotated[
        str,
        typer.Argument(
            metavar="NAME|HASH",
            help="Registered name or Workflow node hash.",
            autocompletion=complete_workflows,
        ),
    ],
    source: Annotated[
        bool,
        typer.Option(
            "--source",
            help="Print the file as written instead (version-1 workflows keep their files; "
            "with !include each file follows a ==> <path> <== line).",
        ),
    ] = False,
    fmt: FormatOpt = None,
) -> None:
    """Show a stored workflow by name or hash.

    Prints {"hash","name","type","payload","timestamp"}.
    A registered name is looked up in the registry (not in project files); anything else must
    be the hash of a Workflow node. "name" is the registry name that points at the hash, or
    null for a version that is not current.
    """
    from uwf.engine.workflows import stored as workflows

    if source:
        typer.echo(workflows.workflow_source(backend(), ident), nl=False)  # byte for byte
        return
    emit(workflows.show_workflow(backend(), ident), fmt)


@app.command("list")
def list_(fmt: TableFormatOpt = None) -> None:
    """List project and registered workflows.

    Prints [{"name","hash","origin"}] (--format table: aligned columns).
    Project workflows come first (hash "(local)", origin "local", files not read): the
    .workflow/ and .workflows/ *.yaml|yml files of the current directory and every directory
    above it, the closest winning, as `thread start NAME` finds them. Then the registry
    entries they do not shadow (origin "global").
    """
    from uwf.engine.workflows import stored as workflows

    listed = workflows.list_workflows(backend(), Path.cwd())
    emit_listing(
        listed,
        fmt,
        lambda: (["NAME", "ORIGIN", "HASH"], [[w["name"], w["origin"], w["hash"]] for w in listed]),
    )


@app.command("history")
def history(name: NameArg, fmt: FormatOpt = None) -> None:
    """List the stored versions of a workflow.

    Prints [{"hash","timestamp","current"}], oldest first.
    Versions come from the CAS type index of the Workflow schema; "current" marks the one the
    registry points at.
    """
    from uwf.engine.workflows import stored as workflows

    emit(workflows.history(backend(), name), fmt)


@app.command("rollback")
def rollback(
    name: NameArg,
    hash: Annotated[
        str, typer.Argument(metavar="HASH", help="Hash of a stored version of that workflow.")
    ],
    fmt: FormatOpt = None,
) -> None:
    """Make a stored version the current one.

    Points the registry entry of NAME at HASH; prints {"name","hash","previous"}.
    The hash must be a Workflow node with that name (see `uwf workflow history NAME`).
    Threads already started keep the version they started with.
    """
    from uwf.engine.workflows import stored as workflows

    emit(workflows.rollback(backend(), name, hash), fmt)


@app.command("graph")
def graph(
    ident: Annotated[
        str,
        typer.Argument(
            metavar="NAME|HASH|FILE",
            help="Registered name, Workflow node hash, or a workflow YAML file (not stored).",
            autocompletion=complete_workflows,
        ),
    ],
    fmt: GraphFormatOpt = GraphFormat.mermaid,
) -> None:
    """Print a workflow's routing graph as Mermaid (default) or Graphviz DOT text.

    Nodes are $START, the roles and $END; there is one edge per status, labelled with it.
    Paste the Mermaid text into a ```mermaid block of a GitHub markdown file to see it drawn;
    render DOT with `dot -Tsvg`. A file is validated as `workflow put` does, and not stored.
    """
    from uwf.engine.views.timeline import workflow_graph

    emit_graph(workflow_graph(backend(), ident), fmt)
