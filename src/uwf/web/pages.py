"""The pages of the web view, rendered from the engine's plain data with Jinja2.

Jinja2 autoescapes every value; the two things inserted as markup are produced here and
escaped here: agent text rendered by markdown-it with raw HTML off (``<script>`` stays text,
``javascript:`` links are refused), and the graph SVG (``uwf.web.svg``, which escapes its own
labels). The same templates make the live pages and the exported file; the exported file gets
its CSS inline, every step's detail inline and a Content-Security-Policy that allows no
request and no script.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

from uwf.backend.base import Backend
from uwf.engine.store import cas as casops
from uwf.engine.threads.listing import list_threads
from uwf.engine.views import graph as graphs
from uwf.engine.views import read
from uwf.engine.views import timeline as view
from uwf.engine.workflows import stored as workflows
from uwf.util import jsonfmt
from uwf.util.errors import InvalidInput, UwfError
from uwf.util.numbers import as_count
from uwf.util.ulid import now_ms, timestamp_ms
from uwf.web.svg import to_svg


@functools.cache
def _env() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("uwf.web", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters.update(md=markdown, when=when, took=view.seconds, pretty=pretty)
    return env


#: Characters of a step's output rendered with its page; a longer output shows its start and
#: loads the rest when asked (``/step/<hash>/output``), so a thread of 50 MB of outputs
#: renders as fast as a short one. The export holds the rest as plain text.
FOLD = 20_000
#: Above this many characters, an output is shown as plain text, not rendered as markdown.
MARKDOWN_MAX = 1 << 20


@functools.cache
def _markdown() -> Any:
    from markdown_it import MarkdownIt

    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")
    md.add_render_rule("image", _image_as_link)
    return md


def _image_as_link(self: Any, tokens: list[Any], idx: int, options: Any, env: Any) -> str:
    """An image as a plain link to it, never an ``<img>``: agent text cannot make the page
    (or the exported file, which has no server to stop it) fetch anything (docs/ui.md)."""
    from markupsafe import escape

    token = tokens[idx]
    src = token.attrGet("src") or ""
    alt = self.renderInlineAsText(token.children or [], options, env) or src
    return (
        f'<a class="image-link" href="{escape(src)}" rel="noopener noreferrer nofollow">'
        f"{escape(alt)}</a>"
    )


def markdown(text: str | None) -> Any:
    """Agent text as HTML: markdown-it with raw HTML off, so markup in it stays text, and
    images as links (``_image_as_link``); a text over ``MARKDOWN_MAX`` as plain text."""
    from markupsafe import Markup, escape

    text = text or ""
    if len(text) > MARKDOWN_MAX:
        return Markup(f"<pre>{escape(text)}</pre>")
    return Markup(_markdown().render(text))


def when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def pretty(value: Any) -> str:
    return jsonfmt.dump_yaml(value).rstrip("\n") if value not in (None, {}, []) else ""


def css() -> str:
    return resources.files("uwf.web").joinpath("static/uwf.css").read_text(encoding="utf-8")


def render(template: str, **context: Any) -> str:
    context.setdefault("export", False)
    context.setdefault("css", "")
    return str(_env().get_template(template).render(**context))


# -- data ---------------------------------------------------------------------------------


def thread_graph_svg(backend: Backend, line: dict[str, Any], payload: dict[str, Any]) -> str:
    steps = [(s["role"], s["status"]) for s in line["steps"]]
    return to_svg(graphs.with_path(graphs.of_workflow(payload), steps, line["status"]))


def step_view(step: dict[str, Any]) -> dict[str, Any]:
    """A timeline step record with what the template shows of its text: ``body`` (at most
    ``FOLD`` characters, cut at a line end) and, when that is not all of it, ``folded`` (the
    whole length) and ``rest`` (what follows, for the export)."""
    text = step.get("text")
    body = view.body_text(text) if text is not None else None
    out = {**step, "body": body, "folded": None, "rest": "", "fields": _fields(step.get("output"))}
    if body is not None and len(body) > FOLD:
        cut = body.rfind("\n", 0, FOLD) + 1 or FOLD
        out.update(body=body[:cut], folded=len(body), rest=body[cut:])
    return out


def detail(backend: Backend, step_hash: str) -> dict[str, Any] | None:
    """The step's detail, references expanded: ``{fields, turns}`` (None without detail)."""
    try:
        expanded = read.step_details(backend, step_hash)
    except UwfError:
        return None
    if not isinstance(expanded, dict):
        return {"fields": expanded, "turns": []}
    turns = expanded.get("turns")
    fields = {k: v for k, v in expanded.items() if k != "turns"}
    return {"fields": fields, "turns": turns if isinstance(turns, list) else []}


