"""The ``uwf-hermes`` command line: ``hermes chat`` options, then the agent kit's arguments."""

from __future__ import annotations

from collections.abc import Sequence

from uwf.agent_kit import runner
from uwf.agents.hermes.agent import HermesAgent
from uwf.agents.hermes.process import PACKAGE
from uwf.util.errors import UsageError

#: Options uwf-hermes sets itself; passing them through would break the run.
RESERVED = ("-q", "--query", "-r", "--resume", "-c", "--continue")

USAGE = (
    "usage: uwf-hermes [hermes chat options…] <thread-id> <role>  |  "
    "uwf-hermes [hermes chat options…] --thread <id> --role <role> --prompt <text>"
)

HELP = f"""{USAGE}

Runs the Hermes agent (pip install {PACKAGE}) for one uwf step, with your own Hermes
setup ($HERMES_HOME, else ~/.hermes; configure it with `hermes setup`):
`hermes chat -Q -q <prompt> --source tool [--resume <session> --no-restore-cwd] [options…]`.
A role's re-entry resumes its earlier Hermes session; the step's detail is read back
with `hermes sessions export`. uwf spawns it as `uwf-hermes [options…] <thread-id> <role>`
with the edge prompt in $UWF_EDGE_PROMPT.

options:
  [hermes chat options…]  everything before <thread-id> <role> goes to `hermes chat`
                          as it is, e.g. `-m <model> --provider <name> --max-turns 30`;
                          not {", ".join(RESERVED)} (uwf-hermes sets the prompt
                          and the session itself)
  -h, --help              print this help and exit (as the first argument)
"""


def split_argv(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """(options for ``hermes chat``, the agent-kit arguments)."""
    rest = list(args)
    if "--thread" in rest or "--role" in rest:
        kit: list[str] = []
        for flag in ("--thread", "--role", "--prompt"):
            if flag in rest:
                i = rest.index(flag)
                if i + 1 >= len(rest):
                    raise UsageError(f"{flag} needs a value; {USAGE}")
                kit += [flag, rest[i + 1]]
                del rest[i : i + 2]
        options = rest
    else:
        if len(rest) < 2:
            raise UsageError(USAGE)
        options, kit = rest[:-2], rest[-2:]
    for option in options:
        name = option.split("=", 1)[0]
        if name in RESERVED:
            raise UsageError(
                f"uwf-hermes sets {name} itself; remove it from the agent's args "
                "(the prompt and the session come from uwf)"
            )
    return options, kit


def main(argv: Sequence[str] | None = None) -> None:
    def make(args: list[str]) -> tuple[runner.Agent, list[str]]:
        options, kit = split_argv(args)
        return HermesAgent(options), kit

    runner.cli(make, argv, HELP)
