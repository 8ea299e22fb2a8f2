"""Prompt templates: the one module that parses and renders them (docs/format.md, "Edge
prompts").

Callers name a template's dialect and never the library behind it:

- ``check(text)``: None when ``text`` parses, else the parser's reason (one line);
- ``names(text)``: the output fields it reads at its top level, in order (``a`` of
  ``{{a.b}}``; not a name inside a section, which may be a field of the section's value);
- ``render(text, values)``: the text, or ``TemplateError`` with the reason.

Each takes ``dialect``: ``MUSTACHE`` (uwf 0.5's workflow files, the default) or ``LIQUID``
(the edge prompts of version-1 workflow files, uwf 0.8's); a dialect is one entry of
``DIALECTS``, so another is added here without changing a caller.

Mustache is rendered as uwf v0.5.0 (mustache.js) did: HTML escaping off (prompts are not
HTML), values as JavaScript prints them (``true``, ``1``, ``0.5``, ``a,b`` for a list,
``[object Object]`` for a mapping, nothing for null), partials never read from files. The
library is chevron-blue, a maintained fork of chevron, through its public ``render`` (with
``no_escape``) and ``ChevronError``; it is imported on first use.

Liquid is standard Liquid on python-liquid (imported on first use), strict about filters: a
value prints as Liquid prints it (``true``, nothing for null, a list's items one after the
other) except a mapping, which prints as compact JSON (``{"a":1}``) rather than as a Python
dict. ``names`` lists what a template reads from its values at its top level (not a loop's
variable, nor one it assigns); a filter Liquid does not have, or a tag that reads another
template (``include``, ``render``: prompts never read files), does not parse. Rendering is
bounded: at most ``LOOP_LIMIT`` loop iterations and ``OUTPUT_LIMIT`` characters of output, so
a prompt cannot grow without end from what an agent wrote.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any, Protocol

MUSTACHE = "mustache"
LIQUID = "liquid"
LOOP_LIMIT = 10_000  # Liquid: loop iterations of one rendering
OUTPUT_LIMIT = 1 << 20  # Liquid: characters of one rendering
NO_FILES = ("include", "render")  # Liquid tags that would read another template


class TemplateError(Exception):
    """A template that does not parse or cannot render; the message is the reason."""


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


# -- Mustache ---------------------------------------------------------------------------


def js_str(value: Any) -> str:
    """``value`` as JavaScript's ``String(value)`` prints it (JSON values only)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and math.isfinite(value):
        return _js_number(value)
    if isinstance(value, list):
        return ",".join(js_str(v) for v in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def _js_number(value: float) -> str:
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mant, exp = text.split("e")
        sign = "-" if exp.startswith("-") else "+"
        return f"{mant}e{sign}{int(exp.lstrip('+-'))}"
    return text


# The renderer prints a value with str() and tests it with bool(); these wrap JSON values so
# that str() is JavaScript's. A boolean is an int, as Python's own: false is kept (and
# printed) like 0, not dropped like an empty value.
class _Bool(int):
    def __str__(self) -> str:
        return "true" if self else "false"


class _Float(float):
    def __str__(self) -> str:
        return _js_number(self)


class _List(list[Any]):
    def __str__(self) -> str:
        return js_str(list(self))


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


class _Lookups(dict[str, Any]):
    """Data that holds nothing and records each name a template looks up in it: every
    section is then empty, so only the names outside sections are looked up here."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def __missing__(self, key: str) -> Any:
        if key not in self.seen:
            self.seen.append(key)
        raise KeyError(key)


class Mustache:
    def names(self, text: str) -> list[str]:
        lookups = _Lookups()
        self._render(text, lookups)
        return lookups.seen

    def render(self, text: str, values: Mapping[str, Any]) -> str:
        return self._render(text, _view(dict(values)))

    @staticmethod
    def _render(text: str, data: dict[str, Any]) -> str:
        import chevron_blue

        try:
            return str(chevron_blue.render(text, data, partials_path=None, no_escape=True))
        except Exception as exc:  # ChevronError, and a few builtins on odd templates
            raise TemplateError(" ".join(str(exc).split()) or type(exc).__name__) from None


# -- Liquid ----------------------------------------------------------------------------


class _Json(dict[str, Any]):
    """A mapping that prints as compact JSON."""

    def __str__(self) -> str:
        import json  # a Liquid dialect's only: a uwf 0.5 step imports no json (test_startup)

        return json.dumps(self, ensure_ascii=False, separators=(",", ":"), default=str)


def _liquid_values(value: Any) -> Any:
    if isinstance(value, dict):
        return _Json({k: _liquid_values(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_liquid_values(v) for v in value]
    return value


def _liquid_reason(exc: Exception) -> str:
    """The library's message, on one line, without the source excerpt it adds."""
    message = getattr(exc, "message", None) or (str(exc).splitlines() or [""])[0]
    return " ".join(str(message).split()) or type(exc).__name__


class Liquid:
    @functools.cached_property
    def _env(self) -> Any:
        import liquid

        class Env(liquid.Environment):
            loop_iteration_limit = LOOP_LIMIT
            output_stream_limit = OUTPUT_LIMIT

        return Env()

    def _parse(self, text: str) -> tuple[Any, Any]:
        import liquid

        env = self._env
        try:
            template = env.from_string(text)
            found = template.analyze(include_partials=False)
        except liquid.exceptions.LiquidError as exc:
            raise TemplateError(_liquid_reason(exc)) from None
        for tag in NO_FILES:
            if tag in found.tags:
                raise TemplateError(f"the {tag} tag is not supported (edge prompts read no files)")
        for name in found.filters:
            if name not in env.filters:
                raise TemplateError(f"unknown filter '{name}'")
        return template, found

    def names(self, text: str) -> list[str]:
        _, found = self._parse(text)
        return [str(name) for name in found.globals]

    def render(self, text: str, values: Mapping[str, Any]) -> str:
        import liquid

        template, _ = self._parse(text)
        try:
            return str(template.render(**_liquid_values(dict(values))))
        except liquid.exceptions.LiquidError as exc:
            raise TemplateError(_liquid_reason(exc)) from None


DIALECTS: dict[str, Dialect] = {MUSTACHE: Mustache(), LIQUID: Liquid()}
