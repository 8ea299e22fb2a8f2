"""``BuiltinAgent``: one step of ``uwf-builtin`` — the model from config.yaml, the messages,
the tool loop, and the detail.

Detail. Every turn (assistant replies, tool results, the nudges and warnings sent) is an
``AgentTurn`` node; the detail node (``BuiltinDetail``) is ``{sessionId, model, duration,
turnCount, turns}``. The turns are kept in memory: nothing is written to
``<root>/sessions/``. A correction continues the in-memory session of the same process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from uwf.adapters import llm
from uwf.agent_kit import runner
from uwf.agent_kit.context import AgentContext
from uwf.agent_kit.live import Turns
from uwf.agents.builtin.loop import CORRECTION_TURNS, MAX_TURNS, final_output, run_loop, say
from uwf.agents.builtin.messages import build_messages
from uwf.agents.builtin.tools import COMMAND_TIMEOUT, TOOLS, Tools, command_env
from uwf.model.cost import COST_FIELDS
from uwf.util.errors import InvalidInput, UwfError

LABEL = "uwf-builtin"

DETAIL = runner.detail_schema("BuiltinDetail", runner.SESSION_FIELDS, COST_FIELDS)


@dataclass
class Options:
    model: str | None = None
    allow_outside: bool = False
    command_timeout: float = COMMAND_TIMEOUT
    http_timeout: float | None = None  # None: $UWF_LLM_TIMEOUT, else llm.AGENT_TIMEOUT
    max_turns: int = MAX_TURNS


@dataclass
class _Session:
    model: str
    started: float
    messages: list[dict[str, Any]]
    turns: list[dict[str, Any]] = field(default_factory=list)


class ModelChat:
    """The loop's ``chat``: one completion with the three tools declared.

    Tools are always declared (a history with tool calls needs them on some providers); with
    tools off the model is told not to use them (``tool_choice: none``).
    """

    def __init__(self, client: llm.Client) -> None:
        self.client = client

    def __call__(self, messages: list[dict[str, Any]], tools_on: bool) -> llm.Reply:
        return self.client.chat(messages, tools=TOOLS, tool_choice="auto" if tools_on else "none")


class BuiltinAgent:
    label = LABEL

    def __init__(self, options: Options | None = None) -> None:
        self.options = options or Options()
        self.sessions: dict[str, _Session] = {}
        self.chat: ModelChat | None = None
        self.tools: Tools | None = None

    def _setup(self, ctx: AgentContext) -> tuple[ModelChat, Tools]:
        from uwf.config.config import load_config, resolve_model

        config = load_config(ctx.root)
        alias = self.options.model or config.default_model
        if alias is None:
            raise InvalidInput(
                "uwf-builtin needs a model: set defaultModel (with its providers and models "
                "entries) in config.yaml, or pass --model <alias>"
            )
        spec = resolve_model(config, alias, ctx.env)
        client = llm.Client(
            spec.base_url,
            spec.api_key,
            spec.model,
            timeout=llm.resolve_timeout(llm.AGENT_TIMEOUT, self.options.http_timeout),
            limit_hint=f"--http-timeout or ${llm.TIMEOUT_ENV}",
            on_reply=ctx.meter.add,  # the step's tokens, for its detail
        )
        self.chat = ModelChat(client)
        self.tools = Tools(
            ctx.cwd,  # the step's directory (in uwf's process: never the process's own)
            allow_outside=self.options.allow_outside,
            command_timeout=self.options.command_timeout,
            env=command_env(config, ctx.env),
        )
        return self.chat, self.tools

    def _detail(self, ctx: AgentContext, session_id: str, session: _Session) -> str:
        duration = int((time.monotonic() - session.started) * 1000)
        return runner.store_session_detail(
            ctx, DETAIL, session_id, session.model, duration, session.turns
        )

    def run(self, ctx: AgentContext) -> runner.RunResult:
        from uwf.agent_kit.prompts import prompt_inputs
        from uwf.util.ulid import new_thread_id

        chat, tools = self._setup(ctx)
        messages = build_messages(
            **prompt_inputs(ctx), cwd=tools.cwd, allow_outside=self.options.allow_outside
        )
        session = _Session(chat.client.model, time.monotonic(), messages)
        result = run_loop(
            chat, messages, tools_on=True, max_turns=self.options.max_turns, run_tool=tools
        )
        session.messages, session.turns = result.messages, result.turns
        session_id = new_thread_id()
        self.sessions[session_id] = session
        detail = self._detail(ctx, session_id, session)
        return runner.RunResult(final_output(result.text), detail, session_id)

    def resume(self, ctx: AgentContext, session: str | None, message: str) -> runner.RunResult:
        """A correction: the same conversation plus ``message``, one call, tools off.

        The detail returned covers the whole session (first run and corrections).
        """
        known = self.sessions.get(session or "")
        if known is None or self.chat is None or self.tools is None or session is None:
            raise UwfError(f"uwf-builtin: unknown session {session}")
        messages, turns = list(known.messages), Turns(known.turns)
        say(messages, turns, message)  # published before the turns of the loop below
        result = run_loop(
            self.chat, messages, tools_on=False, max_turns=CORRECTION_TURNS, run_tool=self.tools
        )
        known.messages, known.turns = result.messages, turns + result.turns
        detail = self._detail(ctx, session, known)
        return runner.RunResult(final_output(result.text), detail, session)
