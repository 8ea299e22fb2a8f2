"""What one rendering of a prompt template may do, in either dialect (docs/format.md, "Edge
prompts"): the limits, the error a template that passes one fails with, and the ``Budget`` a
rendering counts against.

A template comes from a workflow file, its values from agents; whatever the two do together,
a rendering takes bounded memory and time:

- at most ``LOOP_LIMIT`` loop iterations in all (Liquid's ``for`` and ``tablerow``,
  Mustache's sections over a list), and ``TIME_LIMIT`` seconds: past either it fails;
- at most ``OUTPUT_LIMIT`` characters of output: what comes after is cut, with ``CUT_MARKER``
  at the end (a long answer printed into a prompt shortens the prompt, it never stops the role);
- (Liquid) no value a filter, ``assign`` or ``capture`` makes over ``VALUE_LIMIT`` characters
  or ``SEQUENCE_LIMIT`` items (a range included), all assigned values together at most
  ``NAMESPACE_LIMIT`` characters, and no number over ``DIGITS_LIMIT`` digits: past any of
  these it fails, before the value is made where it can be told (``append``, ``replace``,
  ``join``, ``split``, ``times``, a range), else as soon as it is.
"""

from __future__ import annotations

import time

LOOP_LIMIT = 10_000  # loop iterations of one rendering, all loops together
OUTPUT_LIMIT = 1 << 20  # characters of one rendering's output; the rest is cut
VALUE_LIMIT = 1 << 21  # Liquid: characters one value may print as (a list: its items', +1 each)
SEQUENCE_LIMIT = 100_000  # Liquid: items of one list or range
NAMESPACE_LIMIT = 1 << 23  # Liquid: characters of every assigned value together
DIGITS_LIMIT = 4_300  # Liquid: digits of a number (Python prints no longer integer)
TIME_LIMIT = 5.0  # seconds one rendering may take

CUT_MARKER = "\n[… cut by uwf: the rendered prompt passed {:,} characters]"


class TemplateError(Exception):
    """A template that does not parse or cannot render; the message is the reason."""


class Budget:
    """What one rendering has used: loop iterations, characters of output, time."""

    __slots__ = ("cut", "deadline", "iterations", "output")

    def __init__(self) -> None:
        self.iterations = 0
        self.output = 0
        self.cut = False  # the output reached OUTPUT_LIMIT: the rest is left out
        self.deadline = time.monotonic() + TIME_LIMIT

    def tick(self) -> None:
        """Fail once the rendering has taken ``TIME_LIMIT`` seconds."""
        if time.monotonic() > self.deadline:
            raise TemplateError(
                f"rendering took more than {TIME_LIMIT:g} s (a prompt template is bounded in "
                "time: docs/format.md, Edge prompts)"
            )

    def iterate(self) -> None:
        """Count one loop iteration: fail past ``LOOP_LIMIT``."""
        self.iterations += 1
        if self.iterations > LOOP_LIMIT:
            raise TemplateError(
                f"more than {LOOP_LIMIT:,} loop iterations (a prompt template is bounded: "
                "docs/format.md, Edge prompts)"
            )
        if not self.iterations & 0xFF:
            self.tick()

    def emit(self, text: str) -> str:
        """The part of ``text`` that still fits the output (all of it, or its start once the
        output reaches ``OUTPUT_LIMIT``, after which nothing more)."""
        if self.cut:
            return ""
        room = OUTPUT_LIMIT - self.output
        if len(text) <= room:
            self.output += len(text)
            return text
        self.output, self.cut = OUTPUT_LIMIT, True
        return text[:room]

    def charge(self, size: int) -> bool:
        """Count ``size`` characters of output made elsewhere; False once the output is cut."""
        if self.cut:
            return False
        self.output += size
        if self.output > OUTPUT_LIMIT:
            self.output, self.cut = OUTPUT_LIMIT, True
            return False
        return True


def marked(text: str, cut: bool) -> str:
    """``text``, with the marker that says the output was cut after it when ``cut``."""
    return text + CUT_MARKER.format(OUTPUT_LIMIT) if cut else text
