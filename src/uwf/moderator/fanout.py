"""Fan-out, as pure functions of an edge's ``fanOut`` and the output that took it
(docs/format.md, "Fan-out and join"): which items start children, and each child's task.

No I/O: the engine (``uwf.engine.step.fanout``) starts the threads.
"""

from __future__ import annotations

from typing import Any

from uwf.moderator.evaluate import ModeratorError, render

DEFAULT_MAX = 20
DEFAULT_TASK = "{{item}}"


def items(spec: dict[str, Any], output: Any) -> list[Any]:
    """The items of ``spec["field"]`` in ``output``: a list of at most ``max`` items, else
    ModeratorError saying why not."""
    field = str(spec.get("field", ""))
    value = output.get(field) if isinstance(output, dict) else None
    if not isinstance(value, list):
        got = "missing" if value is None else type(value).__name__
        raise ModeratorError(f'fan-out field "{field}" is not a list (got: {got})')
    limit = spec.get("max", DEFAULT_MAX)
    if len(value) > limit:
        raise ModeratorError(
            f'fan-out field "{field}" has {len(value)} items, more than max {limit}'
        )
    return value


def tasks(spec: dict[str, Any], output: Any) -> list[str]:
    """Each child's task, in item order: ``spec["task"]`` rendered against the output plus
    ``item`` and ``index``."""
    template = str(spec.get("task", DEFAULT_TASK))
    view = output if isinstance(output, dict) else {}
    out = []
    for index, item in enumerate(items(spec, output)):
        task = render(template, {**view, "item": item, "index": index})
        if not task.strip():
            raise ModeratorError(f"fan-out task {index} renders empty")
        out.append(task)
    return out
