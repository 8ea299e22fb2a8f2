"""Following the turns of a step in flight (docs/format.md, "Live turns"): ``uwf step turns``
and the web view's ``step.turn`` events.

A poll reads the thread's head and step lock (passive, as ``thread watch`` does) and, while a
step of this machine runs, the new complete lines of its live-turns file (``uwf.model.live``),
kept open: lines the agent wrote before the file was removed are still read. When the step
ends, turns its landed detail holds beyond those read are given too (a step shorter than a
poll), from the detail. A step another machine runs has its file there: only its landed turns
are shown here.
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import IO, TYPE_CHECKING, Any, cast

from uwf.backend.base import Backend
from uwf.model import chain, live
from uwf.model.turns import turns as detail_turns
from uwf.util.base32 import NodeHash
from uwf.util.errors import UwfError
from uwf.util.ulid import ThreadId, check_thread_id

if TYPE_CHECKING:
    from uwf.util.outputs import StepTurn, TurnShown

__all__ = ["TurnFollower", "turns_now"]


class TurnFollower:
    """Turns of ``thread``'s steps in flight: ``poll()`` gives the new ones, each ``{thread,
    step, role, running, turn}``; with ``once``, ``done`` after the first step that ends (or at
    once when none runs)."""

    def __init__(self, backend: Backend, thread: str) -> None:
        self.backend = backend
        self.thread: ThreadId = check_thread_id(thread)
        self.file: IO[bytes] | None = None
        self.step: dict[str, Any] | None = None  # the file's first line: head, role, step
        self.given = 0  # turns given of this step (their indexes are 0 … given - 1)
        self.partial = b""
        self.elsewhere: str | None = None  # the host of a step run on another machine
        self.ended = 0  # steps followed to their end
        self.gone = False  # the thread has ended
        self.last: str | None = None  # the head the last poll saw

    def close(self) -> None:
        if self.file is not None:
            with contextlib.suppress(OSError):
                self.file.close()
            self.file = None

    def _open(self, head: str) -> None:
        """The live file of the step running at ``head``, if it is that step's."""
        try:
            handle = open(live.path_of(self.backend.root, self.thread), "rb")  # noqa: SIM115
        except OSError:
            return
        first = handle.readline(live.MAX_LINE + 1)
        step = None
        if first.endswith(b"\n"):
            with contextlib.suppress(ValueError):
                step = live.header(json.loads(first))
        if step is None or step["head"] != head:  # not written yet, or another step's
            handle.close()
            return
        self.file, self.step, self.given, self.partial = handle, step, 0, b""

    def _next(self, head: str) -> int:
        """The number of the step that follows ``head``."""
        try:
            return (
                chain.depth_of(
                    self.backend.nodes, chain.load_head(self.backend.nodes, NodeHash(head))
                )
                + 1
            )
        except UwfError:
            return 0

    def _lines(self) -> list[StepTurn]:
        """The new complete turn lines of the open file."""
        assert self.file is not None
        data = self.partial + self.file.read()
        *complete, self.partial = data.split(b"\n")
        if len(self.partial) > live.MAX_LINE:
            self.partial = b""  # a line too long to show: dropped
        out = []
        for raw in complete:
            if len(raw) > live.MAX_LINE:
                continue
            try:
                turn = live.turn(json.loads(raw))
            except ValueError:
                continue
            if turn is not None and turn["index"] == self.given:
                out.append(self._line(turn, running=True))
                self.given += 1
        return out

    def _line(self, turn: dict[str, Any], *, running: bool) -> StepTurn:
        assert self.step is not None
        return {
            "thread": self.thread,
            "step": self.step["step"],
            "role": self.step["role"],
            "running": running,
            "turn": cast("TurnShown", turn),
        }

    def _landed(self, head: str | None) -> list[StepTurn]:
        """The turns of the landed step at ``head`` beyond those given (none if it failed)."""
        if head is None or self.step is None or head == self.step["head"]:
            return []
        node = self._step_at(head)
        if node is None or node.prev not in (self.step["head"], None):
            return []
        out = []
        for index, turn in enumerate(detail_turns(self.backend.nodes, node.payload.get("detail"))):
            if index >= self.given:
                checked = live.turn({"index": index, **turn})
                if checked is not None:
                    out.append(self._line(checked, running=False))
        self.given += len(out)
        return out

    def poll(self) -> list[StepTurn]:
        """The turns written since the last poll."""
        threads, locks = self.backend.threads, self.backend.locks
        head = threads.head(self.thread)
        holder = locks.holder(self.thread) if head is not None else None
        out: list[StepTurn] = []
        if self.step is None and holder is not None and head is not None:
            if holder.host not in (None, os.uname().nodename):  # its file is on that host
                self.elsewhere, self.given = holder.host, 0
                self.step = {"head": head, "role": holder.role or "", "step": self._next(head)}
            else:
                self._open(head)
        if self.file is not None:
            out += self._lines()
        if self.step is not None:
            if holder is None or head != self.step["head"]:  # it ended: landed, failed or gone
                if self.file is not None:
                    out += self._lines()
                out += self._end(head)
        elif self.last is not None and head != self.last:  # a step began and ended meanwhile
            landed = self._final(head)
            node = self._step_at(landed) if landed != self.last else None  # not just archived
            if node is not None:  # (or several: the turns of the last one)
                before = node.prev or node.start
                self.step = {"head": before, "role": node.role, "step": self._next(before)}
                self.given = 0
                out += self._end(head)
        self.last = head
        if head is None:
            self.gone = True
        return out

    def _final(self, head: str | None) -> str | None:
        """The head a step left: the thread's, or its archived head once it ended."""
        if head is not None:
            return head
        entry = self.backend.threads.history_entry(self.thread)
        return entry.head if entry is not None else None

    def _step_at(self, head: str | None) -> chain.Step | None:
        if head is None:
            return None
        try:
            node = chain.load_head(self.backend.nodes, NodeHash(head))
        except UwfError:
            return None
        return node if isinstance(node, chain.Step) else None

    def _end(self, head: str | None) -> list[StepTurn]:
        """The followed step ended: the turns its landed detail holds beyond those given."""
        self.close()
        out = self._landed(self._final(head))
        self.step, self.elsewhere = None, None
        self.ended += 1
        return out


def turns_now(backend: Backend, thread: str) -> list[StepTurn]:
    """The turns of ``thread``'s step in flight written so far; with none in flight, those
    of its last step (``running`` false)."""
    follower = TurnFollower(backend, thread)
    try:
        found = follower.poll()
        if found or follower.step is not None:
            return found
    finally:
        follower.close()
    from uwf.model.threads import locate

    node = chain.load_head(backend.nodes, locate(backend, thread).head)
    if not isinstance(node, chain.Step):
        return []
    follower.step = {"head": node.prev or node.start, "role": node.role, "step": 0}
    follower.step["step"] = chain.depth_of(backend.nodes, node)
    return follower._landed(node.hash)
