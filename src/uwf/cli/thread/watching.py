"""`uwf thread watch`: follow events as lines, with a live status line on a terminal.

The events come from :mod:`uwf.engine.views.follow`; this module only words them. Plain lines when
stdout is not a terminal (CI logs, pipes); on a terminal, the same lines plus a spinner line
that shows the running step and its elapsed time. Agent text (a status, the first line of an
output) has its control characters escaped: an escape sequence in it is shown, never obeyed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from uwf.engine.views.timeline import body_text, seconds
from uwf.util.terminal import visible


def first_line(step: dict[str, Any], limit: int = 100) -> str:
    """The first non-blank line of a step's text output, after its YAML frontmatter."""

    line = next(
        (x.strip() for x in body_text(step.get("text") or "").splitlines() if x.strip()), ""
    )
    return line if len(line) <= limit else line[: limit - 1] + "…"


def describe(event: dict[str, Any], prefix: str = "", observed: float | None = None) -> str:
    """One plain line for an event of ``uwf.engine.views.follow``; a step's duration is the
    agent's own measure, else ``observed`` (seconds from its start to its landing as
    polled), else the time since the node before it."""
    kind = event["event"]
    if kind == "thread.opened":
        name = event.get("workflowName") or event["workflow"]
        noun = "step" if event["count"] == 1 else "steps"
        return (
            f"{prefix}thread {event['thread']} ({name}): {event['status']}, {event['count']} {noun}"
        )
    if kind == "step.started":
        agent = f" ({event['agent']})" if event.get("agent") else ""
        return f"{prefix}step {event['number']} started: {event.get('role') or '?'}{agent}"
    if kind == "step.completed":
        step = event["step"]
        took = step.get("durationMs")
        if took is None and observed is not None:
            took = int(observed * 1000)
        took = step.get("elapsedMs") if took is None else took
        line = (
            f"{prefix}step {step['number']} {step['role']} -> {step['status']} "
            f"({step['agent'] or '?'}, {seconds(took)})"
        )
        text = first_line(step)
        return f"{line}: {text}" if text else line
    noun = "step" if event["count"] == 1 else "steps"
    return (
        f"{prefix}thread {event['thread']} ended: {event['status']} after {event['count']} {noun}"
    )


def watch(
    poll: Callable[[], list[dict[str, Any]]],
    finished: Callable[[], bool],
    interval: float,
    terminal: bool,
    show_thread: bool,
) -> None:
    """Poll until ``finished()``, printing each event; a spinner line on a terminal."""
    import typer

    status: Any = None
    if terminal:
        from rich.console import Console

        console = Console(highlight=False)
        status = console.status("waiting for a step…")
        status.start()
    running: dict[str, tuple[str, float]] = {}  # thread -> (what runs, since when)
    try:
        while True:
            for event in poll():
                kind, thread = event["event"], event["thread"]
                prefix = f"{thread} " if show_thread and kind != "thread.opened" else ""
                observed = None
                if kind == "step.started":
                    what = f"step {event['number']} {event.get('role') or '?'}"
                    running[thread] = (what, time.monotonic())
                elif kind in ("step.completed", "thread.archived"):
                    began = running.pop(thread, None)
                    if began is not None and kind == "step.completed":
                        observed = time.monotonic() - began[1]
                line = visible(describe(event, prefix, observed))  # an agent's words
                if status is not None:
                    console.print(line, markup=False)
                else:
                    typer.echo(line)
            if status is not None:
                now = time.monotonic()
                parts = [f"{what} running {now - since:.0f}s" for what, since in running.values()]
                status.update("; ".join(parts) if parts else "waiting for a step…")
            if finished():
                return
            time.sleep(interval)
    finally:
        if status is not None:
            status.stop()
