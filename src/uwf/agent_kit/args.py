"""The command line every agent shares (docs/agents.md, "The command line"): one argparse
parser, made by ``parser``, to which an agent adds its own options.

    <agent> [its options] <thread-id> <role>        (the edge prompt in $UWF_EDGE_PROMPT)
    <agent> [its options] --thread <id> --role <role> [--prompt <text>]   (v0.5.0's form)

``-h``/``--help`` prints the help (its usage, the agent's text, every option) and exits 0. A
usage error is one line on stderr, ``error: <problem>; usage: <usage>``, and exit 2
(``UsageError``): argparse's words for what it finds, the agent's own for the values it
checks after (``fail``). An agent that hands everything before ``<thread-id> <role>`` to
another program (``uwf-cmd``, ``uwf-hermes``) is made with ``passthrough``: that part is
not parsed, but kept as ``passed``.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import NoReturn

from uwf.agent_kit.target import EDGE_PROMPT, EDGE_PROMPT_FILE, Target, edge_prompt_from_env
from uwf.util.errors import UsageError

__all__ = [
    "EDGE_PROMPT",
    "EDGE_PROMPT_FILE",
    "NAMED",
    "Parser",
    "Target",
    "edge_prompt_from_env",
    "fail",
    "kit",
    "parser",
    "split",
    "target",
]

NAMED = ("--thread", "--role", "--prompt")  # v0.5.0's form


class Parser(argparse.ArgumentParser):
    """argparse with uwf's usage errors (one line, exit 2) and the kit's arguments."""

    passthrough = False  # everything before the kit's arguments is kept, not parsed
    named = True  # v0.5.0's form is understood

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message}; {' '.join(self.format_usage().split())}")

    def parse(self, argv: Sequence[str]) -> tuple[argparse.Namespace, Target]:
        """The agent's options (``passed``: what a passthrough agent hands on) and its
        target."""
        passed, rest = split(list(argv), self.named) if self.passthrough else ([], list(argv))
        ns = self.parse_args(rest)
        ns.passed = passed
        return ns, target(self, ns)


def parser(
    prog: str,
    description: str,
    head: str = "[options]",
    passthrough: bool = False,
    named: bool = True,
) -> Parser:
    """The parser of agent ``prog``: ``head`` is what its usage shows before
    ``<thread-id> <role>``; ``description`` is the text of its help. ``passthrough``: keep
    what comes before the kit's arguments (the last two, or with ``named`` the v0.5.0 form's
    flags wherever they are) as ``passed``, unparsed."""
    p = Parser(
        prog=prog,
        usage=f"%(prog)s {head} <thread-id> <role>".replace("  ", " "),
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    p.passthrough, p.named = passthrough, named
    p.add_argument("thread", nargs="?", metavar="<thread-id>", help="the thread (a ULID)")
    p.add_argument(
        "role",
        nargs="?",
        metavar="<role>",
        help=f"the role to play (the edge prompt in ${EDGE_PROMPT})",
    )
    for flag in NAMED:  # documented in docs/agents.md, not in every help
        p.add_argument(flag, dest=f"named_{flag[2:]}", help=argparse.SUPPRESS)
    return p


def target(p: Parser, ns: argparse.Namespace) -> Target:
    if ns.named_thread is not None or ns.named_role is not None:
        if not ns.named_thread or not ns.named_role or ns.thread is not None:
            fail(p, "v0.5.0's form is --thread <id> --role <role> [--prompt <text>]")
        return Target(ns.named_thread, ns.named_role, ns.named_prompt or "")
    if ns.thread is None or ns.role is None:
        fail(p, "expected <thread-id> <role>")
    return Target(ns.thread, ns.role, edge_prompt_from_env())


def split(argv: list[str], named: bool = True) -> tuple[list[str], list[str]]:
    """(what comes before the kit's arguments, the kit's arguments): the last two, or with
    ``named`` the v0.5.0 form's flags and their values wherever they are."""
    if not named or not any(a in ("--thread", "--role") for a in argv):
        return (argv[:-2], argv[-2:]) if len(argv) >= 2 else ([], argv)
    before, kit, i = [], [], 0
    while i < len(argv):
        if argv[i] in NAMED:
            kit += argv[i : i + 2]
            i += 2
        else:
            before.append(argv[i])
            i += 1
    return before, kit


def kit(argv: Sequence[str]) -> Target:
    """The target of the kit's arguments alone (``[<thread-id>, <role>]``)."""
    return parser("agent", "").parse(argv)[1]


def fail(p: Parser, message: str) -> NoReturn:
    """A usage error found after parsing (a bad value): the same line as argparse's."""
    p.error(message)
