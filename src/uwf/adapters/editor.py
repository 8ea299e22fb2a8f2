"""A person's text editor: ``$VISUAL``, else ``$EDITOR``, else ``vi``, run on one file.

Used where a person writes or edits a step (``uwf thread fork --edit``, ``uwf-human``). The
editor's command line is split like a shell would (``EDITOR="code --wait"`` works) and run
without a shell, with the file's path as its last argument. ``tty`` names the terminal to run
it on (its stdin, stdout and stderr); without one it inherits ours.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import subprocess
from pathlib import Path

from uwf.util.errors import UwfError


def editor_argv() -> list[str]:
    """The editor's command line: ``$VISUAL``, else ``$EDITOR``, else ``vi``."""
    text = os.environ.get("VISUAL", "").strip() or os.environ.get("EDITOR", "").strip() or "vi"
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise UwfError(f"invalid $EDITOR: {exc}: {text}") from None
    return argv or ["vi"]


def edit(path: Path, tty: str | None = None) -> None:
    """Run the editor on ``path`` and wait for it; UwfError when it fails or is missing."""
    argv = [*editor_argv(), str(path)]
    with contextlib.ExitStack() as stack:
        stdio = None
        if tty is not None:
            stdio = stack.enter_context(open(tty, "r+b", buffering=0))
        try:
            code = subprocess.call(argv, stdin=stdio, stdout=stdio, stderr=stdio)
        except FileNotFoundError:
            raise UwfError(f"editor not found: {argv[0]} (set $EDITOR)") from None
        except OSError as exc:
            raise UwfError(f"editor could not start: {argv[0]}: {exc.strerror}") from None
    if code != 0:
        raise UwfError(f"editor failed ({argv[0]}) with exit code {code}")
