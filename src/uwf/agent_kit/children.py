"""The join of a fan-out, as an agent sees it (docs/format.md, "Fan-out and join").

``thread step`` passes the children's final heads, in item order, in ``UWF_CHILDREN``; the new
StepNode must carry exactly that list (``children``), and the prompt shows each child's task,
how it ended and its last output, fenced (agent text never forges structure), within the
share of the context budget it is given (``section``): the longest tasks and outputs are cut
to a common length, each with a marker naming the command that shows it whole.
"""

from __future__ import annotations

import json
import os
from typing import Any

from uwf.cas.store import Store
from uwf.model import chain
from uwf.util import fences
from uwf.util.base32 import NodeHash, is_hash
from uwf.util.errors import InvalidInput
from uwf.util.fences import shares
from uwf.util.tuples import NamedTuple

ENV = "UWF_CHILDREN"
HEADING = "## Children"
TASK_LIMIT = 2000  # characters of a child's task shown in the prompt
FRAME = 64  # about the characters of one child's block besides its title, task and output


class Child(NamedTuple):
    """One child's block: its title, its task and last output (as JSON: its start, when
    ``read`` was told to keep no more, and ``output_size`` its length), and where each is
    shown whole."""

    title: str
    task: str
    task_whole: str
    output: str
    output_whole: str
    output_size: int

    @property
    def size(self) -> int:
        return len(self.title) + len(self.task) + self.output_size + FRAME


def from_env() -> list[NodeHash] | None:
    """The children's final heads this step joins; None when it joins none."""
    raw = os.environ.get(ENV)
    if raw is None:
        return None
    heads = [part for part in raw.split(",") if part]
    bad = [part for part in heads if not is_hash(part)]
    if bad:
        raise InvalidInput(f"{ENV} holds an invalid hash: {bad[0][:40]!r}")
    return [NodeHash(part) for part in heads]


def read(store: Store, heads: list[NodeHash], keep: int | None = None) -> list[Child]:
    """Each child's block, in order, its task shortened to ``TASK_LIMIT`` characters and (with
    ``keep``: no share of a budget of ``keep`` can be larger) its output to ``keep``, so that
    a thousand long outputs are never held at once."""
    out = []
    for number, head in enumerate(heads, 1):
        node = chain.load_head(store, head)
        start = chain.start_of(store, node)
        task = start.prompt if len(start.prompt) <= TASK_LIMIT else start.prompt[:TASK_LIMIT] + "…"
        if isinstance(node, chain.Step):
            ended = f"last role {fences.one_line(node.role)}, head {head}"
            output: Any = chain.output_of(store, node)
        else:
            ended, output = f"no step ran, head {head}", {}
        text = json.dumps(output, ensure_ascii=False, sort_keys=True)
        shown = text if keep is None else text[: keep + 1]
        title = f"### Child {number} ({ended})"
        whole = f"`uwf step read {head}`"
        out.append(Child(title, task, f"`uwf cas get {start.hash}`", shown, whole, len(text)))
    return out


def _lead(count: int) -> list[str]:
    return [HEADING, "", f"{count} child thread(s) ended; their results, in order:"]


def size(children: list[Child]) -> int:
    """The characters of the whole section (about)."""
    return len("\n".join(_lead(len(children)))) + sum(child.size for child in children)


def section(children: list[Child], limit: int | None = None) -> str:
    """The ``## Children`` section of the prompt: one block per child, in order; with
    ``limit``, its tasks and outputs share what the titles leave of it (the longest cut)."""
    lines = _lead(len(children))
    if limit is not None and size(children) > limit:
        room = limit - len("\n".join(lines)) - sum(len(c.title) + FRAME for c in children)
        parts = shares([n for c in children for n in (len(c.task), c.output_size)], room)
        children = [
            child._replace(
                task=fences.cut(child.task, parts[2 * i], child.task_whole),
                output=fences.cut(
                    child.output, parts[2 * i + 1], child.output_whole, child.output_size
                ),
            )
            for i, child in enumerate(children)
        ]
    for child in children:
        lines += [
            "",
            child.title,
            "",
            "Task:",
            fences.fence(child.task),
            "Output:",
            fences.fence(child.output, "json"),
        ]
    return "\n".join(lines)
