"""``uwf-cmd -- <command…>``: make any command-line agent a uwf agent, with no code.

The composed prompt goes to the command's stdin, or replaces a ``{prompt}`` argument (or
``{prompt_file}``, by the path of a private file holding it: an argument holds at most 128
KiB); ``{thread}`` and ``{role}`` in its arguments are replaced too, and it runs with
``UWF_THREAD``, ``UWF_ROLE`` and ``UWF_EDGE_PROMPT`` (or ``UWF_EDGE_PROMPT_FILE``) set, and
``UWF_ARTIFACTS_DIR`` as uwf gave it: the files the command leaves there are stored as the
step's artifacts. Store credentials and the ``secrets:`` of config.yaml are not passed on.
Its stdout is the raw output for the extract (a correction prompt re-runs it with the
correction appended); its stderr is passed through live, line by line as it arrives; its exit code,
stderr (the last 20,000 characters), duration and stdout are the step's detail. A non-zero
exit fails the step.

Configured like any agent (docs/agents.md)::

    agents: {claude: {command: uwf-cmd, args: ["--", "claude", "-p", "{prompt}"]}}

or run in uwf's own process (``inprocess``; docs/api.md, "Python agents"), one interpreter
fewer per step, with the same arguments, the same command and the same StepNode::

    agents: {claude: {python: uwf-cmd, args: ["--", "claude", "-p", "{prompt}"]}}

The command is still a process of its own (its own process group, killed with uwf even by
SIGKILL); in uwf's process it gets the environment uwf built for the step (``ctx.env``),
runs in the step's directory, its stderr goes to the agent's (shown live, its tail quoted),
and a stop — the step's timeout, ``thread kill``, ``thread stop``, a worker's drain — kills
its group at once instead of killing uwf-cmd's process.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uwf.adapters import process
from uwf.agent_kit import args, runner
from uwf.agent_kit.context import AgentContext
from uwf.model.cost import COST_FIELDS
from uwf.util.errors import AgentFailed

if TYPE_CHECKING:
    from uwf.model.agentcall import AgentCall

DESCRIPTION = """\
Makes any command-line agent (claude -p, codex exec, a script) a uwf agent. For each
step it composes the full prompt (deliverable format, role, task, what happened since
the role's last turn, the moderator's instruction) and runs <command> [args…] without
a shell:

  - an argument containing {prompt} gets the prompt, one containing {prompt_file}
    the path of a file holding it (stdin is then empty); otherwise the prompt goes to
    the command's stdin. A prompt over 128 KiB fits no argument: use stdin or the file;
  - {thread} and {role} in arguments are replaced; the command gets $UWF_THREAD,
    $UWF_ROLE, $UWF_EDGE_PROMPT (or $UWF_EDGE_PROMPT_FILE, a file, when the prompt is
    too long for a variable) and $UWF_ARTIFACTS_DIR: every file it leaves in that
    directory is stored as an artifact of the step (uwf step artifacts <step>); store
    credentials and the variables listed under secrets: in config.yaml are left out;
  - its stdout is the answer (YAML frontmatter, else up to two correction runs, else
    the LLM extract; at most 8 MiB); its stderr is passed through live; a non-zero exit
    fails the step.

