"""``uwf-hermes``: run the real Hermes agent (``hermes-agent`` on PyPI) as a uwf agent (PORT §7).

    uwf-hermes [hermes chat options…] <thread-id> <role>        (edge prompt in $UWF_EDGE_PROMPT)
    uwf-hermes [hermes chat options…] --thread <id> --role <role> --prompt <text>

Everything before the thread id and role is passed to ``hermes chat`` unchanged, so
``config.yaml`` can choose the model or provider per agent::

    agents: {hermes: {command: uwf-hermes, args: ["-m", "some-model", "--provider", "x"]}}

Hermes runs with the user's own setup (``~/.hermes``, or ``$HERMES_HOME``), non-interactively,
without a shell, stdin closed, in uwf's working directory::

    hermes chat -Q -q <prompt> --source tool [--resume <session> --no-restore-cwd] <options…>

Choices, and why:

- ``-Q`` (quiet): no banner or spinner; Hermes prints the answer and a ``session_id: <id>``
  line. The answer is NOT taken from stdout: the agent reads the session back with
  ``hermes sessions export --session-id <id> -`` and uses the last non-blank assistant
  message of this run, so the raw output, the turns and the model all come from one place.
- ``--source tool``: uwf's sessions stay out of the user's own session list (``hermes sessions
  list --source tool`` shows them); resuming and exporting by id works for any source. A
  ``--source`` among the passed-through options wins (it comes later on the command line).
- ``--no-restore-cwd`` on a resume: Hermes would otherwise move to the directory the session
  was started in; a uwf agent always works in the directory uwf runs in.
- No ``--ignore-rules``: the project's ``AGENTS.md`` and the user's memory and skills are part
  of "the user's own Hermes setup" and usually what a developer role needs. Pass it (or
  ``--safe-mode``, ``--yolo``, ``--max-turns N``…) through the agent's ``args`` to change that.
- Hermes' own retry and timeout settings apply (``agent.api_max_retries``,
  ``providers.<name>.request_timeout_seconds``, ``$HERMES_API_TIMEOUT``); uwf's
  ``--timeout`` / ``agentTimeout`` bounds the whole step and kills Hermes with the agent.

Prompt (REFERENCE §6.1). A first visit of the role gets the deliverable format, the role
prompt, ``## Task`` and the history (or the moderator's instruction) in a new Hermes session.
A re-entry — the role has spoken before in this thread and the session cache
(``<root>/cache/hermes-sessions.json``, key ``<thread>:<role>``) knows its session — resumes
that session with only the deliverable format and what happened since. When the resumed run
fails for any reason (the session was deleted, the model failed…), one note goes to stderr
and the role starts over in a new session with the full first-visit prompt. A correction
prompt (the output had no valid frontmatter) resumes the step's session too.

Detail. Each assistant or tool message of the step's runs becomes a ``HermesTurn`` node
(REFERENCE §6.1 ``hermes-turn``: ``{index, role, content, toolCalls, reasoning}``; user
messages are skipped); the ``HermesDetail`` node (``hermes-detail``) is ``{sessionId, model,
duration, turnCount, turns}`` with the model Hermes really used and the duration in ms from
the start of the step's first run to its last message. A resumed session also holds the
earlier visits' messages: only the messages written since this process launched Hermes
belong to the step. After a correction the detail returned covers the first run and the
corrections.

Failures are one ``error:`` line each (and the head does not move): ``hermes`` not on PATH
(names the package to install), ``hermes chat`` exiting non-zero (quotes what Hermes said:
an HTTP error of the model server, a timeout, "isn't configured yet"…), no session id in its
output, a session export that fails or prints no session, a session without an answer. Hermes'
stderr is passed through to ours, prefixed ``hermes: `` (its ``session_id:`` line excepted).
"""

from __future__ import annotations

import errno
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from uwf.agent_kit import runner
from uwf.agent_kit.context import AgentContext
from uwf.util.errors import AgentFailed, UsageError, UwfError

AGENT = "hermes"  # the session-cache name (REFERENCE §5.9)
LABEL = "uwf-hermes"
PACKAGE = "hermes-agent"
STDERR_KEEP = 20_000  # characters of Hermes' stderr passed through (the tail)
QUOTE = 400  # characters of Hermes' own words quoted in an error message
EXPORT_TIMEOUT = 120.0  # seconds; an export takes well under one

#: Options uwf-hermes sets itself; passing them through would break the run.
RESERVED = ("-q", "--query", "-r", "--resume", "-c", "--continue")

TURN_SCHEMA: dict[str, Any] = {
    "title": "HermesTurn",
    "description": "One assistant or tool message of a Hermes session (REFERENCE hermes-turn).",
    "type": "object",
    "additionalProperties": False,
    "required": ["index", "role", "content"],
    "properties": {
        "index": {"type": "integer", "minimum": 0},
        "role": {"type": "string", "enum": ["assistant", "tool"]},
        "content": {"type": "string"},
        "toolCalls": {
            "anyOf": [
                {"type": "null"},
                {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["name", "args"],
                        "properties": {"name": {"type": "string"}, "args": {"type": "string"}},
                    },
                },
            ]
        },
        "reasoning": {"anyOf": [{"type": "null"}, {"type": "string"}]},
    },
}

