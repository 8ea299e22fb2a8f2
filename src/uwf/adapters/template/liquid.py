"""The Liquid dialect: the edge prompts of version-1 workflow files, uwf 0.8's (docs/format.md,
"Edge prompts").

Standard Liquid on python-liquid (imported on first use), strict about filters: a value prints
as Liquid prints it (``true``, nothing for null, a list's items one after the other) except a
mapping, which prints as compact JSON (``{"a":1}``) rather than as a Python dict. ``names``
lists what a template reads from its values at its top level (not a loop's variable, nor one
it assigns); a filter Liquid does not have, or a tag that reads another template (``include``,
``render``: prompts never read files), does not parse.

Bounded (``bounds``), through the library's own extension points: the environment's resource
limits (``local_namespace_limit`` for what ``assign`` and ``capture`` keep, measured by the
render context's ``get_size_of_locals``; ``output_stream_limit`` for a capture), a render
context (``BoundTemplate.context_class``) that counts every loop's iterations against one
budget for the whole rendering and wraps every filter it hands out (``RenderContext.filter``)
in a guard that refuses a value too large — before making it where its size can be told from
the arguments, else as soon as it is made — and an output buffer that cuts the rendering at
``OUTPUT_LIMIT`` characters. A range written with literal bounds that could never be used is
refused when the template is parsed (``workflow put``/``check``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from io import StringIO
from typing import Any

from uwf.adapters.template.bounds import (
    DIGITS_LIMIT,
    LOOP_LIMIT,
    NAMESPACE_LIMIT,
    SEQUENCE_LIMIT,
    VALUE_LIMIT,
    Budget,
    TemplateError,
    marked,
)

NO_FILES = ("include", "render")  # Liquid tags that would read another template
BOUNDED = "a prompt template is bounded: docs/format.md, Edge prompts"


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
    if message == "output stream limit reached":  # a capture's buffer (output_stream_limit)
        return f"a captured value passed {VALUE_LIMIT:,} characters ({BOUNDED})"
    return " ".join(str(message).split()) or type(exc).__name__


# -- sizes -------------------------------------------------------------------------------


def _digits(number: int) -> int:
    """The decimal digits of ``number``, give or take one (log10(2) ≈ 1233 / 4096)."""
    return (abs(number).bit_length() * 1233 >> 12) + 1


def _items(value: range) -> int:
    return max(0, value.stop - value.start)  # a Liquid range's step is 1


def size(value: Any, stop: int, budget: Budget | None = None) -> int:
    """About the characters ``value`` prints as (a list: its items', plus one each; a range:
    its numbers'), counted until the count passes ``stop``."""
    total, seen, stack = 0, 0, [value]
    while stack:
        item = stack.pop()
        seen += 1
        if budget is not None and not seen & 0x3FF:
            budget.tick()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, bool) or item is None:
            total += 5
        elif isinstance(item, int):
            total += _digits(item)
        elif isinstance(item, float):
            total += 24
        elif isinstance(item, range):
            total += _items(item) * (_digits(max(abs(item.start), abs(item.stop))) + 1)
        elif isinstance(item, (list, tuple, Mapping)):
            total += len(item) + 2
            if total > stop:
                return total
            if isinstance(item, Mapping):
                total += sum(len(str(key)) for key in item)
                stack.extend(item.values())
            else:
                stack.extend(item)
        else:
            total += 16  # a drop, an undefined
        if total > stop:
            return total
    return total


def _check_range(value: Any) -> None:
    if isinstance(value, range) and _items(value) > SEQUENCE_LIMIT:
        raise TemplateError(
            f"a range of {_items(value):,} items, over the limit of {SEQUENCE_LIMIT:,} ({BOUNDED})"
        )


def _too_large(name: str, what: str) -> TemplateError:
    return TemplateError(f"{name}: a value that {what} ({BOUNDED})")


def _check_value(name: str, value: Any, budget: Budget) -> None:
    """A value a filter made: at most ``SEQUENCE_LIMIT`` items, ``VALUE_LIMIT`` characters and
    (a number) ``DIGITS_LIMIT`` digits."""
    if isinstance(value, (list, tuple, range)) and len(value) > SEQUENCE_LIMIT:
        raise _too_large(name, f"has {len(value):,} items, over the limit of {SEQUENCE_LIMIT:,}")
    if isinstance(value, int) and _digits(value) > DIGITS_LIMIT:
        digits = _digits(value)
        raise _too_large(name, f"has {digits:,} digits, over the limit of {DIGITS_LIMIT:,}")
    found = size(value, VALUE_LIMIT, budget)
    if found > VALUE_LIMIT:
        raise _too_large(name, f"prints as {found:,} characters, over the limit of {VALUE_LIMIT:,}")


