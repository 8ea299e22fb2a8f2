"""``uwf-builtin``: an OpenAI-compatible tool-calling agent (docs/agents.md).

    uwf-builtin [--model ALIAS] [--allow-outside] [--command-timeout S] [--http-timeout S]
                [--max-turns N] <thread-id> <role>

It needs nothing but a model in ``config.yaml`` (``defaultModel``, or ``--model <alias>``):
the loop talks to ``POST {baseUrl}/chat/completions`` through ``uwf.adapters.llm`` and
offers the model three tools, ``read_file``, ``write_file`` and ``run_command``.

- ``messages``: what the model is told (system message, earlier visits replayed, this visit);
- ``loop``: the tool loop (nudges, the deadline warning, the end of a step);
- ``tools``: the three tools and their limits;
- ``agent``: the agent kit's ``run``/``resume``, the model client, the detail;
- ``cli``: options, help and the console entry.

Model server errors (HTTP status, timeout — ``--http-timeout``, else ``$UWF_LLM_TIMEOUT``,
else 300 s —, a connection failure, a body that is not JSON, no choices) fail the step with
one line. There are no retries: the step can simply be run again.
"""

from uwf.agents.builtin.agent import BuiltinAgent, Options
from uwf.agents.builtin.cli import main, make_parser, options_of
from uwf.agents.builtin.loop import (
    NUDGE,
    LoopResult,
    deadline_due,
    deadline_message,
    final_output,
    last_assistant_text,
    needs_nudge,
    process_tool_calls,
    run_loop,
)
from uwf.agents.builtin.messages import build_messages
from uwf.agents.builtin.tools import ToolError, Tools, command_env, resolve_path

__all__ = [
    "NUDGE",
    "BuiltinAgent",
    "LoopResult",
    "Options",
    "ToolError",
    "Tools",
    "build_messages",
    "command_env",
    "deadline_due",
    "deadline_message",
    "final_output",
    "last_assistant_text",
    "main",
    "make_parser",
    "needs_nudge",
    "options_of",
    "process_tool_calls",
    "resolve_path",
    "run_loop",
]
