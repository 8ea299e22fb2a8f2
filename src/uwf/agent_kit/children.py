"""The join of a fan-out, as an agent sees it (docs/format.md, "Fan-out and join").

``thread step`` passes the children's final heads, in item order, in ``UWF_CHILDREN``; the new
StepNode must carry exactly that list (``children``), and the prompt shows each child's task,
how it ended and its last output, fenced (agent text never forges structure).
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

ENV = "UWF_CHILDREN"
HEADING = "## Children"
TASK_LIMIT = 2000  # characters of a child's task shown in the prompt


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


def section(store: Store, heads: list[NodeHash]) -> str:
    """The ``## Children`` section of the prompt: one block per child, in order."""
    lines = [HEADING, "", f"{len(heads)} child thread(s) ended; their results, in order:"]
    for number, head in enumerate(heads, 1):
        node = chain.load_head(store, head)
        start = chain.start_of(store, node)
        task = start.prompt if len(start.prompt) <= TASK_LIMIT else start.prompt[:TASK_LIMIT] + "…"
        if isinstance(node, chain.Step):
            ended = f"last role {fences.one_line(node.role)}, head {head}"
            output: Any = chain.output_of(store, node)
        else:
            ended, output = f"no step ran, head {head}", {}
        lines += [
            "",
            f"### Child {number} ({ended})",
            "",
            "Task:",
            fences.fence(task),
            "Output:",
            fences.fence(json.dumps(output, ensure_ascii=False, sort_keys=True), "json"),
        ]
    return "\n".join(lines)
