"""The pipes of a child process, read in fixed memory (``uwf.adapters.process`` runs them).

stdout is kept whole or as its tail (a bound); stderr is copied live to ours line by line
(``LiveLines``: a line cut at ``LINE_SHOWN`` bytes with the count of what was not shown,
secrets masked, control characters escaped) while its tail is kept (``Tail``). However long
a line an agent writes — 400 MB without a newline — uwf holds a few hundred KB of it.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import sys
from collections.abc import Callable
from typing import IO

LINE_SHOWN = 8192  # bytes of one stderr line copied live; the rest is counted, never kept


def pump_stdout(stream: IO[bytes], sink: bytearray, limit: int | None, seen: list[int]) -> None:
    while chunk := stream.read(65536):
        seen[0] += len(chunk)
        sink.extend(chunk)
        if limit is not None and len(sink) > 2 * limit:
            del sink[: len(sink) - limit]
    stream.close()


class Tail:
    """The last ``keep`` characters of a stream, in fixed memory: at most ``4 * keep`` bytes
    (a UTF-8 character has at most four) however long the stream or its lines, and how many
    bytes were left out before them."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.data = bytearray()
        self.total = 0  # bytes seen

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        self.total += len(chunk)
        excess = len(self.data) - 4 * self.keep
        if excess > 4 * self.keep:  # trimmed in batches: amortised O(1) per byte
            del self.data[:excess]

    def text(self) -> str:
        text = self.data.decode("utf-8", "replace")
        return text if len(text) <= self.keep else text[-self.keep :]

    def dropped(self, kept: str) -> int:
        """The bytes of the stream before ``kept`` (its text), which were not kept."""
        return max(0, self.total - len(kept.encode("utf-8", "replace")))


class LiveLines:
    """Copies a child's stderr to ours line by line, each with a prefix, in fixed memory: a
    line longer than ``LINE_SHOWN`` bytes is shown up to there and then said to be cut, with
    how many bytes were not shown. Secrets are masked and control characters escaped
    (``uwf.util.terminal``): the lines are an agent's words on a person's terminal."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.line = bytearray()
        self.cut = 0  # bytes of the current line not shown
        self.alive = True

    def feed(self, chunk: bytes) -> None:
        start = 0
        while self.alive:
            end = chunk.find(b"\n", start)
            piece = memoryview(chunk)[start : len(chunk) if end < 0 else end]
            room = LINE_SHOWN - len(self.line)
            if room > 0:
                self.line += piece[:room]
                if len(piece) > room:
                    self._write(self.line, " …")  # the head now; the count at the line's end
            self.cut += max(0, len(piece) - max(room, 0))
            if end < 0:
                return
            self.end()
            start = end + 1

    def end(self) -> None:
        """The current line ended (a newline, or the end of the stream)."""
        if self.cut:
            self._write(b"", f"[… {self.cut} more bytes of this line not shown]")
        elif self.line:
            self._write(self.line, "")
        self.line.clear()
        self.cut = 0

    def _write(self, raw: bytes | bytearray, note: str) -> None:
        from uwf.util.secrets import redact
        from uwf.util.terminal import visible

        text = visible(redact(raw.decode("utf-8", "replace").rstrip("\r")), keep="\t")
        try:
            sys.stderr.write(f"{self.prefix}{text}{note}\n")
            sys.stderr.flush()
        except (OSError, ValueError):
            self.alive = False


def pump_stderr(
    stream: IO[bytes], tail: Tail, prefix: str | None, sink: Callable[[str], object] | None = None
) -> None:
    """Keep the tail of a child's stderr; copy it live to ours after ``prefix`` (None: not
    at all), or with ``sink`` hand it to that function as text (an in-process agent's stderr,
    which shows it and keeps its own tail)."""
    live = LiveLines(prefix) if prefix is not None and sink is None else None
    decode = codecs.getincrementaldecoder("utf-8")("replace").decode if sink else None
    fd = stream.fileno()
    while chunk := os.read(fd, 65536):
        tail.add(chunk)
        if live is not None and live.alive:
            live.feed(chunk)
        if sink is not None and decode is not None:
            sink(decode(chunk))
    if live is not None and live.alive and (live.line or live.cut):
        live.end()
    if sink is not None and decode is not None and (rest := decode(b"", True)):
        sink(rest)
    stream.close()


def feed(stream: IO[bytes], data: bytes) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        stream.write(data)
    with contextlib.suppress(BrokenPipeError, OSError):
        stream.close()
