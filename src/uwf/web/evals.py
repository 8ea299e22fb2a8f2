"""``uwf eval report --html``: a report as one self-contained page, as ``thread export``
writes a thread (CSS inline, no script, no request when opened: docs/ui.md)."""

from __future__ import annotations

from typing import Any

from uwf.backend.base import Backend
from uwf.util.ulid import now_ms
from uwf.web.pages import css, render, when


def report_page(backend: Backend, ident: str) -> str:
    """The page of ``eval report <ident>``: one run, or a task's runs summed up."""
    from uwf.engine.evals.results import report

    found: Any = report(backend, ident)
    is_run = "groups" not in found
    return render(
        "eval.html",
        title=f"Eval run {ident}" if is_run else f"Eval task {ident}",
        run=found if is_run else None,
        report=None if is_run else found,
        export=True,
        css=css(),
        now=when(now_ms()),
    )
