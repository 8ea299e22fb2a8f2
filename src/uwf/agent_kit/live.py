"""An agent's turns as they happen (docs/format.md, "Live turns"; the format in
``uwf.model.live``): each turn is appended to the file ``UWF_LIVE_TURNS`` names, so that
``uwf step turns --live`` and the web view show a step in flight.

``install`` takes the path out of the environment when the agent starts (a command the agent
runs for a model never gets it, so it cannot write turns of its own), and ``publish``
appends one turn; ``publish_new`` the turns of a list not published yet, which is how the
agent kit's ``store_turns`` publishes the turns of agents that record them only at the end of
their run (``uwf-builtin`` publishes each one as its tool loop makes it: ``Turns``). Writing is
best effort: a live view never fails a step.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from uwf.model.live import ENV, MAX_TEXT

__all__ = ["Turns", "install", "publish", "publish_new"]

_path: str | None = None
_published = 0


def install() -> None:
    """Take the live-turns file out of the environment (this process writes it alone)."""
    global _path, _published
    _path, _published = os.environ.pop(ENV, None) or None, 0


def publish(turn: dict[str, Any]) -> None:
    """Append ``turn`` (``{role, content, toolCalls?, reasoning?}``) as the next turn."""
    global _published
    index = _published
    _published += 1
    if _path is None:
        return
    from uwf.util.jsonfmt import dumps

    line = {"index": index, **{k: v for k, v in turn.items() if k != "index"}}
    content = line.get("content")
    if isinstance(content, str) and len(content) > MAX_TEXT:
        line["content"], line["truncated"] = content[:MAX_TEXT] + "…", True
    try:
        fd = os.open(_path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
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
    for turn in list(turns)[_published:]:
        publish(turn)


class Turns(list[dict[str, Any]]):
    """A list of turns that publishes each one appended to it."""

    def append(self, turn: dict[str, Any]) -> None:
        super().append(turn)
        publish(turn)