DETAIL = runner.detail_schema(
    "HermesDetail",
    {
        "sessionId": {"type": "string"},
        "model": {"type": "string"},
        "duration": {"type": "integer", "minimum": 0},
        "turnCount": {"type": "integer", "minimum": 0},
    },
)
DETAIL["description"] = "A step run by the Hermes agent (REFERENCE hermes-detail)."

USAGE = (
    "usage: uwf-hermes [hermes chat options…] <thread-id> <role>  |  "
    "uwf-hermes [hermes chat options…] --thread <id> --role <role> --prompt <text>"
)

HELP = f"""{USAGE}

Runs the Hermes agent (pip install {PACKAGE}) for one uwf step:
`hermes chat -Q -q <prompt> --source tool [--resume <session>] [options…]`.
The options before <thread-id> <role> go to `hermes chat` as they are, e.g.
`-m <model> --provider <name> --max-turns 30 --yolo`. uwf spawns it as
`uwf-hermes [options…] <thread-id> <role>` with the edge prompt in $UWF_EDGE_PROMPT.
"""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_SESSION_LINE = re.compile(r"^\s*session_id:\s*(\S+)\s*$", re.IGNORECASE | re.MULTILINE)
# Lines of Hermes' stdout that say nothing about a failure.
_NOISE = (re.compile(r"^⚠ tirith security scanner"), re.compile(r"^↻ Resumed session"))


class HermesMissing(AgentFailed):
    """``hermes`` is not installed (or not on PATH): nothing a retry can fix."""


# -- talking to Hermes --------------------------------------------------------------------------


def hermes_executable() -> str:
    found = shutil.which("hermes")
    if found is None:
        raise HermesMissing(_missing_message())
    return found


def _missing_message() -> str:
    return (
        f"hermes not found on PATH: uwf-hermes drives the Hermes agent; install it with "
        f"`pip install {PACKAGE}` (or `pip install 'uwf[hermes]'`), then configure a model "
        "with `hermes setup`"
    )


def parse_session_id(*texts: str) -> str | None:
    """The id of the first ``session_id: <id>`` line (any case) in the texts, in order."""
    for text in texts:
        found = _SESSION_LINE.search(text)
        if found:
            return found.group(1)
    return None


def _flat(text: str) -> str:
    return " ".join(text.split())


def _quote_head(text: str) -> str:
    flat = _flat(text)
    return flat if len(flat) <= QUOTE else flat[: QUOTE - 1] + "…"


def _quote_tail(text: str) -> str:
    flat = _flat(text)
    return flat if len(flat) <= QUOTE else "…" + flat[-(QUOTE - 1) :]


def _meaningful(text: str) -> str:
    """The lines of Hermes' output that can explain a failure (no session line, no noise)."""
    keep = []
    for line in _ANSI.sub("", text).splitlines():
        stripped = line.strip()
        if not stripped or _SESSION_LINE.match(stripped):
            continue
        if any(p.match(stripped) for p in _NOISE):
            continue
        keep.append(stripped)
    return "\n".join(keep)


def failure_text(stdout: str, stderr: str) -> str:
    """What Hermes said about a failure: the end of its stderr (of a traceback, only the
    exception), else the start of its stdout (in quiet mode the error replaces the answer)."""
    err = _meaningful(stderr)
    lines = err.splitlines()
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        return _quote_tail(lines[-1])  # the exception; the frames are in the passed-through stderr
    if err:
        return _quote_tail(err)
    return _quote_head(_meaningful(stdout))


def _pass_stderr(stderr: str) -> None:
    """Copy Hermes' stderr to ours (the tail, if huge), minus its ``session_id:`` line."""
    kept = stderr[-STDERR_KEEP:]
    lines = [
        line for line in kept.splitlines() if line.strip() and not _SESSION_LINE.match(line.strip())
    ]
    if lines:
        sys.stderr.write("".join(f"hermes: {line}\n" for line in lines))
        sys.stderr.flush()


def _exec(
    argv: list[str], what: str, timeout: float | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
        )
    except FileNotFoundError:
        raise HermesMissing(_missing_message()) from None
    except subprocess.TimeoutExpired:
        raise AgentFailed(f"{what} did not finish within {timeout:g}s") from None
    except OSError as exc:
        if exc.errno == errno.E2BIG:
            raise AgentFailed(
                f"{what} could not start: the prompt is too long for a command-line argument "
                f"({sum(len(a) for a in argv)} characters)"
            ) from None
        raise AgentFailed(f"{what} could not start: {exc.strerror or exc}") from None


def chat_argv(exe: str, prompt: str, options: Sequence[str], resume: str | None) -> list[str]:
    argv = [exe, "chat", "-Q", "-q", prompt, "--source", "tool"]
    if resume is not None:
        argv += ["--resume", resume, "--no-restore-cwd"]
    return argv + list(options)


