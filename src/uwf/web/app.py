"""`uwf ui`: a read-only Starlette site over one storage backend, served by uvicorn.

Routes (GET only; anything else is 405): ``/`` the thread list (the filters of
``thread list``), ``/thread/<id>``, ``/workflow/<name or hash>``, ``/step/<hash>/detail`` (a
fragment, loaded when a step's detail is opened), ``/step/<hash>/artifact/<path>`` (a file
the step produced: text as text/plain, anything else as a download), ``/fragment/threads``
(the list's rows), ``/events`` (server-sent events: ``step.started``, ``step.turn`` (a turn
of the step in flight, as its agent writes it), ``step.completed``, ``thread.archived``,
``children.changed`` and, for the list, ``thread.opened``),
``/step/<hash>/output`` (a folded output, whole: loaded when asked) and ``/static/…`` (the
stylesheet and the one script, shipped in the package). Every response forbids outside
requests by its Content-Security-Policy.

Hostile pages and floods (docs/ui.md, "Limits"): a request whose ``Host`` is not one the
server serves (loopback names and the ``--host`` given: a DNS-rebinding page names its own)
gets 421; more than ``MAX_STREAMS`` event streams at once, or more connections than
``max_connections`` allows, get 503 with a line saying so; an error that is not uwf's is one
500 page and one line on stderr, never a traceback per request.
"""

from __future__ import annotations

import json
import socket
import urllib.parse
from typing import Any

from uwf.backend.base import Backend
from uwf.engine.views import timeline as view
from uwf.engine.views.follow import AllFollower, Follower
from uwf.engine.views.graph import of_workflow, with_path
from uwf.engine.views.live import TurnFollower
from uwf.util.base32 import check_hash
from uwf.util.errors import InvalidInput, NotFound, UsageError, UwfError
from uwf.util.ulid import ThreadId, check_thread_id
from uwf.web import pages
from uwf.web.shared import Shared
from uwf.web.svg import to_svg

CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
]
LOOPBACK = ("127.0.0.1", "::1", "localhost")
MAX_STREAMS = 32  # event streams served at once; more get 503
MAX_CONNECTIONS = 256  # connections at once (uvicorn's limit_concurrency); more get 503
FD_MARGIN = 64  # descriptors kept free below the open-file limit for files and the store


class ThreadStream:
    """The events of one thread page, with the HTML the page inserts."""

    def __init__(self, backend: Backend, thread: str, since: str | None) -> None:
        line = view.timeline(backend, thread, full=False)
        known = [s["hash"] for s in line["steps"]]
        upto = known.index(since) + 1 if since in known else 0
        self.path = [(s["role"], s["status"]) for s in line["steps"][:upto]]
        self.base = of_workflow(view.workflow_payload(backend, line["workflow"]))
        self.follower = Follower(backend, thread, since)
        self.turns = TurnFollower(backend, thread)  # the live turns of a step in flight
        self.backend, self.thread = backend, thread
        self.children: list[Any] | None = None  # what the children section shows

    def _children(self) -> list[tuple[str, dict[str, Any]]]:
        """``children.changed`` when a fan-out's children moved on (docs/ui.md)."""
        html, shown = pages.children_fragment(self.backend, self.thread)
        if self.children is None or shown == self.children:
            self.children = shown
            return []
        self.children = shown
        return [("children.changed", {"html": html})]

    @property
    def done(self) -> bool:
        return self.follower.done

    def close(self) -> None:
        self.turns.close()  # the live-turns file it may hold open

    def graph(self, status: str) -> str:
        return to_svg(with_path(self.base, self.path, status))

    def poll(self) -> list[tuple[str, dict[str, Any]]]:
        out: list[tuple[str, dict[str, Any]]] = []
        for event in self.follower.poll():
            kind = event["event"]
            if kind == "step.started":
                out.append((kind, {k: event[k] for k in ("number", "role", "agent")}))
            elif kind == "step.completed":
                step = event["step"]
                self.path.append((step["role"], step["status"]))
                data = {
                    "number": step["number"],
                    "count": step["number"],
                    "status": "idle",
                    "html": pages.step_fragment(step),
                    "graph": self.graph("idle"),
                }
                out.append((kind, data))
            elif kind == "thread.archived":
                data = {"status": event["status"], "graph": self.graph(event["status"])}
                out.append((kind, data))
        for line in self.turns.poll():  # docs/ui.md, "Live turns": only while a step runs
            if line["running"]:
                data = {"number": line["step"], "html": pages.turn_fragment(line["turn"])}
                out.append(("step.turn", data))
        record = self.backend.threads.get(ThreadId(self.thread))
        if record is not None and record.waiting is not None and record.waiting.children:
            out += self._children()  # only while it waits for them: a cheap check otherwise
        return out