def thread_page(backend: Backend, thread: str, export: bool = False) -> str:
    line = view.timeline(backend, thread)
    payload = view.workflow_payload(backend, line["workflow"])
    steps = [step_view(s) for s in line["steps"]]
    if export:
        for s in steps:
            s["detailView"] = detail(backend, s["hash"])
    return render(
        "thread.html",
        title=f"Thread {thread}",
        line=line,
        steps=steps,
        roles=payload.get("roles", {}),
        graph=thread_graph_svg(backend, line, payload),
        family=view.family(backend, thread),
        export=export,
        css=css() if export else "",
        now=when(now_ms()),
    )


def export_thread(backend: Backend, thread: str) -> str:
    return thread_page(backend, thread, export=True)


def artifact(backend: Backend, step_hash: str, path: str) -> tuple[bytes, bool]:
    """The bytes of the artifact ``path`` of a step, and whether it is text."""
    from uwf.engine.threads.longthreads import artifact_bytes

    return artifact_bytes(backend, step_hash, path)


def children_fragment(backend: Backend, thread: str) -> tuple[str, list[Any]]:
    """The children section of a thread page, and what it shows (to tell a change)."""
    family = view.family(backend, thread)
    shown = [(c["thread"], c["status"]) for c in family["children"]]
    return render("children.html", family=family, export=False), shown


def step_fragment(step: dict[str, Any]) -> str:
    return render("step.html", s=step_view(step))


def _fields(output: Any) -> str:
    """A step's structured output as the page shows it: YAML, or indented JSON when it is
    long (YAML's emitter takes seconds over megabytes; JSON's, milliseconds)."""
    if output in (None, {}, []):
        return ""
    as_json = json.dumps(output, ensure_ascii=False)
    if len(as_json) > FOLD:
        return json.dumps(output, ensure_ascii=False, indent=1)
    return pretty(output)


def output_fragment(backend: Backend, step_hash: str) -> str:
    """The whole output of a step, rendered (what a folded output loads when asked)."""
    from uwf.model import chain
    from uwf.model.turns import last_assistant_content

    step = chain.require_step(backend.nodes, step_hash)
    text = last_assistant_content(backend.nodes, step.payload.get("detail"))
    return str(markdown(view.body_text(text or "")))


def turn_fragment(turn: Mapping[str, Any]) -> str:
    """One turn of a step in flight (``step.turn``), as the detail shows turns."""
    return render("turn.html", t=turn)


def detail_fragment(backend: Backend, step_hash: str) -> str:
    return render("detail.html", d=detail(backend, step_hash))


def list_page(backend: Backend, query: dict[str, str], fragment: bool = False) -> str:
    def number(key: str) -> int | None:
        value = query.get(key, "").strip()
        if not value:
            return None
        count = as_count(value)
        if count is None:
            raise InvalidInput(f"--{key} must be a non-negative integer")
        return count

    items = list_threads(
        backend,
        all_=query.get("all", "") not in ("", "0", "false"),
        status=query.get("status") or None,
        after=query.get("after") or None,
        before=query.get("before") or None,
        skip=number("skip") or 0,
        take=number("take"),
    )
    names = view.workflow_names(backend, {i["workflow"] for i in items})
    rows = [
        {**i, "name": names[i["workflow"]], "created": timestamp_ms(i["thread"])} for i in items
    ]
    template = "threads.html" if fragment else "list.html"
    return render(template, title="Threads", rows=rows, query=query)


def workflow_page(backend: Backend, ident: str) -> str:
    shown = workflows.show_workflow(backend, ident)
    payload = shown["payload"]
    schemas = {}
    for role, spec in payload.get("roles", {}).items():
        meta = spec.get("meta") if isinstance(spec, dict) else None
        try:
            schemas[role] = casops.get(backend, meta)["payload"] if isinstance(meta, str) else meta
        except UwfError:
            schemas[role] = None
    try:
        versions = (
            workflows.history(backend, str(payload.get("name", ""))) if payload.get("name") else []
        )
    except UwfError:
        versions = []
    return render(
        "workflow.html",
        title=f"Workflow {payload.get('name')}",
        wf=shown,
        payload=payload,
        schemas={k: json.dumps(v, indent=2, ensure_ascii=False) for k, v in schemas.items()},
        versions=versions,
        graph=to_svg(graphs.of_workflow(payload)),
        mermaid=graphs.to_mermaid(graphs.of_workflow(payload)),
    )