uwf spawns it as `uwf-cmd -- <command> [args…] <thread-id> <role>`, e.g. in config.yaml:
  agents: {claude: {command: uwf-cmd, args: ["--", "claude", "-p", "{prompt}"]}
or, with python: uwf-cmd instead of command: uwf-cmd, runs it in uwf's own process:
one interpreter fewer per step, the command still a process of its own.
"""

DETAIL = runner.detail_schema(
    "CmdDetail",
    {
        "command": {"type": "array", "items": {"type": "string"}},
        "exitCode": {"type": "integer"},
        "durationMs": {"type": "integer"},
        "stderr": {"type": "string"},
    },
    {"usage": COST_FIELDS["usage"], "total": COST_FIELDS["total"]},
)
STDERR_KEEP = 20_000
# The largest answer (stdout) read from the command: an agent's output is hostile, and with
# ``python: uwf-cmd`` it is read into uwf's own process (docs/agents.md, "uwf-cmd")
MAX_ANSWER = 8 << 20


class CmdAgent:
    label = "uwf-cmd"

    def __init__(self, command: list[str]) -> None:
        self.command = command
        self.prompt = ""
        self.turns: list[dict[str, Any]] = []

    def _argv(self, ctx: AgentContext, prompt: str, prompt_file: str) -> tuple[list[str], bool]:
        uses_prompt_arg = any("{prompt}" in a or "{prompt_file}" in a for a in self.command)
        argv = [
            a.replace("{thread}", ctx.thread)
            .replace("{role}", ctx.role)
            .replace("{prompt_file}", prompt_file)
            .replace("{prompt}", prompt)
            for a in self.command
        ]
        for arg in argv:
            if not process.fits_arg(arg):
                raise AgentFailed(
                    f"the prompt is {len(arg.encode())} bytes, over the limit of "
                    f"{process.ARG_LIMIT - 1} bytes Linux sets on one command-line argument "
                    "(MAX_ARG_STRLEN): give it to the command on its stdin (no {prompt} "
                    "argument) or as a file ({prompt_file})"
                )
        return argv, not uses_prompt_arg

    def _exec(self, ctx: AgentContext, prompt: str) -> dict[str, Any]:
        import tempfile

        from uwf.config.secrets import command_env, model_config

        # the agent's environment (os.environ in a process, the step's in uwf's) carries
        # UWF_ARTIFACTS_DIR when uwf gave one: the command inherits it; store credentials and
        # the secrets: of config.yaml it does not (docs/agents.md, uwf-cmd)
        env = command_env(ctx.env, model_config(ctx.root), provider_keys=True)
        env.update(UWF_THREAD=ctx.thread, UWF_ROLE=ctx.role)
        with tempfile.TemporaryDirectory(prefix="uwf-cmd-") as scratch:  # 0700, removed after
            prompt_file = os.path.join(scratch, "prompt.md")
            if any("{prompt_file}" in a for a in self.command):
                _write_private(prompt_file, prompt)
            argv, via_stdin = self._argv(ctx, prompt, prompt_file)
            env.pop("UWF_EDGE_PROMPT_FILE", None)
            if process.fits_env("UWF_EDGE_PROMPT", ctx.edge_prompt):
                env["UWF_EDGE_PROMPT"] = ctx.edge_prompt
            else:  # too long for the environment: a file, as uwf gives it (docs/agents.md)
                env.pop("UWF_EDGE_PROMPT", None)
                env["UWF_EDGE_PROMPT_FILE"] = os.path.join(scratch, "edge-prompt.md")
                _write_private(env["UWF_EDGE_PROMPT_FILE"], ctx.edge_prompt)
            began = time.monotonic()
            code, stdout, stderr = run_live(argv, prompt if via_stdin else "", env, ctx.call)
        duration = int((time.monotonic() - began) * 1000)
        if code != 0:
            tail = " ".join(stderr.split())[-500:]
            raise AgentFailed(
                f"command failed ({argv[0]}) with exit code {code}" + (f": {tail}" if tail else "")
            )
        return {
            "argv": argv,
            "stdout": stdout,
            "stderr": stderr,
            "code": code,
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
                "stderr": ran["stderr"],
                "turns": turns,
                **runner.cost_fields(ctx),  # durationMs: the whole step so far, corrections too
            },
        )

    def run(self, ctx: AgentContext) -> runner.RunResult:
        from uwf.agent_kit.prompts import agent_prompt

        self.prompt = agent_prompt(ctx, first_visit=True)
        ran = self._exec(ctx, self.prompt)
        return runner.RunResult(ran["stdout"], self._detail(ctx, ran))

    def resume(self, ctx: AgentContext, session: str | None, message: str) -> runner.RunResult:
        ran = self._exec(ctx, f"{self.prompt}\n\n{message}")
        return runner.RunResult(ran["stdout"], self._detail(ctx, ran, correction=message))


def _write_private(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as fh:
        fh.write(text)


def run_live(
    argv: Sequence[str], stdin: str, env: dict[str, str], call: AgentCall | None = None
) -> tuple[int, str, str]:
    """Run ``argv`` without a shell: (exit code, whole stdout, the tail of stderr); a stdout
    over ``MAX_ANSWER`` bytes fails the run.

    Through ``uwf.adapters.process``: its own process group (killed with uwf-cmd, even by
    SIGKILL), the prompt fed to its stdin from a thread, its stderr copied to ours line by
    line as it arrives with the last ``STDERR_KEEP`` characters kept for the detail.

    ``call``: uwf-cmd runs in uwf's process (``inprocess``). The group then dies with uwf
    (its watchdog), runs in the step's directory, its stderr goes to the call's, and the
    group is killed as soon as the step stops wanting the answer (``call.should_stop``:
    timeout, kill, stop, drain) — at the deadline itself, or within ``process.POLL``.
    """
    cwd, stop, to, timeout = None, None, None, None
    if call is not None:
        if call.should_stop():  # e.g. before a correction's run: start nothing
            raise AgentFailed(f"the step stopped: command not started ({argv[0]})")
        cwd, stop, timeout = call.cwd, call.should_stop, call.remaining()
        to = call.stderr.write if call.stderr is not None else None
    try:
        ran = process.run(
            argv,
            env,
            stdin=stdin,
            stderr_prefix="",
            stdout_limit=MAX_ANSWER,  # past it the step fails below: memory stays bounded
            stderr_keep=STDERR_KEEP,
            cwd=cwd,
            should_stop=stop,
            timeout=timeout,
            stderr_to=to,
        )
    except process.CannotStart as exc:
        if isinstance(exc.cause, FileNotFoundError):
            raise AgentFailed(f"command not found: {argv[0]}") from None
        reason = exc.cause.strerror or exc.cause
        raise AgentFailed(f"command could not start: {argv[0]}: {reason}") from None
    if ran.timed_out or ran.stopped:  # the step has gone on without this answer
        why = "timed out" if ran.timed_out else "stopped"
        raise AgentFailed(f"the step {why}: command killed ({argv[0]})")
    if ran.stdout_dropped:
        raise AgentFailed(
            f"the command printed more than {MAX_ANSWER} bytes, the most an answer may have "
            f"({argv[0]})"
        )
    return ran.code, ran.stdout, ran.stderr_tail


def _command(passed: Sequence[str]) -> list[str]:
    """The command of ``uwf-cmd``'s arguments (those before ``<thread-id> <role>``)."""
    command = list(passed)
    return command[1:] if command[:1] == ["--"] else command


def _parser() -> args.Parser:
    return args.parser(
        "uwf-cmd", DESCRIPTION, "-- <command> [args…]", passthrough=True, named=False
    )


def inprocess(call: AgentCall) -> str:
    """``uwf-cmd`` as a Python agent, run in uwf's process (docs/api.md, "Python agents";
    docs/agents.md, uwf-cmd): ``agents: {claude: {python: uwf-cmd, args: ["--", "claude",
    "-p", "{prompt}"]}}`` in config.yaml, or ``--agent "python:uwf-cmd -- <command…>"``. The
    same arguments, command, StepNode and detail as the process, one interpreter fewer."""
    from uwf.agent_kit.inprocess import run

    command = _command(call.args)
    if not command:
        args.fail(_parser(), "no command to run")
    return run(CmdAgent(command), call)


def main(argv: Sequence[str] | None = None) -> None:
    parser = _parser()

    def make(options: argparse.Namespace) -> runner.Agent:
        command = _command(options.passed)
        if not command:
            args.fail(parser, "no command to run")
        return CmdAgent(command)

    runner.cli(parser, make, argv)


if __name__ == "__main__":
    main()
