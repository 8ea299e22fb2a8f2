"""`uwf cas …`: read and write nodes of the content-addressed store directly.

Thin wrappers over :mod:`uwf.engine.store.cas`; each prints one structured value.
"""

from typing import TYPE_CHECKING, Annotated

import typer

from uwf.cli.lazy import App
from uwf.cli.options import FormatOpt, backend, emit

if TYPE_CHECKING:
    from uwf.util.outputs import Exists

app = App(
    help="""Inspect and write the content-addressed store directly.

Every node is {type, payload, timestamp}; its hash is 13 upper-case Crockford Base32
characters derived from its type and payload, and its type is the hash of the JSON Schema
that describes the payload.""",
    no_args_is_help=True,
    rich_markup_mode=None,
)

schema_app = App(
    help="List and show the JSON Schemas stored in the CAS.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(schema_app, name="schema")

HashArg = Annotated[
    str, typer.Argument(metavar="HASH", help="Node hash (13 Crockford Base32 characters).")
]


@app.command("get")
def get(
    hash: HashArg,
    timestamp: Annotated[
        bool, typer.Option("--timestamp", help="Include the time the node was first stored.")
    ] = False,
    fmt: FormatOpt = None,
) -> None:
    """Print a node as {"type","payload"} (with --timestamp, also "timestamp").

    Fails with "Node not found" when no node has this hash, and reports a node file whose
    content does not hash to its name as corrupt.
    """
    from uwf.engine.store import cas as casops

    emit(casops.get(backend(), hash, timestamp), fmt)


@app.command("put")
def put(
    type_hash: Annotated[
        str, typer.Argument(metavar="TYPE_HASH", help="Hash of the schema node to store under.")
    ],
    data: Annotated[
        str,
        typer.Argument(metavar="DATA", help="Payload as inline JSON, or a path to a JSON file."),
    ],
    fmt: FormatOpt = None,
) -> None:
    """Validate a JSON payload against a stored schema and store it; print {"hash"}.

    DATA is parsed as inline JSON first and otherwise read as a JSON file. The type must be
    the hash of a stored schema (or the meta-schema, to store a new schema), and the payload
    must satisfy it: nothing is written otherwise. Storing the same payload twice returns
    the same hash.
    """
    from uwf.engine.store import cas as casops

    emit(casops.put(backend(), type_hash, data), fmt)


@app.command("put-text")
def put_text(
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The text to store.")],
    fmt: FormatOpt = None,
) -> None:
    """Store a string under the Text schema; print {"hash"}."""
    from uwf.engine.store import cas as casops

    emit(casops.put_text(backend(), text), fmt)


@app.command("has")
def has(
    hash: Annotated[
        str, typer.Argument(metavar="HASH", help="Hash to look for (any string is accepted).")
    ],
    fmt: FormatOpt = None,
) -> None:
    """Print {"exists":true|false}; exit 1 when the node is absent.

    A malformed hash is simply absent: it is never an error.
    """
    from uwf.engine.store import cas as casops

    exists = casops.has(backend(), hash)
    shown: Exists = {"exists": exists}
    emit(shown, fmt)
    if not exists:
        raise typer.Exit(1)


@app.command("refs")
def refs(hash: HashArg, fmt: FormatOpt = None) -> None:
    """Print {"refs":[…]}: the hashes a node refers to, as its schema marks them.

    A reference is a string at a schema location with "format": "cas_ref"; the type link is
    not a reference.
    """
    from uwf.engine.store import cas as casops

    emit(casops.refs(backend(), hash), fmt)


@app.command("walk")
def walk(hash: HashArg, fmt: FormatOpt = None) -> None:
    """Print {"hashes":[…]}: every node reachable from HASH, breadth-first, root first.

    Missing nodes are skipped (a missing root gives an empty list); schemas are not followed.
    """
    from uwf.engine.store import cas as casops

    emit(casops.walk(backend(), hash), fmt)


@app.command("reindex")
def reindex(fmt: FormatOpt = None) -> None:
    """Rebuild the type index from the nodes (loose and packed); print the counts.

    First writes again the index of a pack that lost it, from the pack's records ("repaired":
    how many). Reads every node, so it takes time proportional to the size of the store.
    """
    from uwf.engine.store import cas as casops

    emit(casops.reindex(backend()), fmt)


@app.command("verify")
def verify(fmt: FormatOpt = None) -> None:
    """Re-hash every node and check that its type and refs exist, and the roots; exit 1 on
    damage.

    Prints {"scanned","ok","damaged":[…]}: corrupt nodes and dangling refs ({"hash","problem"}),
    damaged packs or packs without their index ({"pack",…}), state that cannot be read
    ({"state",…}), and heads or registry entries that do not resolve to a node of their kind
    ({"thread",…}, {"workflow",…}). Reads every node.
    """
    from uwf.engine.store import cas as casops

    report = casops.verify(backend())
    emit(report, fmt)
    if not report["ok"]:
        raise typer.Exit(1)


@app.command("pack")
def pack(fmt: FormatOpt = None) -> None:
    """Move loose node files into a pack; print {"packed","loose","packs","bytes"}.

    A pack holds many nodes, compressed, with a sorted index: far less disk than a file per
    node, and long chains read faster. The pack is durable before any loose file goes, so a
    crash at any moment leaves every node readable; new nodes are loose files until the next
    pack. Merges every pack into one once there are 8. Fails at once while cas gc runs.
    """
    from uwf.engine.store import cas as casops

    emit(casops.pack(backend()), fmt)


@app.command("gc")
def gc(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Delete nothing; report what would be collected.")
    ] = False,
    grace: Annotated[
        str,
        typer.Option(
            "--grace",
            metavar="DURATION",
            help="Keep unreachable nodes put more recently than this: 0, 30s, 10m, 1h, 2d.",
        ),
    ] = "1h",
    fmt: FormatOpt = None,
) -> None:
    """Delete the nodes nothing can reach, pack the rest (as cas pack, into one pack), and
    remove leftovers.

    Prints {"scanned","reachable","collected","bytes","locks","tempFiles","packed"}. Roots:
    every registry entry and every stored version of a registered workflow, every active and
    archived thread head, and uwf's schemas; from them gc follows references and node types.
    An unreachable node is deleted only when its last put is older than the grace period, and
    steps still running are protected even with --grace 0. It deletes nothing while a root is in
    doubt (a damaged state file, a head whose node is missing, a pack without its index: see
    cas verify). Reads every node. Then it removes
    the step locks of archived threads (never one a process holds) and the temp files that
    writers killed mid-write left, when older than the grace period. --dry-run deletes and
    packs nothing and prints "dryRun": true instead of "packed".
    """
    from uwf.engine.store.gc import gc as collect_garbage

    emit(collect_garbage(backend(), grace=grace, dry_run=dry_run), fmt)


@schema_app.command("list")
def schema_list(fmt: FormatOpt = None) -> None:
    """Print [{"hash","title"}]: the meta-schema first, then every stored schema.

    The title is the schema's "title", else its "description", else "(unnamed)".
    """
    from uwf.engine.store import cas as casops

    emit(casops.schema_list(backend()), fmt)


@schema_app.command("get")
def schema_get(
    hash: Annotated[str, typer.Argument(metavar="HASH", help="Hash of a schema node.")],
    fmt: FormatOpt = None,
) -> None:
    """Print the JSON Schema stored at HASH."""
    from uwf.engine.store import cas as casops

    emit(casops.schema_get(backend(), hash), fmt)