class ListStream:
    """The events of every active thread, for the thread list to refresh its rows."""

    def __init__(self, backend: Backend) -> None:
        self.follower = AllFollower(backend)
        self.follower.poll()  # the threads already shown: no event for them
        self.done = False

    def poll(self) -> list[tuple[str, dict[str, Any]]]:
        return [(e["event"], {"thread": e["thread"]}) for e in self.follower.poll()]

    def close(self) -> None:
        return None


def _page(render: Any) -> Any:
    """A GET endpoint that renders a page from the storage root and the request."""
    from starlette.responses import HTMLResponse

    def endpoint(request: Any) -> Any:
        return HTMLResponse(render(request.app.state.backend, request))

    return endpoint


def _artifact(request: Any) -> Any:
    """One artifact's bytes: text as ``text/plain``, anything else as a download, never as
    a page of this origin (the CSP and ``nosniff`` apply too)."""
    from starlette.responses import Response

    backend, step = request.app.state.backend, request.path_params["step"]
    check_hash(step)
    data, is_text = pages.artifact(backend, step, request.path_params["path"])
    name = request.path_params["path"].rsplit("/", 1)[-1]
    if is_text:
        return Response(data, media_type="text/plain; charset=utf-8")
    quoted = urllib.parse.quote(name)
    headers = {"content-disposition": f"attachment; filename*=UTF-8''{quoted}"}
    return Response(data, media_type="application/octet-stream", headers=headers)


def _detail(backend: Backend, request: Any) -> str:
    step = request.path_params["step"]
    check_hash(step)
    return pages.detail_fragment(backend, step)


async def _events(request: Any) -> Any:
    """Server-sent events of one thread (``?thread=<id>&since=<head>``) or of every one."""
    import anyio
    from sse_starlette.sse import EventSourceResponse

    state = request.app.state
    backend, interval = state.shared, state.interval  # one read per tick for every stream
    thread = request.query_params.get("thread")
    since = request.query_params.get("since") or None
    if thread is not None:
        check_thread_id(thread)
        if since is not None:
            check_hash(since)
    if state.streams >= state.max_streams:
        return _busy(
            f"too many event streams: uwf ui serves at most {state.max_streams} at once; "
            "close some pages (this one reloads by itself)"
        )
    state.streams += 1
    try:
        stream: Any = await anyio.to_thread.run_sync(
            lambda: ThreadStream(backend, thread, since) if thread else ListStream(backend)
        )
    except BaseException:
        state.streams -= 1
        raise

    async def generate() -> Any:
        while not await request.is_disconnected():
            for name, data in await anyio.to_thread.run_sync(stream.poll):
                yield {"event": name, "data": json.dumps(data, ensure_ascii=False)}
            if stream.done:
                return
            await anyio.sleep(interval)

    response = EventSourceResponse(generate(), ping=15)

    async def counted(scope: Any, receive: Any, send: Any) -> None:
        try:
            await response(scope, receive, send)
        finally:  # however the stream ends: done, the client gone, the server stopping
            state.streams -= 1
            stream.close()

    return counted


def _busy(message: str) -> Any:
    """503 with one line saying why, and when to try again."""
    from starlette.responses import PlainTextResponse

    headers = {"retry-after": "5", "connection": "close"}  # its descriptor freed at once
    return PlainTextResponse(message + "\n", status_code=503, headers=headers)


def _failed(request: Any, exc: Exception) -> Any:
    """Errors as a page: 404 for what does not exist, 400 for bad input (message escaped)."""
    from starlette.exceptions import HTTPException
    from starlette.responses import HTMLResponse

    if isinstance(exc, HTTPException):
        status, message = exc.status_code, str(exc.detail)
    else:
        bad = isinstance(exc, InvalidInput | UsageError)
        status = 404 if isinstance(exc, NotFound) else 400 if bad else 500
        message = exc.message if isinstance(exc, UwfError) else "internal error"
    page = pages.render("error.html", title=f"Error {status}", message=message)
    return HTMLResponse(page, status_code=status)


def _output(backend: Backend, request: Any) -> str:
    step = request.path_params["step"]
    check_hash(step)
    return pages.output_fragment(backend, step)


def create_app(
    backend: Backend,
    interval: float = 0.25,
    host: str = "127.0.0.1",
    max_streams: int = MAX_STREAMS,
) -> Any:
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    routes = [
        Route("/", _page(lambda backend, r: pages.list_page(backend, dict(r.query_params)))),
        Route(
            "/fragment/threads",
            _page(lambda backend, r: pages.list_page(backend, dict(r.query_params), fragment=True)),
        ),
        Route(
            "/thread/{thread}",
            _page(lambda backend, r: pages.thread_page(backend, r.path_params["thread"])),
        ),
        Route("/step/{step}/detail", _page(_detail)),
        Route("/step/{step}/output", _page(_output)),
        Route("/step/{step}/artifact/{path:path}", _artifact),
        Route(
            "/workflow/{ident}",
            _page(lambda backend, r: pages.workflow_page(backend, r.path_params["ident"])),
        ),
        Route("/events", _events),
        Mount("/static", StaticFiles(packages=[("uwf.web", "static")]), name="static"),
    ]
    app = Starlette(routes=routes, exception_handlers={UwfError: _failed, HTTPException: _failed})
    app.state.backend, app.state.interval = backend, interval
    app.state.streams, app.state.max_streams = 0, max_streams
    app.state.shared = Shared(backend, interval / 2)
    return _Guard(app, served_hosts(host))


