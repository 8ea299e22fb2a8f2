"""What an agent is asked to do, and the short way to read it (docs/agents.md, "The command
line"): uwf runs every agent as ``<agent> [its options] <thread-id> <role>``, the edge
prompt in ``$UWF_EDGE_PROMPT``. ``plain`` reads that call without argparse, whose import
(with gettext, locale and shutil's compression modules) was a good part of an agent's
start-up (docs/performance.md, "Processes and start-up"); anything else — options, ``-h``,
v0.5.0's ``--thread`` form, a usage error — goes to the parser of ``uwf.agent_kit.args``,
which gives the same answer for a plain call.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from uwf.util.errors import UwfError
from uwf.util.tuples import NamedTuple

__all__ = ["EDGE_PROMPT", "EDGE_PROMPT_FILE", "Target", "edge_prompt_from_env", "plain"]

EDGE_PROMPT = "UWF_EDGE_PROMPT"
EDGE_PROMPT_FILE = "UWF_EDGE_PROMPT_FILE"  # the prompt too long for a variable, by file


class Target(NamedTuple):
    """What an agent is asked to do: play ``role`` in ``thread``, told ``edge_prompt``."""

    thread: str
    role: str
    edge_prompt: str


def plain(argv: Sequence[str]) -> Target | None:
    """The target of ``<thread-id> <role>`` alone (two arguments, neither an option, as uwf
    passes them); None for any other command line."""
    if len(argv) != 2 or any(a.startswith("-") for a in argv):
        return None
    return Target(argv[0], argv[1], edge_prompt_from_env())


def edge_prompt_from_env() -> str:
    """The edge prompt uwf gave: ``$UWF_EDGE_PROMPT``, or the file ``$UWF_EDGE_PROMPT_FILE``
    names when the prompt was too long for an environment variable (docs/format.md, "The
    agent protocol")."""
    path = os.environ.get(EDGE_PROMPT_FILE)
    if not path:
        return os.environ.get(EDGE_PROMPT, "")
    try:
        with open(path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")
    except OSError as exc:
        raise UwfError(f"cannot read {path} (${EDGE_PROMPT_FILE}): {exc.strerror}") from None
