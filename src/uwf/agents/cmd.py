"""``uwf-cmd -- <command…>``: make any command-line agent a uwf agent, with no code (PORT §7).

The composed prompt goes to the command's stdin, or replaces a ``{prompt}`` argument;
``{thread}`` and ``{role}`` in its arguments are replaced too, and it runs with
``UWF_THREAD``, ``UWF_ROLE`` and ``UWF_EDGE_PROMPT`` set. Its stdout is the raw output for
the extract (a correction prompt re-runs it with the correction appended); its exit code,
stderr, duration and stdout are the step's detail. A non-zero exit fails the step.

Configured like any agent::

    agents: {claude: {command: uwf-cmd, args: ["--", "claude", "-p", "{prompt}"]}}
"""

from __future__ import annotations

import os
import subprocess
import time
from typing import Any

from uwf.agent_kit import runner
from uwf.agent_kit.context import AgentContext
from uwf.util.errors import AgentFailed, UsageError

DETAIL = runner.detail_schema(
    "CmdDetail",
    {
        "command": {"type": "array", "items": {"type": "string"}},
        "exitCode": {"type": "integer"},
        "durationMs": {"type": "integer"},
        "stderr": {"type": "string"},
    },
)
STDERR_KEEP = 20_000


class CmdAgent:
    label = "uwf-cmd"

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.prompt = ""
        self.turns: list[dict[str, Any]] = []

    def _argv(self, ctx: AgentContext, prompt: str) -> tuple[list[str], bool]:
        uses_prompt_arg = any("{prompt}" in a for a in self.command)
        argv = [
            a.replace("{thread}", ctx.thread)
            .replace("{role}", ctx.role)
            .replace("{prompt}", prompt)
            for a in self.command
        ]
        return argv, not uses_prompt_arg

    def _exec(self, ctx: AgentContext, prompt: str) -> dict[str, Any]:
        argv, via_stdin = self._argv(ctx, prompt)
        env = dict(
            os.environ, UWF_THREAD=ctx.thread, UWF_ROLE=ctx.role, UWF_EDGE_PROMPT=ctx.edge_prompt
        )
        began = time.monotonic()
        try:
            proc = subprocess.run(
                argv,
                input=prompt if via_stdin else "",
                capture_output=True,
                text=True,
                env=env,
                errors="replace",
            )
        except FileNotFoundError:
            raise AgentFailed(f"command not found: {argv[0]}") from None
        except OSError as exc:
            raise AgentFailed(f"command could not start: {argv[0]}: {exc.strerror}") from None
        duration = int((time.monotonic() - began) * 1000)
        if proc.returncode != 0:
            tail = " ".join(proc.stderr.split())[-500:]
            raise AgentFailed(
                f"command failed ({argv[0]}) with exit code {proc.returncode}"
                + (f": {tail}" if tail else "")
            )
        return {
            "argv": argv,
            "stdout": proc.stdout,
            "stderr": proc.stderr[-STDERR_KEEP:],
            "code": proc.returncode,
            "durationMs": duration,
        }

    def _detail(self, ctx: AgentContext, ran: dict[str, Any], correction: str | None = None) -> str:
        """The detail of this run, with the turns of every run so far (corrections included)."""
        if correction is not None:
            self.turns.append({"role": "user", "content": correction})
        self.turns.append({"role": "assistant", "content": ran["stdout"]})
        turns = runner.store_turns(ctx, self.turns)
        detail_type = ctx.store.put_schema(DETAIL)
        return ctx.store.put(
            detail_type,
            {
                "command": ran["argv"],
                "exitCode": ran["code"],
                "durationMs": ran["durationMs"],
                "stderr": ran["stderr"],
                "turns": turns,
            },
        )

    def run(self, ctx: AgentContext) -> runner.RunResult:
        from uwf.agent_kit.prompts import build_agent_prompt

        since, offset = ctx.since_last_visit()
        self.prompt = build_agent_prompt(
            format_instruction=ctx.format_instruction,
            role_def=ctx.role_def,
            task=ctx.task,
            steps=since,
            offset=offset,
            role=ctx.role,
            edge_prompt=ctx.edge_prompt,
            first_visit=True,
        )
        ran = self._exec(ctx, self.prompt)
        return runner.RunResult(ran["stdout"], self._detail(ctx, ran))

    def resume(self, ctx: AgentContext, session: str | None, message: str) -> runner.RunResult:
        ran = self._exec(ctx, f"{self.prompt}\n\n{message}")
        return runner.RunResult(ran["stdout"], self._detail(ctx, ran, correction=message))


def split_argv(args: list[str]) -> tuple[list[str], list[str]]:
    """(command, agent args): the engine appends ``<thread-id> <role>`` after the command."""
    if args[:1] == ["--"]:
        args = args[1:]
    if len(args) < 3:
        raise UsageError("usage: uwf-cmd -- <command> [args…] <thread-id> <role>")
    return args[:-2], args[-2:]


def main() -> None:
    def make(args: list[str]) -> tuple[runner.Agent, list[str]]:
        command, rest = split_argv(args)
        return CmdAgent(command), rest

    runner.cli(make)


if __name__ == "__main__":
    main()