# What a filter whose result can outgrow its arguments many times over would make, told from
# its arguments before it runs (the others make at most a few times what they are given, and
# are checked once they have made it).


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _grow_append(left: Any, other: Any = "", *_: Any, **__: Any) -> int:
    return size(left, VALUE_LIMIT) + size(other, VALUE_LIMIT)


def _grow_concat(left: Any, other: Any = (), *_: Any, **__: Any) -> int:
    if isinstance(left, (list, tuple)) and isinstance(other, (list, tuple)):
        count = len(left) + len(other)
        if count > SEQUENCE_LIMIT:
            raise _too_large("concat", f"has {count:,} items, over the limit of {SEQUENCE_LIMIT:,}")
    return size(left, VALUE_LIMIT) + size(other, VALUE_LIMIT)


def _grow_replace(left: Any, seq: Any = "", sub: Any = "", *_: Any, **__: Any) -> int:
    text, old, new = _text(left), _text(seq), _text(sub)
    width = size(left, VALUE_LIMIT)
    if old is None or new is None:
        return width  # undefined or not text: the library refuses or replaces nothing
    count = width + 1 if not old else (text.count(old) if text is not None else width)
    return width + count * max(0, len(new) - len(old))


def _grow_join(left: Any, separator: Any = " ", *_: Any, **__: Any) -> int:
    count = len(left) if isinstance(left, (list, tuple, range)) else 1
    return size(left, VALUE_LIMIT) + count * len(str(separator))


def _grow_split(left: Any, separator: Any = None, *_: Any, **__: Any) -> int:
    text = _text(left)
    if text is None:
        return size(left, VALUE_LIMIT)
    sep = _text(separator)
    count = len(text) if not sep else text.count(sep) + 1
    if count > SEQUENCE_LIMIT:
        raise _too_large("split", f"has {count:,} items, over the limit of {SEQUENCE_LIMIT:,}")
    return len(text) + count


def _grow_times(left: Any, other: Any = 0, *_: Any, **__: Any) -> int:
    if isinstance(left, int) and isinstance(other, int):
        digits = _digits(left) + _digits(other)
        if digits > DIGITS_LIMIT:
            raise _too_large("times", f"has {digits:,} digits, over the limit of {DIGITS_LIMIT:,}")
    return 0


GROWTH: dict[str, Callable[..., int]] = {
    "append": _grow_append,
    "prepend": _grow_append,
    "concat": _grow_concat,
    "replace": _grow_replace,
    "join": _grow_join,
    "split": _grow_split,
    "times": _grow_times,
}


def guarded(name: str, func: Callable[..., Any], budget: Budget) -> Callable[..., Any]:
    """``func`` (the filter ``name``), refusing a range too long to use among its arguments,
    a value it would make too large before it runs where that can be told, and after it
    runs any value too large."""

    def run(left: Any, *args: Any, **kwargs: Any) -> Any:
        budget.tick()
        for value in (left, *args, *kwargs.values()):
            _check_range(value)
        grow = GROWTH.get(name)
        if grow is not None:
            estimate = grow(left, *args, **kwargs)
            if estimate > VALUE_LIMIT:
                raise _too_large(
                    name, f"prints as {estimate:,} characters, over the limit of {VALUE_LIMIT:,}"
                )
        result = func(left, *args, **kwargs)
        _check_value(name, result, budget)
        return result

    return run


# -- the environment ---------------------------------------------------------------------


class _Full(Exception):
    """The output reached ``OUTPUT_LIMIT``: the rendering stops there."""


class _Output(StringIO):
    """The rendering's output: cut at ``OUTPUT_LIMIT`` characters."""

    def __init__(self, budget: Budget) -> None:
        super().__init__()
        self.budget = budget

    def write(self, text: str) -> int:
        self.budget.tick()
        part = self.budget.emit(text)
        super().write(part)
        if self.budget.cut:
            raise _Full
        return len(part)


