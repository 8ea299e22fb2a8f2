"""Step ``n`` of a chain, by number, without walking the chain each time (docs/format.md,
"The step index").

A chain links back from its head, so finding step ``n`` of a ``d``-step thread means reading
``d - n`` StepNodes. This machine keeps, per StartNode, the hashes of one chain from that
start by step number: ``<root>/cache/steps/<START>``, fixed-width lines (the 13-character
hash and a newline), line ``k`` for step ``k``, so that step ``n`` is one read at offset
``(n - 1) * 14``. The lines always form a chain (each step's ``prev`` is the line before), so
when line ``d`` is the head of a ``d``-step thread, every line up to ``d`` is that thread's.

A lookup checks line ``d`` against the head. When it differs — steps since the last lookup,
or another branch of the same start (a fork) — it walks back from the head to the first step
the file agrees with (or to the start), and rewrites the file as that prefix plus the steps
it walked: once per new step, never per lookup. The file is a cache: deleting it costs one
walk, and what it names is checked (a StepNode of that start, at that depth) before use.
StepNodes written without ``depth`` (by other agents) are found by walking, as before.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from uwf.backend.base import Backend
from uwf.model import chain
from uwf.util import fsio
from uwf.util.base32 import NodeHash, is_hash
from uwf.util.errors import CorruptNode, InvalidInput, NotFound, UwfError

LINE = 14  # a 13-character hash and a newline
DIRECTORY = ("cache", "steps")


def path_of(root: Path, start: NodeHash) -> Path:
    return root.joinpath(*DIRECTORY, start)


class _Lines:
    """The index file of one start, read line by line (one ``pread`` each)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.count = 0
        with contextlib.suppress(OSError):
            self.fd = os.open(path, os.O_RDONLY)
            self.count = os.fstat(self.fd).st_size // LINE

    def get(self, k: int) -> str | None:
        """Line ``k`` (1-based), None when the file has no such (valid) line."""
        if self.fd is None or not 1 <= k <= self.count:
            return None
        data = os.pread(self.fd, LINE, (k - 1) * LINE)
        text = data[:-1].decode("ascii", "replace")
        return text if len(data) == LINE and data.endswith(b"\n") and is_hash(text) else None

    def prefix(self, k: int) -> bytes:
        if self.fd is None or k <= 0:
            return b""
        return os.pread(self.fd, k * LINE, 0)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)


def step_at(
    backend: Backend, head: chain.Start | chain.Step, number: int
) -> chain.Start | chain.Step:
    """Step ``number`` of the chain ending at ``head`` (0: its StartNode)."""
    store = backend.nodes
    start = chain.start_of(store, head)
    depth = chain.depth_of(store, head)
    if not 0 <= number <= depth:
        raise InvalidInput(f"no step {number}: the thread has {depth} steps (0 is its start)")
    if number == 0:
        return start
    assert isinstance(head, chain.Step)
    if number == depth:
        return head
    if head.depth is None:  # written without depths: walk
        return next(s for i, s in enumerate(chain.iter_steps(store, head)) if depth - i == number)
    found = _indexed(backend, start.hash, head, number)
    node = store.get(found)
    if node is not None and node.type in _step_types():
        step = chain.Step(found, node.payload, node.timestamp)
        if step.start == start.hash and step.depth == number:
            return step
    raise CorruptNode(
        f"step index {path_of(backend.root, start.hash)} names {found} for step {number}"
    )


def _step_types() -> frozenset[str]:
    from uwf.protocol import schemas

    return frozenset(schemas.hashes().steps)


def _indexed(backend: Backend, start: NodeHash, head: chain.Step, number: int) -> NodeHash:
    """The hash of step ``number`` from the start's index file, extended first if need be."""
    path = path_of(backend.root, start)
    lines = _Lines(path)
    try:
        assert head.depth is not None
        if lines.get(head.depth) == head.hash:
            found = lines.get(number)
            if found is not None:
                return NodeHash(found)
        return _extend(backend, path, lines, head, number)
    finally:
        lines.close()


def _extend(backend: Backend, path: Path, lines: _Lines, head: chain.Step, number: int) -> NodeHash:
    """Walk back from ``head`` to the first step the file agrees with, rewrite the file as
    that prefix plus the walked steps, and return step ``number``."""
    walked: list[str] = []
    found: str | None = None
    agreed = 0
    for step in chain.iter_steps(backend.nodes, head):
        if step.depth is None:
            raise NotFound(f"step {step.hash} has no depth: cannot index its chain")
        if lines.get(step.depth) == step.hash:
            agreed = step.depth
            break
        walked.append(step.hash)
        if step.depth == number:
            found = step.hash
    if found is None:  # at or below the agreed prefix
        found = lines.get(number)
        if found is None:
            raise NotFound(f"step {number} not found in the chain of {head.hash}")
    walked.reverse()
    data = lines.prefix(agreed) + "".join(f"{h}\n" for h in walked).encode("ascii")
    with contextlib.suppress(UwfError, OSError):  # a cache: a failed write costs a walk
        fsio.atomic_write(path, data)
    return NodeHash(found)
