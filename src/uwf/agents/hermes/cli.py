"""The ``uwf-hermes`` command line: ``hermes chat`` options, then the agent kit's arguments."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from uwf.agent_kit import args, runner
from uwf.agents.hermes.agent import HermesAgent
from uwf.agents.hermes.process import PACKAGE

#: Options uwf-hermes sets itself; passing them through would break the run.
RESERVED = ("-q", "--query", "-r", "--resume", "-c", "--continue")

DESCRIPTION = f"""\
Runs the Hermes agent (pip install {PACKAGE}) for one uwf step, with your own Hermes
setup ($HERMES_HOME, else ~/.hermes; configure it with `hermes setup`):
`hermes chat -Q -q <prompt> --source tool [--resume <session> --no-restore-cwd] [options…]`.
A role's re-entry resumes its earlier Hermes session; the step's detail is read back
with `hermes sessions export`. uwf spawns it as `uwf-hermes [options…] <thread-id> <role>`
with the edge prompt in $UWF_EDGE_PROMPT (the v0.5.0 form `--thread <id> --role <role>
--prompt <text>` works too).

[hermes chat options…]: everything before <thread-id> <role> goes to `hermes chat` as it
is, e.g. `-m <model> --provider <name> --max-turns 30`; not {", ".join(RESERVED)}
(uwf-hermes sets the prompt and the session itself). -h/--help is uwf-hermes' own only as
the first argument.
"""


def make_parser() -> args.Parser:
    return args.parser("uwf-hermes", DESCRIPTION, "[hermes chat options…]", passthrough=True)


def chat_options(parser: args.Parser, given: argparse.Namespace) -> list[str]:
    """The options for ``hermes chat``: what came before the kit's arguments, none of them
    one that uwf-hermes sets itself."""
    for option in given.passed:
        name = option.split("=", 1)[0]
        if name in RESERVED:
            args.fail(
                parser,
                f"uwf-hermes sets {name} itself; remove it from the agent's args "
                "(the prompt and the session come from uwf)",
            )
    return list(given.passed)


def main(argv: Sequence[str] | None = None) -> None:
    parser = make_parser()
    runner.cli(parser, lambda given: HermesAgent(chat_options(parser, given)), argv)
