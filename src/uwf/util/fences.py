"""Agent text inside markdown that uwf writes: fenced so that it cannot forge structure.

An agent's answer comes from a model that reads the web, and uwf shows it to people
(``thread read``, ``step read``) and to the next agents (their prompts). Text that holds
``</output>`` or a line ``## Step 2: reviewer`` must not read as the end of its step or as a
step of its own, so every piece of agent text goes into a code fence it cannot close
(``fence``: CommonMark closes a fence only with a run of the same character at least as
long, so a fence one backtick longer than any run in the text holds it whole), and one-line
labels (an agent's name) are made one line (``one_line``). Text over a budget is cut with a
visible marker (``cut``) rather than sent whole, and texts that share one budget get fair
shares of it first (``shares``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def fence(text: str, info: str = "") -> str:
    """``text`` in a backtick fence that no line of it can close (at least three backticks,
    one more than its longest run), tagged ``info`` (``yaml``, ``markdown``, ``text``)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{ticks}{info}\n{body}{ticks}"


def code_span(text: str) -> str:
    """``text`` made one line, in an inline code span it cannot close (one backtick more than
    its longest run; padded with a space where it starts or ends with one)."""
    line = one_line(text)
    longest = max((len(run) for run in re.findall(r"`+", line)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{ticks}{pad}{line}{pad}{ticks}"


def one_line(text: str) -> str:
    """``text`` with every line break and other control character shown as a space, so that
    a label cannot start a line of its own."""
    return "".join(" " if not ch.isprintable() else ch for ch in text)


def cut(text: str, limit: int, whole: str, size: int | None = None) -> str:
    """``text`` when it has at most ``limit`` characters; else its start and a marker saying
    how much was cut and where ``whole`` (a command) shows all of it, together within
    ``limit`` (the marker alone when the limit is smaller than it). ``size``: the length of
    the whole text when ``text`` is only its start."""
    size = len(text) if size is None else size
    if size <= limit:
        return text
    marker = "\n[… {:,} more characters cut by uwf: over the context budget; {} shows them]"
    keep = max(0, limit - len(marker.format(size, whole)))
    return text[:keep] + marker.format(size - keep, whole)


def shares(demands: Sequence[int], budget: int) -> list[int]:
    """What each of ``demands`` gets of ``budget``: all it asks when the sum fits; else each
    part that asks less than an equal share of what is left gets what it asks, and the others
    split the rest equally (max-min fairness)."""
    out = [0] * len(demands)
    left, count = max(0, budget), len(demands)
    for index in sorted(range(count), key=demands.__getitem__):
        given = min(max(0, demands[index]), left // count)
        out[index] = given
        left -= given
        count -= 1
    return out
