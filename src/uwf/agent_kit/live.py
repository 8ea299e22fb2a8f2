"""An agent's turns as they happen (docs/format.md, "Live turns"; the format in
``uwf.model.live``): each turn is appended to the file ``UWF_LIVE_TURNS`` names, so that
``uwf step turns --live`` and the web view show a step in flight.

``installed`` takes the path from the agent's environment for the length of its run: out of
``os.environ`` for an agent process (a command the agent runs for a model never gets it, so
it cannot write turns of its own), from the call's environment for a Python agent in uwf's
process (``AgentContext.env`` leaves it out for the same reason). ``publish`` appends one
turn; ``publish_new`` the turns of a list not published yet, which is how the agent kit's
``store_turns`` publishes the turns of agents that record them only at the end of their run
(``uwf-builtin`` publishes each one as its tool loop makes it: ``Turns``). The file and the
count of turns published belong to the run, in a context variable: Python agents run side by
side on lanes of one process, each in a context of its own (``engine.step.inproc``). Writing
is best effort: a live view never fails a step.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from uwf.model.live import ENV, MAX_TEXT

__all__ = ["Turns", "installed", "publish", "publish_new"]


class _Run:
    """The live-turns file of one agent run (None: no live view) and the turns published."""

    __slots__ = ("path", "published")

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.published = 0


_run: contextvars.ContextVar[_Run | None] = contextvars.ContextVar("uwf_live_turns", default=None)


@contextlib.contextmanager
def installed(env: Mapping[str, str] | None = None) -> Iterator[None]:
    """Publish the turns of the run inside to its live-turns file: the one ``env`` names (a
    Python agent's call), else the one taken out of ``os.environ`` (an agent process, which
    writes it alone)."""
    path = os.environ.pop(ENV, None) if env is None else env.get(ENV)
    token = _run.set(_Run(path or None))
    try:
        yield
    finally:
        _run.reset(token)


def publish(turn: dict[str, Any]) -> None:
    """Append ``turn`` (``{role, content, toolCalls?, reasoning?}``) as the next turn."""
    run = _run.get()
    if run is None:
        return  # not in an agent's run (a tool loop used on its own)
    index = run.published
    run.published += 1
    if run.path is None:
        return
    from uwf.util.jsonfmt import dumps

    line = {"index": index, **{k: v for k, v in turn.items() if k != "index"}}
    content = line.get("content")
    if isinstance(content, str) and len(content) > MAX_TEXT:
        line["content"], line["truncated"] = content[:MAX_TEXT] + "…", True
    try:
        fd = os.open(run.path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    except OSError:
        return  # the step ended, or the file is not there: nothing to show
    try:
        os.write(fd, (dumps(line) + "\n").encode("utf-8", "replace"))
    except (OSError, ValueError):
        pass
    finally:
        os.close(fd)


def publish_new(turns: Iterable[dict[str, Any]]) -> None:
    """Publish the turns of ``turns`` past the ones already published (in order)."""
    run = _run.get()
    if run is None:
        return
    for turn in list(turns)[run.published :]:
        publish(turn)


class Turns(list[dict[str, Any]]):
    """A list of turns that publishes each one appended to it."""

    def append(self, turn: dict[str, Any]) -> None:
        super().append(turn)
        publish(turn)