@functools.cache
def environment() -> Any:
    """The Liquid environment every prompt is parsed and rendered in (built on first use)."""
    import liquid

    class Context(liquid.RenderContext):
        """Counts the rendering against one ``Budget`` and guards what it makes."""

        __slots__ = ("budget", "sizes")
        budget: Budget

        def __init__(self, template: Any, **kwargs: Any) -> None:
            super().__init__(template, **kwargs)
            parent = kwargs.get("parent_context")
            self.budget = parent.budget if isinstance(parent, Context) else Budget()
            self.sizes: dict[str, tuple[Any, int]] = {}  # an assigned name: (value, size)

        def filter(self, name: str, token: Any) -> Callable[..., Any]:
            return guarded(name, super().filter(name, token), self.budget)

        def get(self, path: Any, **kwargs: Any) -> Any:
            self.budget.tick()
            return super().get(path, **kwargs)

        def raise_for_loop_limit(self, length: int = 1) -> None:
            # every loop's iterations count against one total (the library's own limit is
            # for each nest of loops)
            self.budget.tick()
            self.budget.iterations += length
            if self.budget.iterations > LOOP_LIMIT:
                raise TemplateError(f"more than {LOOP_LIMIT:,} loop iterations ({BOUNDED})")

        def get_size_of_locals(self) -> int:
            # what assigned values print as (the library's measure is sys.getsizeof, which
            # does not count a list's items); each measured once
            self.budget.tick()
            total = self.local_namespace_size_carry
            for key, value in self.locals.items():
                known = self.sizes.get(key)
                if known is None or known[0] is not value:
                    if isinstance(value, (list, tuple, range)) and len(value) > SEQUENCE_LIMIT:
                        raise TemplateError(
                            f'"{key}" would hold {len(value):,} items, over the limit of '
                            f"{SEQUENCE_LIMIT:,} ({BOUNDED})"
                        )
                    known = self.sizes[key] = (value, size(value, NAMESPACE_LIMIT, self.budget))
                total += known[1]
            if total > NAMESPACE_LIMIT:
                raise TemplateError(
                    f"the assigned values would print as {total:,} characters together, over "
                    f"the limit of {NAMESPACE_LIMIT:,} ({BOUNDED})"
                )
            return total

    class Template(liquid.BoundTemplate):
        context_class = Context

    class Env(liquid.Environment):
        template_class = Template
        loop_iteration_limit = LOOP_LIMIT
        local_namespace_limit = NAMESPACE_LIMIT
        output_stream_limit = VALUE_LIMIT  # a capture's buffer

    return Env()


# -- what cannot work, seen when the template is parsed ----------------------------------


def _expressions(nodes: Any, context: Any) -> Iterator[Any]:
    """Every expression of the parse tree, each with every expression inside it."""
    for node in nodes:
        stack = list(node.expressions())
        while stack:
            expression = stack.pop()
            yield expression
            stack.extend(expression.children())
        yield from _expressions(node.children(context, include_partials=False), context)


def static_problem(template: Any) -> str | None:
    """Why ``template`` cannot render whatever its values, seen from its text: a range with
    literal bounds longer than any range may be, or than any loop may run."""
    import liquid
    from liquid.builtin.expressions import LoopExpression
    from liquid.builtin.expressions.primitive import IntegerLiteral, RangeLiteral

    def literal(expression: Any) -> int | None:
        return expression.value if isinstance(expression, IntegerLiteral) else None

    def items(expression: Any) -> int | None:
        if not isinstance(expression, RangeLiteral):
            return None
        start, stop = literal(expression.start), literal(expression.stop)
        return None if start is None or stop is None else max(0, stop - start + 1)

    for expression in _expressions(template.nodes, liquid.RenderContext(template)):
        count = items(expression)
        if count is not None and count > SEQUENCE_LIMIT:
            return (
                f"the range {expression} has {count:,} items, over the limit of "
                f"{SEQUENCE_LIMIT:,} ({BOUNDED})"
            )
        if isinstance(expression, LoopExpression) and expression.limit is None:
            count = items(expression.iterable)
            if count is not None and count > LOOP_LIMIT:
                return (
                    f"the loop over {expression.iterable} would run {count:,} times, over the "
                    f"limit of {LOOP_LIMIT:,} loop iterations ({BOUNDED})"
                )
    return None


class Liquid:
    def _parse(self, text: str) -> tuple[Any, Any]:
        import liquid

        env = environment()
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
        problem = static_problem(template)
        if problem is not None:
            raise TemplateError(problem)
        return template, found

    def names(self, text: str) -> list[str]:
        _, found = self._parse(text)
        return [str(name) for name in found.globals]

    def render(self, text: str, values: Mapping[str, Any]) -> str:
        import liquid

        template, _ = self._parse(text)
        context = template.context_class(
            template, globals=template.make_globals(_liquid_values(dict(values)))
        )
        out = _Output(context.budget)
        try:
            template.render_with_context(context, out)
        except _Full:
            pass
        except TemplateError:
            raise
        except liquid.exceptions.LiquidError as exc:
            raise TemplateError(_liquid_reason(exc)) from None
        except (ArithmeticError, ValueError, RecursionError) as exc:  # e.g. too large a number
            raise TemplateError(" ".join(str(exc).split()) or type(exc).__name__) from None
        return marked(out.getvalue(), context.budget.cut)