def export_session(exe: str, session_id: str) -> dict[str, Any]:
    """The session as ``hermes sessions export --session-id <id> -`` prints it."""
    what = f"hermes sessions export --session-id {session_id}"
    proc = _exec([exe, "sessions", "export", "--session-id", session_id, "-"], what, EXPORT_TIMEOUT)
    _pass_stderr(proc.stderr)
    said = failure_text(proc.stdout, proc.stderr)
    if proc.returncode != 0:
        raise AgentFailed(
            f"{what} failed with exit code {proc.returncode}" + (f": {said}" if said else "")
        )
    for line in proc.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            session = json.loads(line)
        except ValueError:
            continue
        if isinstance(session, dict) and session.get("id") == session_id:
            if not isinstance(session.get("messages"), list):
                raise AgentFailed(f"{what} printed a session without messages")
            return session
    raise AgentFailed(
        f"{what} printed no session (one JSON line with id {session_id} was expected)"
        + (f": {said}" if said else "")
    )


# -- sessions to turns --------------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _text(content: Any) -> str:
    """Message content as text: a string as is, text parts joined, anything else as JSON."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        if all(isinstance(p, str) for p in parts) and parts:
            return "".join(str(p) for p in parts)
    return json.dumps(content, ensure_ascii=False)


def _tool_calls(value: Any) -> list[dict[str, str]] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if not isinstance(value, list):
        return None
    calls = []
    for call in value:
        if not isinstance(call, dict):
            continue
        inner = call.get("function")
        fn: dict[str, Any] = inner if isinstance(inner, dict) else call
        name = fn.get("name")
        args = fn.get("arguments", fn.get("args", ""))
        calls.append(
            {
                "name": name if isinstance(name, str) else "",
                "args": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
            }
        )
    return calls or None


def _reasoning(message: dict[str, Any]) -> str | None:
    for key in ("reasoning", "reasoning_content"):
        value = message.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return None


def to_turn(message: dict[str, Any]) -> dict[str, Any] | None:
    """A ``HermesTurn`` payload (without index) for an assistant or tool message, else None."""
    role = message.get("role")
    if role == "assistant":
        return {
            "role": "assistant",
            "content": _text(message.get("content")),
            "toolCalls": _tool_calls(message.get("tool_calls")),
            "reasoning": _reasoning(message),
        }
    if role == "tool":
        return {
            "role": "tool",
            "content": _text(message.get("content")),
            "toolCalls": None,
            "reasoning": None,
        }
    return None


@dataclass
class Run:
    """What one ``hermes chat`` run added to its session."""

    session: str
    model: str
    output: str  # the last non-blank assistant content of the run
    turns: list[dict[str, Any]]
    start: float  # unix seconds
    end: float


def run_of(session: dict[str, Any], launched: float, resumed: bool) -> Run:
    """The part of an exported session written by the run launched at ``launched``.

    A new session is all this run's; a resumed one also holds earlier runs, so only messages
    stamped at or after the launch count (Hermes stamps each message when it writes it).
    """
    messages = [m for m in session["messages"] if isinstance(m, dict)]
    if resumed:
        messages = [m for m in messages if (_number(m.get("timestamp")) or 0.0) >= launched]
    turns = [t for t in (to_turn(m) for m in messages) if t is not None]
    output = next(
        (
            t["content"]
            for t in reversed(turns)
            if t["role"] == "assistant" and t["content"].strip()
        ),
        "",
    )
    stamps = [s for s in (_number(m.get("timestamp")) for m in messages) if s is not None]
    started = _number(session.get("started_at"))
    start = stamps[0] if resumed and stamps else started if started is not None else launched
    end = max([start, *stamps, _number(session.get("ended_at")) or start])
    model = session.get("model")
    return Run(
        session=str(session["id"]),
        model=model if isinstance(model, str) else "",
        output=output,
        turns=turns,
        start=start,
        end=end,
    )


# -- the agent ----------------------------------------------------------------------------------


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
        proc = _exec(chat_argv(exe, prompt, self.options, resume), what)
        _pass_stderr(proc.stderr)
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
        turn_type = ctx.store.put_schema(TURN_SCHEMA)
        turns = [t for run in self.runs for t in run.turns]
        refs = [ctx.store.put(turn_type, {"index": i, **t}) for i, t in enumerate(turns)]
        last = self.runs[-1]
        duration = max(0, round((last.end - self.runs[0].start) * 1000))
        detail_type = ctx.store.put_schema(DETAIL)
        return ctx.store.put(
            detail_type,
            {
                "sessionId": last.session,
                "model": last.model,
                "duration": duration,
                "turnCount": len(refs),
                "turns": refs,
            },
        )

    def _prompt(self, ctx: AgentContext, first_visit: bool) -> str:
        from uwf.agent_kit.prompts import build_agent_prompt

        return build_agent_prompt(
            format_instruction=ctx.format_instruction,
            role_def=ctx.role_def,
            task=ctx.task,
            steps=ctx.steps,
            role=ctx.role,
            edge_prompt=ctx.edge_prompt,
            first_visit=first_visit,
        )

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


# -- command line -------------------------------------------------------------------------------


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


if __name__ == "__main__":
    main()
