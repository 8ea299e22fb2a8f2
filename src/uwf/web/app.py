"""`uwf ui`: a read-only Starlette site over one storage backend, served by uvicorn.

Routes (GET only; anything else is 405): ``/`` the thread list (the filters of
``thread list``), ``/thread/<id>``, ``/workflow/<name or hash>``, ``/step/<hash>/detail`` (a
fragment, loaded when a step's detail is opened), ``/step/<hash>/artifact/<path>`` (a file
the step produced: text as text/plain, anything else as a download), ``/fragment/threads``
(the list's rows), ``/events`` (server-sent events: ``step.started``, ``step.completed``,
``thread.archived``, ``children.changed`` and, for the list, ``thread.opened``) and
``/static/…`` (the stylesheet and the one script, shipped in the package). Every response
forbids outside requests by its Content-Security-Policy.
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
from uwf.util.base32 import check_hash
from uwf.util.errors import InvalidInput, NotFound, UsageError, UwfError
from uwf.util.ulid import ThreadId, check_thread_id
from uwf.web import pages
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


class ThreadStream:
    """The events of one thread page, with the HTML the page inserts."""

    def __init__(self, backend: Backend, thread: str, since: str | None) -> None:
        line = view.timeline(backend, thread, full=False)
        known = [s["hash"] for s in line["steps"]]
        upto = known.index(since) + 1 if since in known else 0
        self.path = [(s["role"], s["status"]) for s in line["steps"][:upto]]
        self.base = of_workflow(view.workflow_payload(backend, line["workflow"]))
        self.follower = Follower(backend, thread, since)
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

    backend, interval = request.app.state.backend, request.app.state.interval
    thread = request.query_params.get("thread")
    since = request.query_params.get("since") or None
    if thread is not None:
        check_thread_id(thread)
        if since is not None:
            check_hash(since)
    stream: Any = await anyio.to_thread.run_sync(
        lambda: ThreadStream(backend, thread, since) if thread else ListStream(backend)
    )

    async def generate() -> Any:
        while not await request.is_disconnected():
            for name, data in await anyio.to_thread.run_sync(stream.poll):
                yield {"event": name, "data": json.dumps(data, ensure_ascii=False)}
            if stream.done:
                return
            await anyio.sleep(interval)

    return EventSourceResponse(generate(), ping=15)


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


def create_app(backend: Backend, interval: float = 0.25) -> Any:
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
    return _SecurityHeaders(app)


class _SecurityHeaders:
    """ASGI middleware: the CSP and friends on every HTTP response (streams included)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *HEADERS]}
            await send(message)

        await self.app(scope, receive, with_headers)


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


def serve(backend: Backend, sock: socket.socket) -> None:
    """Serve until SIGINT/SIGTERM (uvicorn's graceful shutdown, at most 2 s)."""
    import uvicorn

    config = uvicorn.Config(
        create_app(backend),
        log_level="warning",
        lifespan="off",
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    uvicorn.Server(config).run(sockets=[sock])
