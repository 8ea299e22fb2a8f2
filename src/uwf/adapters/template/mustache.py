"""The Mustache dialect: uwf 0.5's workflow files (docs/format.md, "Edge prompts").

Rendered as uwf v0.5.0 (mustache.js) did: HTML escaping off (prompts are not HTML), values as
JavaScript prints them (``true``, ``1``, ``0.5``, ``a,b`` for a list, ``[object Object]`` for a
mapping, nothing for null), partials never read from files. The library is chevron-blue, a
maintained fork of chevron, through its ``render`` (with ``no_escape``, given the template's
tokens) and ``ChevronError``; it is imported on first use.

Bounded (``bounds``): the values are wrapped so that the rendering counts against a
``Budget`` — each pass of a section over a list is a loop iteration and is charged the text
the template's sections hold, each value printed is charged what it prints — so nested
sections over a long list fail past ``LOOP_LIMIT`` iterations instead of multiplying, and
the output stops at ``OUTPUT_LIMIT`` characters, with a marker.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

from uwf.adapters.template.bounds import Budget, TemplateError, marked


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


# The renderer prints a value with str() (a string: as it is, appended to the output) and tests
# it with bool(); these wrap JSON values so that str() is JavaScript's and everything printed is
# charged to the rendering's budget. A boolean is an int, as Python's own: false is kept (and
# printed) like 0, not dropped like an empty value. Each wrapper holds the budget (``budget``)
# and, for a list or a mapping, the plain value it wraps (``plain``).
class _Str(str):
    budget: Budget

    def __radd__(self, other: object) -> Any:
        # the renderer appends a string value to its output: ``output += value``
        if not isinstance(other, str):
            return NotImplemented
        return other + self.budget.emit(str.__str__(self))


class _Bool(int):
    budget: Budget

    def __str__(self) -> str:
        return self.budget.emit("true" if self else "false")


class _Int(int):
    budget: Budget

    def __str__(self) -> str:
        return self.budget.emit(int.__repr__(self))


class _Float(float):
    budget: Budget

    def __str__(self) -> str:
        return self.budget.emit(_js_number(self))


class _List(list[Any]):
    budget: Budget
    plain: list[Any]
    section_text: int  # the characters of text the template's sections hold

    def __str__(self) -> str:
        return self.budget.emit(js_str(self.plain))

    def __iter__(self) -> Iterator[Any]:
        # a section over this list: each pass is an iteration, charged the sections' text
        for item in list.__iter__(self):
            self.budget.iterate()
            if not self.budget.charge(self.section_text):
                return
            yield item


class _Dict(dict[str, Any]):
    budget: Budget

    def __str__(self) -> str:
        return self.budget.emit("[object Object]")


def _view(value: Any, budget: Budget, section_text: int) -> Any:
    view: Any
    if isinstance(value, str):
        view = _Str(value)
    elif isinstance(value, bool):
        view = _Bool(value)
    elif isinstance(value, int):
        view = _Int(value)
    elif isinstance(value, float):
        view = _Float(value)
    elif isinstance(value, list):
        view = _List(_view(v, budget, section_text) for v in value)
        view.plain, view.section_text = value, section_text
    elif isinstance(value, dict):
        view = _Dict({k: _view(v, budget, section_text) for k, v in value.items()})
    else:
        return value
    view.budget = budget
    return view


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
        self._render(_tokens(text), lookups)
        return lookups.seen

    def render(self, text: str, values: Mapping[str, Any]) -> str:
        tokens = _tokens(text)
        budget = Budget()
        view = _view(dict(values), budget, _section_text(tokens))
        return marked(self._render(tokens, view), budget.cut)

    @staticmethod
    def _render(tokens: list[tuple[str, str]], data: dict[str, Any]) -> str:
        import chevron_blue

        try:
            return str(chevron_blue.render(tokens, data, partials_path=None, no_escape=True))
        except TemplateError:
            raise
        except Exception as exc:  # a few builtins on odd templates
            raise TemplateError(" ".join(str(exc).split()) or type(exc).__name__) from None


def _tokens(text: str) -> list[tuple[str, str]]:
    """The template's tokens (the renderer reads them as the template); TemplateError with
    the parser's reason when it does not parse."""
    from chevron_blue import ChevronError, tokenizer

    try:
        return list(tokenizer.tokenize(text))
    except ChevronError as exc:
        raise TemplateError(" ".join(str(exc).split()) or type(exc).__name__) from None


def _section_text(tokens: list[tuple[str, str]]) -> int:
    """The characters of literal text inside the template's sections: at most what one pass
    of a section over a list adds to the output besides the values it prints."""
    depth = total = 0
    for kind, key in tokens:
        if kind in ("section", "inverted section"):
            depth += 1
        elif kind == "end":
            depth = max(0, depth - 1)
        elif kind == "literal" and depth:
            total += len(key)
    return total
