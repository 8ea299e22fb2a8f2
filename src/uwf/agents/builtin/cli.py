"""The ``uwf-builtin`` command line: its own options, then the agent kit's arguments."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from uwf.adapters.llm import AGENT_TIMEOUT, TIMEOUT_ENV
from uwf.agent_kit import args, runner
from uwf.agents.builtin.agent import BuiltinAgent, Options
from uwf.agents.builtin.loop import MAX_TURNS
from uwf.agents.builtin.tools import COMMAND_TIMEOUT
from uwf.util.errors import UsageError
from uwf.util.numbers import positive_int, positive_seconds

if TYPE_CHECKING:
    from uwf.model.agentcall import AgentCall

DESCRIPTION = """\
An OpenAI-compatible tool-calling agent for uwf: it sends the role's messages to the
model of config.yaml and offers it three tools, read_file, write_file and run_command.
uwf spawns it as `uwf-builtin [options] <thread-id> <role>` with the edge prompt in
$UWF_EDGE_PROMPT (the v0.5.0 form `--thread <id> --role <role> --prompt <text>` works too).
"""


def make_parser() -> args.Parser:
    parser = args.parser("uwf-builtin", DESCRIPTION)
    add = parser.add_argument
    add("--model", metavar="ALIAS", help="model alias from config.yaml (default: defaultModel)")
    add(
        "--allow-outside",
        action="store_true",
        help="let read_file, write_file and run_command use paths outside the working directory",
    )
    add(
        "--command-timeout",
        metavar="S",
        help=f"seconds before run_command kills a command (default {COMMAND_TIMEOUT:g})",
    )
    add(
        "--http-timeout",
        metavar="S",
        help=f"seconds to wait for each model call (default ${TIMEOUT_ENV}, else "
        f"{AGENT_TIMEOUT:g})",
    )
    add(
        "--max-turns",
        metavar="N",
        help=f"model calls of the tool loop per step, nudges included (default {MAX_TURNS}); "
        f"after it, at most {runner.MAX_CORRECTIONS} corrections and one LLM extract (one call "
        "each)",
    )
    return parser


def options_of(parser: args.Parser, given: argparse.Namespace) -> Options:
    """The agent's options from what was given, each value checked (a usage error names it)."""
    options = Options(allow_outside=given.allow_outside)
    try:
        if given.model is not None:
            if not given.model.strip():
                raise UsageError("--model needs a model alias")
            options.model = given.model
        if given.command_timeout is not None:
            options.command_timeout = positive_seconds(
                given.command_timeout, "--command-timeout", UsageError
            )
        if given.http_timeout is not None:
            options.http_timeout = positive_seconds(
                given.http_timeout, "--http-timeout", UsageError
            )
        if given.max_turns is not None:
            options.max_turns = positive_int(given.max_turns, "--max-turns", UsageError)
    except UsageError as exc:
        args.fail(parser, exc.message)
    return options


def main(argv: Sequence[str] | None = None) -> None:
    parser = make_parser()
    runner.cli(parser, lambda given: BuiltinAgent(options_of(parser, given)), argv)


def inprocess(call: AgentCall) -> str:
    """``uwf-builtin`` as a Python agent, run in uwf's process (docs/api.md, "Python
    agents"): ``agents: {builtin: {python: uwf-builtin, args: [--model, ALIAS]}}`` in
    config.yaml. The same options, StepNode and detail as the command; its tools work in the
    step's directory with the step's environment, secrets removed as for the command."""
    from uwf.agent_kit.inprocess import run

    parser = make_parser()
    return run(BuiltinAgent(options_of(parser, parser.parse_args(list(call.args)))), call)
