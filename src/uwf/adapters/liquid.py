"""Liquid, the template language of version-1 workflow files' edge prompts (docs/format.md,
"Edge prompts"), on python-liquid: the one module that imports it, on first use.

- ``names(text)``: the names ``text`` reads from its values at its top level, in order (not
  a loop's variable, nor one it assigns); ``TemplateError`` when it does not parse, uses a
  filter Liquid does not have, or a tag that reads another template (``include``,
  ``render``: prompts never read files);
- ``render(text, values)``: the text, or ``TemplateError`` with the reason.

Standard Liquid, strict about filters: a value prints as Liquid prints it (``true``, nothing
for null, a list's items one after the other) except a mapping, which prints as compact JSON
(``{"a":1}``) rather than as a Python dict. Rendering is bounded: at most
``LOOP_LIMIT`` loop iterations and ``OUTPUT_LIMIT`` characters of output, so a prompt cannot
grow without end from what an agent wrote.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

LOOP_LIMIT = 10_000
OUTPUT_LIMIT = 1 << 20
NO_FILES = ("include", "render")


class TemplateError(Exception):
    """A template that does not parse or cannot render; the message is the reason."""


class _Json(dict[str, Any]):
    """A mapping that prints as compact JSON."""

    def __str__(self) -> str:
        return json.dumps(self, ensure_ascii=False, separators=(",", ":"), default=str)


def _values(value: Any) -> Any:
    if isinstance(value, dict):
        return _Json({k: _values(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_values(v) for v in value]
    return value


@functools.cache
def _env() -> Any:
    import liquid

    class Env(liquid.Environment):
        loop_iteration_limit = LOOP_LIMIT
        output_stream_limit = OUTPUT_LIMIT

    return Env()


def _reason(exc: Exception) -> str:
    """The library's message, on one line, without the source excerpt it adds."""
    message = getattr(exc, "message", None) or (str(exc).splitlines() or [""])[0]
    return " ".join(str(message).split()) or type(exc).__name__


def _parse(text: str) -> Any:
    import liquid

    env = _env()
    try:
        template = env.from_string(text)
        found = template.analyze(include_partials=False)
    except liquid.exceptions.LiquidError as exc:
        raise TemplateError(_reason(exc)) from None
    for tag in NO_FILES:
        if tag in found.tags:
            raise TemplateError(f"the {tag} tag is not supported (edge prompts read no files)")
    for name in found.filters:
        if name not in env.filters:
            raise TemplateError(f"unknown filter '{name}'")
    return template, found


def names(text: str) -> list[str]:
    """The top-level names ``text`` reads, in order, each once."""
    _, found = _parse(text)
    return [str(name) for name in found.globals]


def render(text: str, values: Mapping[str, Any]) -> str:
    import liquid

    template, _ = _parse(text)
    try:
        return str(template.render(**_values(dict(values))))
    except liquid.exceptions.LiquidError as exc:
        raise TemplateError(_reason(exc)) from None
