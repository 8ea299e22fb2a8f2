"""`uwf ui`: the local, read-only web view (the ``uwf[ui]`` extra)."""

from typing import Annotated

import typer

from uwf.cli.options import backend
from uwf.util.errors import Interrupted


def ui(
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on. Anything but loopback lets others read every thread: "
            "it must be given explicitly and prints a warning.",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option("--port", help="Port to listen on (0 picks a free one).", min=0, max=65535),
    ] = 8765,
) -> None:
    """Serve a local web page of threads and workflows (read-only; Ctrl-C stops it).

    Pages: the thread list (the filters of `thread list`), a thread (its graph with the path
    taken and the current role, the task, every step with its edge prompt, output rendered
    as markdown, detail and turns on demand, timings; new steps appear live), a workflow
    (graph, roles, schemas, versions). No account, no outside request: every asset ships in
    the package. Prints the address on stderr. Needs the ui extra: pip install 'uwf[ui]'.
    """
    from uwf.web import require

    require()
    from uwf.web.app import LOOPBACK, listen, serve

    storage = backend()
    sock = listen(host, port)
    bound = sock.getsockname()[1]
    if host not in LOOPBACK and not host.startswith("127."):
        typer.echo(
            f"warning: uwf ui listens on {host}: anyone who can reach it can read every thread "
            "(read-only, no authentication)",
            err=True,
        )
    shown = f"[{host}]" if ":" in host else host
    typer.echo(
        f"uwf ui: serving {storage.name} at http://{shown}:{bound}/ (Ctrl-C stops)", err=True
    )
    try:
        serve(storage, sock, host)
    except (KeyboardInterrupt, Interrupted):  # Ctrl-C is how it stops (uvicorn re-raises it)
        return
