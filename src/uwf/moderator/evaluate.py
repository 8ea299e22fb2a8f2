"""Status-based routing (docs/format.md, "What a role can emit").

``evaluate(graph, last_role, last_output)`` looks up ``graph[last_role][status]`` where the
status is the unit status ``_`` after ``$START`` (or when the output has no string
``status``), and renders the target's Mustache prompt against the last output with HTML
escaping off and JavaScript value rendering (``true``, ``1``, ``a,b``, ``[object Object]``).
No I/O, no state: the same inputs always give the same decision.

A workflow read from a version-1 file (uwf 0.8's format) routes by other ``Rules``
(``rules_of``): on the output's ``$status``, ``$START`` on ``new`` (a new thread) or
``resume`` (a thread that resumes an ended one: the caller says which, as the start's
``$status``), and its prompts are Liquid templates (``uwf.adapters.liquid``). An edge of such
a workflow may name its agent's working directory (``Decision.location``).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from uwf.util.errors import UwfError

START = "$START"
END = "$END"
UNIT = "_"
#: The status with which any agent suspends its step: never routed, the thread waits
#: (docs/format.md, "Suspending and resuming").
SUSPEND = "$SUSPEND"
#: In a version-1 prompt: the text of the output (its markdown after the frontmatter).
BODY = "_body"
MUSTACHE = "mustache"
LIQUID = "liquid"


class Rules(NamedTuple):
    """How a workflow routes: its version, the output field routing reads, the template
    language of its prompts, and the statuses ``$START`` routes on (the first: a new
    thread's)."""

    version: int
    key: str
    dialect: str
    start: tuple[str, ...]


V05 = Rules(0, "status", MUSTACHE, (UNIT,))
V1 = Rules(1, "$status", LIQUID, ("new", "resume"))


def rules_of(workflow: Any) -> Rules:
    """The rules of a Workflow payload: version 1's when it says ``version: 1``."""
    return V1 if isinstance(workflow, dict) and workflow.get("version") == 1 else V05


class ModeratorError(UwfError):
    """The graph has no route for the last output, or a prompt does not render."""


class Decision(NamedTuple):
    role: str
    prompt: str
    status: str
    location: str | None = None  # the edge's working directory (version 1), as written

    @property
    def done(self) -> bool:
        return self.role == END


def status_of(last_role: str, last_output: Any, rules: Rules = V05) -> str:
    """The status an output routes on: its ``rules.key`` when a string, else ``_``; after
    ``$START`` always ``_`` under uwf 0.5's rules."""
    if last_role == START and rules.start == (UNIT,):
        return UNIT
    status = last_output.get(rules.key) if isinstance(last_output, dict) else None
    return status if isinstance(status, str) else UNIT


def evaluate(
    graph: dict[str, Any], last_role: str, last_output: Any, rules: Rules = V05
) -> Decision:
    status = status_of(last_role, last_output, rules)
    edges = graph.get(last_role)
    if not isinstance(edges, dict):
        raise ModeratorError(f'no transitions defined for role "{last_role}"')
    target = edges.get(status)
    if not isinstance(target, dict) or not isinstance(target.get("role"), str):
        raise ModeratorError(f'no transition for role "{last_role}" with status "{status}"')
    view = last_output if isinstance(last_output, dict) else {}
    prompt = render(str(target.get("prompt", "")), view, rules.dialect)
    location = target.get("location")
    return Decision(target["role"], prompt, status, location if isinstance(location, str) else None)


# -- Mustache with JavaScript value rendering -------------------------------------------


def _js_number(value: float) -> str:
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mant, exp = text.split("e")
        sign = "-" if exp.startswith("-") else "+"
        return f"{mant}e{sign}{int(exp.lstrip('+-'))}"
    return text


def _js_str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isfinite(value):
        return _js_number(value)
    if isinstance(value, list):
        return ",".join(_js_str(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


class _Bool:
    _CHEVRON_return_scope_when_falsy = True

    def __init__(self, value: bool) -> None:
        self.value = value

    def __bool__(self) -> bool:
        return self.value

    def __str__(self) -> str:
        return "true" if self.value else "false"


class _Float(float):
    def __str__(self) -> str:
        return _js_number(self)


class _List(list[Any]):
    def __str__(self) -> str:
        return _js_str(list(self))


class _Dict(dict[str, Any]):
    def __str__(self) -> str:
        return "[object Object]"


def _view(value: Any) -> Any:
    if isinstance(value, bool):
        return _Bool(value)
    if isinstance(value, float):
        return _Float(value)
    if isinstance(value, list):
        return _List(_view(v) for v in value)
    if isinstance(value, dict):
        return _Dict({k: _view(v) for k, v in value.items()})
    return value


def _tokens(template: str) -> list[tuple[str, str]]:
    from chevron.tokenizer import tokenize

    return [
        ("no escape", key) if tag == "variable" else (tag, key) for tag, key in tokenize(template)
    ]


def check_template(template: str, dialect: str = MUSTACHE) -> str | None:
    """None if ``template`` parses (as Mustache, or ``dialect``), else the parser's message."""
    if dialect == LIQUID:
        from uwf.adapters import liquid

        try:
            liquid.names(template)
        except liquid.TemplateError as exc:
            return str(exc)
        return None
    try:
        _tokens(template)
    except Exception as exc:  # chevron raises ChevronError and a few builtins
        return " ".join(str(exc).split()) or type(exc).__name__
    return None


def output_names(template: str, dialect: str = MUSTACHE) -> list[str]:
    """The output fields a template looks up, in order: the first part of each variable and
    section name outside any section (``a`` of ``{{a.b}}``). Inside a section a name may be
    a field of the section's value, so those are not listed. The template must parse."""
    if dialect == LIQUID:
        from uwf.adapters import liquid

        return liquid.names(template)
    names: list[str] = []
    depth = 0
    for tag, key in _tokens(template):
        if tag == "end":
            depth -= 1
            continue
        if tag in ("section", "inverted section", "no escape") and depth == 0 and key != ".":
            name = key.split(".")[0]
            if name and name not in names:
                names.append(name)
        if tag in ("section", "inverted section"):
            depth += 1
    return names


def render(template: str, view: dict[str, Any], dialect: str = MUSTACHE) -> str:
    """Render a Mustache template, HTML escaping off, values rendered the JavaScript way (or a
    template of ``dialect``)."""
    if dialect == LIQUID:
        from uwf.adapters import liquid

        try:
            return liquid.render(template, view)
        except liquid.TemplateError as exc:
            raise ModeratorError(f"prompt template error: {exc}") from None
    import chevron

    try:
        tokens = _tokens(template)
        return str(chevron.render(tokens, _view(view)))
    except Exception as exc:
        raise ModeratorError(f"prompt template error: {' '.join(str(exc).split())}") from None
