"""The web view: ``uwf ui`` (a local, read-only site) and ``uwf thread export --html``.

Between the CLI and the engine: it reads everything through the engine's domain functions and
renders it with Jinja2 (autoescaping) and markdown-it (raw HTML off). The server stack
(Starlette, uvicorn, sse-starlette) and the renderers are the optional extra ``uwf[ui]``;
the CLI imports this package only inside the commands that need it.
"""

from __future__ import annotations

import importlib.util

from uwf.util.errors import UwfError

__all__ = ["EXTRA", "require"]

EXTRA = ("starlette", "uvicorn", "sse_starlette", "jinja2", "markdown_it")


def require(modules: tuple[str, ...] = EXTRA) -> None:
    """Fail with one line naming the install that fixes it when the ui extra is missing."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise UwfError(
            f"the web view needs the ui extra ({', '.join(missing)} missing): pip install 'uwf[ui]'"
        )
