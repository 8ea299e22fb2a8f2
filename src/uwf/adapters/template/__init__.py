"""Prompt templates: the one adapter that parses and renders them (docs/format.md, "Edge
prompts").

Callers name a template's dialect and never the library behind it:

- ``check(text)``: None when ``text`` parses, else the parser's reason (one line);
- ``names(text)``: the output fields it reads at its top level, in order (``a`` of
  ``{{a.b}}``; not a name inside a section, which may be a field of the section's value);
- ``render(text, values)``: the text, or ``TemplateError`` with the reason.

Each takes ``dialect``: ``MUSTACHE`` (uwf 0.5's workflow files, the default: ``mustache``)
or ``LIQUID`` (the edge prompts of version-1 workflow files, uwf 0.8's: ``liquid``); a
dialect is one entry of ``DIALECTS``, so another is added here without changing a caller.

Rendering is bounded in memory and time whatever a template and its values do (``bounds``):
loop iterations, time and (Liquid) the values a template makes fail past their limits, and
the output is cut at ``OUTPUT_LIMIT`` characters with a marker. A Liquid template that could
never render (a range longer than any may be) does not parse. The libraries are imported on
first use.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from uwf.adapters.template.bounds import (
    LOOP_LIMIT,
    OUTPUT_LIMIT,
    TemplateError,
)
from uwf.adapters.template.liquid import NO_FILES, Liquid
from uwf.adapters.template.mustache import Mustache, js_str

__all__ = [
    "DIALECTS",
    "LIQUID",
    "LOOP_LIMIT",
    "MUSTACHE",
    "NO_FILES",
    "OUTPUT_LIMIT",
    "Dialect",
    "TemplateError",
    "check",
    "js_str",
    "names",
    "render",
]

MUSTACHE = "mustache"
LIQUID = "liquid"


class Dialect(Protocol):
    def names(self, text: str) -> list[str]:
        """The top-level names ``text`` reads; raises TemplateError when it does not parse."""
        ...

    def render(self, text: str, values: Mapping[str, Any]) -> str: ...


def check(text: str, dialect: str = MUSTACHE) -> str | None:
    """None if ``text`` parses, else the reason."""
    try:
        _dialect(dialect).names(text)
    except TemplateError as exc:
        return str(exc)
    return None


def names(text: str, dialect: str = MUSTACHE) -> list[str]:
    """The output fields ``text`` reads at its top level, in order, each once."""
    return _dialect(dialect).names(text)


def render(text: str, values: Mapping[str, Any], dialect: str = MUSTACHE) -> str:
    return _dialect(dialect).render(text, values)


def _dialect(name: str) -> Dialect:
    try:
        return DIALECTS[name]
    except KeyError:
        raise TemplateError(f"unknown template dialect {name!r}") from None


DIALECTS: dict[str, Dialect] = {MUSTACHE: Mustache(), LIQUID: Liquid()}
