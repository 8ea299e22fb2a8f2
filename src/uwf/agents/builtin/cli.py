"""The ``uwf-builtin`` command line: its own options, then the agent kit's arguments."""

from __future__ import annotations

from collections.abc import Sequence

from uwf.adapters.llm import AGENT_TIMEOUT, TIMEOUT_ENV
from uwf.agent_kit import runner
from uwf.agents.builtin.agent import BuiltinAgent, Options
from uwf.agents.builtin.loop import MAX_TURNS
from uwf.agents.builtin.tools import COMMAND_TIMEOUT
from uwf.util.errors import UsageError
from uwf.util.numbers import positive_int, positive_seconds

CORRECTIONS = runner.MAX_CORRECTIONS
USAGE = (
    "usage: uwf-builtin [--model ALIAS] [--allow-outside] [--command-timeout S] "
    "[--http-timeout S] [--max-turns N] <thread-id> <role>"
)

HELP = f"""{USAGE}

An OpenAI-compatible tool-calling agent for uwf: it sends the role's messages to the
model of config.yaml and offers it three tools, read_file, write_file and run_command.
uwf spawns it as `uwf-builtin [options] <thread-id> <role>` with the edge prompt in
$UWF_EDGE_PROMPT (the v0.5.0 form `--thread <id> --role <role> --prompt <text>` works too).

options:
  --model ALIAS          model alias from config.yaml (default: defaultModel)
  --allow-outside        let read_file, write_file and run_command use paths outside
                         the working directory
  --command-timeout S    seconds before run_command kills a command (default {COMMAND_TIMEOUT:g})
  --http-timeout S       seconds to wait for each model call (default ${TIMEOUT_ENV},
                         else {AGENT_TIMEOUT:g})
  --max-turns N          model calls of the tool loop per step, nudges included
                         (default {MAX_TURNS}); after it, at most {CORRECTIONS} corrections
                         and one LLM extract (one call each)
  -h, --help             print this help and exit
"""

_VALUED = ("--model", "--command-timeout", "--http-timeout", "--max-turns")
_KIT = ("--thread", "--role", "--prompt")


def parse_options(argv: Sequence[str]) -> tuple[Options, list[str]]:
    """The leading uwf-builtin options; the rest is the agent-kit part (thread, role…)."""
    options = Options()
    args = list(argv)
    while args and args[0].startswith("--") and args[0] not in _KIT:
        arg = args.pop(0)
        if arg == "--":
            break
        if arg == "--allow-outside":
            options.allow_outside = True
            continue
        name, eq, value = arg.partition("=")
        if name not in _VALUED:
            raise UsageError(f"unknown option {name}; {USAGE}")
        if not eq:
            if not args:
                raise UsageError(f"{name} needs a value; {USAGE}")
            value = args.pop(0)
        _set(options, name, value)
    return options, args


def _set(options: Options, name: str, value: str) -> None:
    if name == "--model":
        if not value.strip():
            raise UsageError("--model needs a model alias")
        options.model = value
    elif name == "--command-timeout":
        options.command_timeout = positive_seconds(value, name, UsageError)
    elif name == "--http-timeout":
        options.http_timeout = positive_seconds(value, name, UsageError)
    else:
        options.max_turns = positive_int(value, name, UsageError)


def main(argv: Sequence[str] | None = None) -> None:
    def make(args: list[str]) -> tuple[runner.Agent, list[str]]:
        options, rest = parse_options(args)
        return BuiltinAgent(options), rest

    runner.cli(make, argv, HELP)
