"""``HermesAgent``: one step's Hermes runs — the first run, then any correction runs on the
same session — and the step's detail."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from uwf.agent_kit import runner
from uwf.agent_kit.context import AgentContext
from uwf.agents.hermes.process import (
    PACKAGE,
    HermesMissing,
    chat_argv,
    export_session,
    failure_text,
    hermes_executable,
    parse_session_id,
    pass_stderr,
    run_hermes,
)
from uwf.agents.hermes.session import Run, run_of
from uwf.model.cost import COST_FIELDS, Cost
from uwf.util.errors import AgentFailed, UwfError

AGENT = "hermes"  # the session-cache name: <root>/cache/hermes-sessions.json
LABEL = "uwf-hermes"

# The turns are the kit's AgentTurn nodes (runner.TURN_SCHEMA), like every other agent's:
# Hermes only ever writes assistant and tool turns (session.to_turn skips the rest), which
# the shared shape holds as they are, so a schema of its own would only add a second type
# for the same data.
DETAIL = runner.detail_schema(
    "HermesDetail",
    runner.SESSION_FIELDS,
    {**COST_FIELDS, "sessionUsage": COST_FIELDS["usage"]},  # the session's counters at the end
)
DETAIL["description"] = "A step run by the Hermes agent (see docs/agents.md, uwf-hermes)."


@dataclass
class HermesAgent:
    """One step's Hermes runs: the first run, then any correction runs on the same session."""

    options: list[str] = field(default_factory=list)
    label: str = LABEL
    runs: list[Run] = field(default_factory=list)

    def _chat(self, ctx: AgentContext, prompt: str, resume: str | None) -> Run:
        exe = hermes_executable()
        what = "hermes chat" + (f" --resume {resume}" if resume else "")
        launched = time.time()
        proc = run_hermes(chat_argv(exe, prompt, self.options, resume), what)
        pass_stderr(proc.stderr)
        session_id = parse_session_id(proc.stderr, proc.stdout)
        if proc.returncode != 0:
            said = failure_text(proc.stdout, proc.stderr)
            raise AgentFailed(
                f"{what} failed with exit code {proc.returncode}"
                + (f": {said}" if said else "")
                + (f" (session {session_id})" if session_id else "")
            )
        if session_id is None:
            raise AgentFailed(
                f'{what} printed no "session_id: <id>" line, so its session cannot be read '
                f"(is `hermes` the Hermes agent from the {PACKAGE} package? "
                "check `hermes --version`)"
            )
        run = run_of(export_session(exe, session_id), launched, resume is not None)
        if not run.output.strip():
            raise AgentFailed(
                f"{what} finished without an answer: session {session_id} has no assistant "
                "message with text in this run"
            )
        from uwf.agent_kit import session_cache

        session_cache.put(ctx.root, AGENT, ctx.thread, ctx.role, run.session)
        return run

    def _detail(self, ctx: AgentContext) -> str:
        last = self.runs[-1]
        duration = round((last.end - self.runs[0].start) * 1000)
        turns = [t for run in self.runs for t in run.turns]
        extra = {}
        if last.usage is not None:
            extra["sessionUsage"] = last.usage.usage_json()
            ctx.meter.usage = _step_usage(ctx, last)
        return runner.store_session_detail(
            ctx, DETAIL, last.session, last.model, duration, turns, extra
        )

    def _prompt(self, ctx: AgentContext, first_visit: bool) -> str:
        from uwf.agent_kit.prompts import agent_prompt

        return agent_prompt(ctx, first_visit)

    def run(self, ctx: AgentContext) -> runner.RunResult:
        from uwf.agent_kit import session_cache

        hermes_executable()  # fail before anything else when Hermes is not installed
        cached = session_cache.get(ctx.root, AGENT, ctx.thread, ctx.role)
        run: Run | None = None
        if cached and not ctx.is_first_visit:
            try:
                run = self._chat(ctx, self._prompt(ctx, first_visit=False), resume=cached)
            except HermesMissing:
                raise
            except UwfError as exc:
                sys.stderr.write(
                    f"uwf-hermes: could not continue Hermes session {cached} ({exc.message}); "
                    "starting a new session with the full prompt\n"
                )
                sys.stderr.flush()
        if run is None:
            run = self._chat(ctx, self._prompt(ctx, first_visit=True), resume=None)
        self.runs = [run]
        return runner.RunResult(run.output, self._detail(ctx), run.session)

    def resume(
        self, ctx: AgentContext, session: str | None, message: str
    ) -> runner.RunResult | None:
        """A correction prompt, sent into the step's session with ``--resume``."""
        if not session:
            return None  # no session: nothing to continue
        run = self._chat(ctx, message, resume=session)
        self.runs.append(run)
        return runner.RunResult(run.output, self._detail(ctx), run.session)


def _step_usage(ctx: AgentContext, last: Run) -> Cost | None:
    """This step's tokens: the session's counters now, less what they were at the end of the
    role's last visit when that visit ran in the same session (None when that is unknown)."""
    assert last.usage is not None
    before = Cost()
    previous = ctx.last_visit
    if previous is not None and previous["agent"] == LABEL:
        node = ctx.store.get(previous["detail"])
        detail = node.payload if node is not None and isinstance(node.payload, dict) else {}
        if detail.get("sessionId") == last.session:
            known = Cost.of_json(detail.get("sessionUsage"))
            if known is None:
                return None
            before = known
    now = last.usage
    return Cost(
        0,
        max(0, now.prompt_tokens - before.prompt_tokens),
        max(0, now.completion_tokens - before.completion_tokens),
        max(0, now.total_tokens - before.total_tokens),
        max(0, now.calls - before.calls),
    )
