"""One rule for the text uwf keeps in its thread state, on every backend (docs/format.md,
"Thread state").

The thread table holds a few strings that come from users and agents: the first line of a
thread's task and the reason an agent gave when it deferred. PostgreSQL cannot hold a NUL
character in a ``text`` column, and a store must read the same everywhere (``store copy``
moves one to the other), so every backend stores such a string with each NUL replaced by
U+FFFD (the replacement character) and reads it back the same way. Nodes are not concerned:
they hold any valid Unicode text (NUL included; JSON escapes it), on every backend.
"""

from __future__ import annotations

from typing import overload

REPLACEMENT = "\ufffd"


@overload
def storable(text: str) -> str: ...
@overload
def storable(text: None) -> None: ...
def storable(text: str | None) -> str | None:
    """``text`` as a backend keeps it in the thread state: NUL replaced by U+FFFD."""
    if text is None or "\0" not in text:
        return text
    return text.replace("\0", REPLACEMENT)