def served_hosts(host: str) -> frozenset[str]:
    """The ``Host`` names a server bound to ``host`` answers: the loopback names, ``host``
    itself, and for a wildcard address (``0.0.0.0``, ``::``) this machine's names."""
    names = {*LOOPBACK, host.strip("[]").lower()}
    if host in ("0.0.0.0", "::", ""):
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    return frozenset(names)


# ``Host: uri-host [":" port]`` (RFC 9110, 7.2; RFC 3986, 3.2.2), read strictly: an IPv6
# literal in brackets, or a name of letters, digits, dots and dashes (which covers IPv4);
# anything else — user info (``127.0.0.1:80@evil.example``), a path, two ports — is no host.
_HOST = r"^(?:\[([0-9a-f:.]+)\]|([a-z0-9](?:[a-z0-9.-]{0,252}[a-z0-9])?))(?::[0-9]{1,5})?$"


def host_name(header: str) -> str | None:
    """The name in a ``Host`` header, without its port (``[::1]:8765`` -> ``::1``); None
    when the header is not a host and port."""
    import re

    found = re.match(_HOST, header.strip().lower())
    if found is None:
        return None
    return found.group(1) or found.group(2)


class _Guard:
    """ASGI middleware: a ``Host`` the server does not serve gets 421; every response gets
    the CSP and friends (streams included); an exception that is not uwf's becomes one 500
    page and one line on stderr (at most one a second, with how many were left out)."""

    def __init__(self, app: Any, hosts: frozenset[str]) -> None:
        self.app = app
        self.hosts = hosts
        self.quiet = _Quiet()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        header = headers.get(b"host", b"").decode("latin-1")
        name = host_name(header)
        if name is None or name not in self.hosts:
            shown = name if name is not None else json.dumps(header[:200]) if header else "(none)"
            await _plain(send, 421, f"uwf ui does not serve the host {shown}\n")
            return
        started = False

        async def with_headers(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                message = {**message, "headers": [*message.get("headers", []), *HEADERS]}
            await send(message)

        try:
            await self.app(scope, receive, with_headers)
        except Exception as exc:
            self.quiet({"message": type(exc).__name__, "exception": exc})
            if not started:
                await _plain(send, 500, "internal error (uwf ui wrote one line on its stderr)\n")


async def _plain(send: Any, status: int, text: str) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), *HEADERS]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def listen(host: str, port: int) -> socket.socket:
    """A listening socket, so that the real address is known (``--port 0`` picks one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise UwfError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def max_connections() -> int:
    """Connections served at once: ``MAX_CONNECTIONS``, less when the open-file limit is
    lower (``FD_MARGIN`` kept free), so that the limit answers 503 before ``accept`` fails."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        try:  # the usual soft limit (1024) is below what the system allows: raise it
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft - FD_MARGIN))


def serve(backend: Backend, sock: socket.socket, host: str = "127.0.0.1") -> None:
    """Serve until SIGINT/SIGTERM (uvicorn's graceful shutdown, at most 2 s)."""
    import uvicorn

    config = uvicorn.Config(
        create_app(backend, host=host),
        log_level="warning",
        lifespan="off",
        access_log=False,
        timeout_graceful_shutdown=2,
        limit_concurrency=max_connections(),
        backlog=128,
    )
    _server(config).run(sockets=[sock])


def _server(config: Any) -> Any:
    """uvicorn's server, whose event loop reports an error it cannot pass on (``accept``
    out of descriptors, a connection lost mid-write) as one line a second on stderr, not a
    traceback each time."""
    import asyncio

    import uvicorn

    class Server(uvicorn.Server):
        async def serve(self, sockets: list[socket.socket] | None = None) -> None:
            quiet = _Quiet()
            asyncio.get_running_loop().set_exception_handler(lambda _, ctx: quiet(ctx))
            await super().serve(sockets)

    return Server(config)


class _Quiet:
    """An event loop's exception handler: one line a second, with how many were left out."""

    def __init__(self) -> None:
        self.until = 0.0
        self.unsaid = 0

    def __call__(self, context: dict[str, Any]) -> None:
        import sys
        import time

        now = time.monotonic()
        if now < self.until:
            self.unsaid += 1
            return
        exc = context.get("exception")
        what = f"{context.get('message', 'error')}" + (f": {exc}" if exc is not None else "")
        more = f" ({self.unsaid} more since the last line)" if self.unsaid else ""
        sys.stderr.write(f"uwf ui: error: {what}{more}\n")
        sys.stderr.flush()
        self.until, self.unsaid = now + 1.0, 0
