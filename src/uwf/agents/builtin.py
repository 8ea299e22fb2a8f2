"""``uwf-builtin``: an OpenAI-compatible tool-calling agent (PORT §7, REFERENCE §6.3).

    uwf-builtin [--model ALIAS] [--allow-outside] [--command-timeout S] [--http-timeout S]
                [--max-turns N] <thread-id> <role>

It needs nothing but a model in ``config.yaml`` (``defaultModel``, or ``--model <alias>``):
the loop talks to ``POST {baseUrl}/chat/completions`` with httpx and offers the model three
tools, ``read_file``, ``write_file`` and ``run_command``.

Messages. The system message is the deliverable format, the role prompt and a ``## Workflow``
section (working directory, tools, how to finish). Then, for every earlier visit of this
role in the thread, a user message (what the role was told then) and an assistant message
(the compact JSON of what it produced); then a user message for this visit. The role's first
user message starts with the thread's task (``## Task``) — the reference never showed the
task to the model (REFERENCE §9.5); this port does — and carries the history before it with
each step's content (within the first-visit quota), like the other agents' first-visit
prompt. Because the chain is immutable, a re-entry rebuilds exactly the messages of the
earlier visits, so their prefix is identical (cache-friendly).

Loop. At most 30 model calls (``--max-turns``); a correction through ``resume`` gets 5 and no
tools. Tool calls run in order and each result goes back as a ``tool`` message. A text reply
that does not start with ``---`` gets a nudge about the frontmatter (unless tools are off or
it was the last call); the first 3 nudges are free. When 1-3 calls remain, the model gets one
warning to finish. The loop ends at a text reply that needs no nudge, or when the calls run
out (the output is then the last non-blank assistant text).

Tools never crash the agent: every problem — malformed JSON arguments, an unknown tool, a
path outside the working directory (refused unless ``--allow-outside``), a file over 512 KiB,
a command timeout (``--command-timeout``, default 60 s, the command's process group is
killed) — goes back to the model as an ``Error: …`` tool message. ``run_command`` runs a
shell in the working directory with the agent's environment minus the providers' API-key
variables; it is not a sandbox (the command itself can reach anything the user can).

Model server errors (HTTP status, timeout — ``--http-timeout`` or
``$UWF_BUILTIN_HTTP_TIMEOUT``, default 300 s —, a connection failure, a body that is not
JSON, no choices) fail the step with one line. There are no retries: the step can simply be
run again, and a retry policy belongs to the caller (cron, CI, a loop around ``uwf``).

Detail. Every turn (assistant replies, tool results, the nudges and warnings sent) is an
``AgentTurn`` node; the detail node (``BuiltinDetail``) is ``{sessionId, model, duration,
turnCount, turns}``. The turns are kept in memory: unlike the reference, nothing is written
to ``<root>/sessions/``. A correction continues the in-memory session of the same process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uwf.agent_kit import runner
from uwf.agent_kit.context import AgentContext
from uwf.util.errors import InvalidInput, UsageError, UwfError

LABEL = "uwf-builtin"
MAX_TURNS = 30
CORRECTION_TURNS = 5
FREE_NUDGES = 3
DEADLINE_WINDOW = 3  # the warning comes when this many calls (or fewer) remain
READ_LIMIT = 512 * 1024
OUTPUT_LIMIT = 32_000
COMMAND_TIMEOUT = 60.0
HTTP_TIMEOUT = 300.0
HTTP_TIMEOUT_ENV = "UWF_BUILTIN_HTTP_TIMEOUT"
TOOL_NAMES = ("read_file", "write_file", "run_command")

DETAIL = runner.detail_schema(
    "BuiltinDetail",
    {
        "sessionId": {"type": "string"},
        "model": {"type": "string"},
        "duration": {"type": "integer", "minimum": 0},
        "turnCount": {"type": "integer", "minimum": 0},
    },
)

NUDGE = (
    "Your reply did not call a tool and does not start with the YAML frontmatter (`---`). "
    "If your work is done, reply now with your deliverable: the frontmatter described in "
    "## Deliverable Format, starting with `---` at the very first character, followed by your "
    "markdown work. Otherwise, continue working with the tools."
)

USAGE = (
    "usage: uwf-builtin [--model ALIAS] [--allow-outside] [--command-timeout S] "
    "[--http-timeout S] [--max-turns N] <thread-id> <role>"
)

HELP = f"""{USAGE}

An OpenAI-compatible tool-calling agent for uwf. uwf spawns it as
`uwf-builtin [options] <thread-id> <role>` with the edge prompt in $UWF_EDGE_PROMPT
(the v0.5.0 form `--thread <id> --role <role> --prompt <text>` works too).

options:
  --model ALIAS          model alias from config.yaml (default: defaultModel)
  --allow-outside        let read_file, write_file and run_command use paths outside
                         the working directory
  --command-timeout S    seconds before run_command kills a command (default {COMMAND_TIMEOUT:g})
  --http-timeout S       seconds to wait for the model server (default {HTTP_TIMEOUT:g},
                         or ${HTTP_TIMEOUT_ENV})
  --max-turns N          model calls per step (default {MAX_TURNS})
"""

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": (
                "Read a UTF-8 text file (at most 512 KiB). A relative path is resolved against "
                "the working directory."
            ),
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "File to read."}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": (
                "Write a text file, replacing it if it exists and creating missing parent "
                "directories. A relative path is resolved against the working directory."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File to write."},
                    "content": {"type": "string", "description": "The whole new content."},
                },
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_command",
            "description": (
                "Run a shell command and return its exit code, stdout and stderr (truncated to "
                "32000 characters). It is killed after a timeout."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell command line."},
                    "cwd": {
                        "type": "string",
                        "description": "Directory to run in (default: the working directory).",
                    },
                },
                "required": ["command"],
            },
        },
    },
]


# -- messages -----------------------------------------------------------------------------------


def workflow_section(cwd: Path | str, allow_outside: bool = False) -> str:
    """The ``## Workflow`` part of the system message: where the agent works and how it ends."""
    where = "Paths outside it are allowed." if allow_outside else "Paths outside it are refused."
    return (
        "## Workflow\n"
        "\n"
        f"Your working directory is `{cwd}`. Relative paths are resolved against it. {where}\n"
        "You have three tools: `read_file`, `write_file` and `run_command`.\n"
        "Your task and the moderator's instruction are in the user messages: do not use the "
        "uwf CLI to discover them.\n"
        "Work with the tools until your role's deliverable is done. Then reply without a tool "
        "call, with the YAML frontmatter described in the deliverable format followed by your "
        "markdown work. If you run out of turns, reply with the frontmatter anyway and say what "
        "is missing (use a failure status if the schema has one).\n"
        "Your final reply must start with `---` at position 0."
    )


def build_system_message(
    format_instruction: str,
    role_def: dict[str, Any],
    cwd: Path | str,
    allow_outside: bool = False,
    cli_reference: str | None = None,
) -> str:
    from uwf.agent_kit.prompts import build_role_prompt

    parts = [format_instruction] if format_instruction else []
    parts += [build_role_prompt(role_def, cli_reference), workflow_section(cwd, allow_outside)]
    return "\n\n".join(parts)


def _visit_message(
    steps: Sequence[Mapping[str, Any]], role: str, edge_prompt: str, task: str, first: bool
) -> str:
    """What the role is told at one visit: (task on the first), history since, instruction."""
    from uwf.agent_kit.prompts import FIRST_VISIT_QUOTA, build_continuation_prompt

    if not first:
        return build_continuation_prompt(steps, role, edge_prompt)
    history = build_continuation_prompt(
        steps, role, edge_prompt, include_content=True, quota=FIRST_VISIT_QUOTA
    )
    return f"## Task\n{task}\n\n{history}"


def build_messages(
    *,
    format_instruction: str,
    role_def: dict[str, Any],
    task: str,
    steps: Sequence[Mapping[str, Any]],
    role: str,
    edge_prompt: str,
    cwd: Path | str,
    allow_outside: bool = False,
    cli_reference: str | None = None,
) -> list[dict[str, Any]]:
    """The messages of a visit: system, one (user, assistant) pair per earlier visit, user.

    ``steps`` are the whole chain, oldest first (``{role, output, agent, edgePrompt,
    content}``, as ``AgentContext.steps``): replaying every earlier visit needs all of it, so
    this agent reads the chain's StepNodes (outputs and contents only where a message shows
    them). Step numbers in the summaries are absolute.
    """
    from uwf.util.jsonfmt import canonical, dumps

    system = build_system_message(format_instruction, role_def, cwd, allow_outside, cli_reference)
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    visits = [i for i, s in enumerate(steps) if s.get("role") == role]
    for n, i in enumerate(visits):
        past = steps[i]
        said = _visit_message(steps[:i], role, str(past.get("edgePrompt") or ""), task, n == 0)
        messages.append({"role": "user", "content": said})
        messages.append({"role": "assistant", "content": dumps(canonical(past.get("output")))})
    now = _visit_message(steps, role, edge_prompt, task, not visits)
    messages.append({"role": "user", "content": now})
    return messages


# -- the loop -----------------------------------------------------------------------------------


def needs_nudge(text: str, tools_on: bool, last_turn: bool) -> bool:
    """A text reply that is not the deliverable yet, while the model can still act on it."""
    return tools_on and not last_turn and not text.lstrip().startswith("---")


def deadline_due(remaining: int, warned: bool, tools_on: bool) -> bool:
    """The one-time "finish now" warning: tools on, 1-3 calls left, not warned before."""
    return tools_on and not warned and 1 <= remaining <= DEADLINE_WINDOW


def deadline_message(remaining: int) -> str:
    calls = "call" if remaining == 1 else "calls"
    return (
        f"Only {remaining} model {calls} left for this step. Finish now: reply with your "
        "deliverable, starting with the YAML frontmatter (`---`), and say in it what is not "
        "done."
    )


def last_assistant_text(messages: Sequence[dict[str, Any]]) -> str:
    """The newest assistant message with non-blank text content; "" if there is none."""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, str) and content.strip():
            return content
    return ""


def final_output(text: str) -> str:
    """The deliverable as the extract wants it: frontmatter at position 0, preamble dropped."""
    stripped = text.lstrip()
    if stripped.startswith("---"):
        return stripped
    at = text.find("\n---\n")
    return text[at + 1 :] if at >= 0 else text


def _call_parts(call: Any, number: int) -> tuple[str, str, Any]:
    """(id, name, raw arguments) of a tool call in the OpenAI shape, tolerant of omissions."""
    if not isinstance(call, dict):
        return f"call_{number}", "", None
    fn = call.get("function")
    fn = fn if isinstance(fn, dict) else {}
    call_id = call.get("id")
    return (
        call_id if isinstance(call_id, str) and call_id else f"call_{number}",
        str(fn.get("name") or ""),
        fn.get("arguments"),
    )


def _args_text(raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    return "" if raw is None else json.dumps(raw, ensure_ascii=False)


ToolRunner = Callable[[str, Any], str]
Chat = Callable[[list[dict[str, Any]], bool], dict[str, Any]]


def process_tool_calls(
    calls: Sequence[Any],
    messages: list[dict[str, Any]],
    turns: list[dict[str, Any]],
    run_tool: ToolRunner,
) -> int:
    """Run each call in order; append one ``tool`` message (and turn) per call; the count."""
    for number, call in enumerate(calls):
        call_id, name, raw = _call_parts(call, number)
        result = run_tool(name, raw)
        messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        turns.append({"role": "tool", "content": result, "toolCalls": None, "reasoning": None})
    return len(calls)


@dataclass
class LoopResult:
    text: str
    messages: list[dict[str, Any]]
    turns: list[dict[str, Any]] = field(default_factory=list)

    @property
    def turn_count(self) -> int:
        return len(self.turns)


def _assistant(reply: dict[str, Any], calls: list[Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(message to send back next time, turn to record) for one model reply."""
    content = reply.get("content")
    text = content if isinstance(content, str) else ""
    reasoning = reply.get("reasoning_content", reply.get("reasoning"))
    message: dict[str, Any] = {"role": "assistant", "content": text}
    tool_calls = None
    if calls:
        message["tool_calls"] = [
            {
                "id": cid,
                "type": "function",
                "function": {"name": name, "arguments": _args_text(raw)},
            }
            for cid, name, raw in (_call_parts(c, i) for i, c in enumerate(calls))
        ]
        tool_calls = [
            {"name": c["function"]["name"], "args": c["function"]["arguments"]}
            for c in message["tool_calls"]
        ]
    turn = {
        "role": "assistant",
        "content": text,
        "toolCalls": tool_calls,
        "reasoning": reasoning if isinstance(reasoning, str) else None,
    }
    return message, turn


def run_loop(
    chat: Chat,
    messages: Sequence[dict[str, Any]],
    *,
    tools_on: bool,
    max_turns: int,
    run_tool: ToolRunner,
) -> LoopResult:
    """Call the model until it answers with its deliverable or ``max_turns`` calls are used.

    ``chat(messages, tools_on)`` returns the assistant message of one completion. The
    caller's list is not changed: the result holds the continued conversation.
    """
    convo = [dict(m) for m in messages]
    turns: list[dict[str, Any]] = []
    remaining = max_turns
    free = FREE_NUDGES
    warned = False
    while remaining > 0:
        if deadline_due(remaining, warned, tools_on):
            warned = True
            _say(convo, turns, deadline_message(remaining))
        reply = chat(convo, tools_on)
        remaining -= 1
        raw_calls = reply.get("tool_calls")
        calls = list(raw_calls) if tools_on and isinstance(raw_calls, list) else []
        message, turn = _assistant(reply, calls)
        convo.append(message)
        turns.append(turn)
        if calls:
            process_tool_calls(calls, convo, turns, run_tool)
            continue
        text = str(turn["content"])
        if needs_nudge(text, tools_on, last_turn=remaining == 0):
            _say(convo, turns, NUDGE)
            if free > 0:
                free -= 1
                remaining += 1
            continue
        return LoopResult(text, convo, turns)
    return LoopResult(last_assistant_text(convo), convo, turns)


def _say(convo: list[dict[str, Any]], turns: list[dict[str, Any]], text: str) -> None:
    convo.append({"role": "user", "content": text})
    turns.append({"role": "user", "content": text, "toolCalls": None, "reasoning": None})


# -- tools --------------------------------------------------------------------------------------


class ToolError(Exception):
    """A tool problem reported back to the model (never fatal)."""


def resolve_path(path: str, cwd: Path, allow_outside: bool = False) -> Path:
    """``path`` against ``cwd``, symlinks resolved; outside ``cwd`` only with allow_outside."""
    if not isinstance(path, str) or not path:
        raise ToolError("the path must be a non-empty string")
    if "\0" in path:
        raise ToolError("the path contains a NUL character")
    target = (cwd / Path(path).expanduser()).resolve()
    base = cwd.resolve()
    if not allow_outside and target != base and base not in target.parents:
        raise ToolError(
            f"{path} is outside the working directory {base}; "
            "uwf-builtin refuses it unless started with --allow-outside"
        )
    return target


def _clip(text: str, limit: int = OUTPUT_LIMIT) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n[… {omitted} characters omitted …]\n{text[-half:]}"


class Tools:
    """The three tools, bound to a working directory, a policy and a command environment."""

    def __init__(
        self,
        cwd: Path,
        *,
        allow_outside: bool = False,
        command_timeout: float = COMMAND_TIMEOUT,
        env: dict[str, str] | None = None,
    ) -> None:
        self.cwd = cwd.resolve()
        self.allow_outside = allow_outside
        self.command_timeout = command_timeout
        self.env = dict(os.environ) if env is None else env

    def __call__(self, name: str, raw_args: Any) -> str:
        """Run one tool call; any problem becomes an ``Error: …`` string for the model."""
        try:
            args = self._arguments(name, raw_args)
            if name == "read_file":
                return self.read_file(_string(args, "path", name))
            if name == "write_file":
                return self.write_file(_string(args, "path", name), _string(args, "content", name))
            cwd = args.get("cwd")
            if cwd is not None and not isinstance(cwd, str):
                raise ToolError('run_command: "cwd" must be a string')
            return self.run_command(_string(args, "command", name), cwd or None)
        except ToolError as exc:
            return f"Error: {exc}"
        except OSError as exc:
            where = f": {exc.filename}" if exc.filename else ""
            return f"Error: {name}: {exc.strerror or exc}{where}"
        except Exception as exc:  # a tool must never crash the agent; the model gets the text
            return f"Error: {name}: {type(exc).__name__}: {exc}"

    @staticmethod
    def _arguments(name: str, raw: Any) -> dict[str, Any]:
        if name not in TOOL_NAMES:
            shown = name or "(no name)"
            raise ToolError(f'unknown tool "{shown}"; the tools are {", ".join(TOOL_NAMES)}')
        if isinstance(raw, dict):
            return raw
        text = raw if isinstance(raw, str) else ""
        if not text.strip():
            return {}
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ToolError(f"{name}: the arguments are not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise ToolError(f"{name}: the arguments must be a JSON object")
        return value

    def read_file(self, path: str) -> str:
        target = resolve_path(path, self.cwd, self.allow_outside)
        if not target.exists():
            raise ToolError(f"read_file: no such file: {path}")
        if not target.is_file():
            raise ToolError(f"read_file: not a regular file: {path}")
        size = target.stat().st_size
        if size > READ_LIMIT:
            raise ToolError(
                f"read_file: {path} is {size} bytes, over the {READ_LIMIT // 1024} KiB limit; "
                "read parts of it with run_command (head, tail, grep)"
            )
        return target.read_bytes().decode("utf-8", "replace")

    def write_file(self, path: str, content: str) -> str:
        target = resolve_path(path, self.cwd, self.allow_outside)
        if target.is_dir():
            raise ToolError(f"write_file: {path} is a directory")
        data = content.encode("utf-8")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        return f"Wrote {len(data)} bytes to {path}"

    def run_command(self, command: str, cwd: str | None = None) -> str:
        where = resolve_path(cwd, self.cwd, self.allow_outside) if cwd else self.cwd
        if not where.is_dir():
            raise ToolError(f"run_command: not a directory: {cwd}")
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            cwd=where,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(timeout=self.command_timeout)
            head = f"exit_code: {proc.returncode}"
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            try:
                out, err = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:  # a grandchild escaped the group and holds a pipe
                out, err = b"", b""
            head = (
                f"Error: the command timed out after {self.command_timeout:g}s and was killed "
                "(uwf-builtin --command-timeout sets the limit)"
            )
        stdout = out.decode("utf-8", "replace")
        stderr = err.decode("utf-8", "replace")
        return _clip(f"{head}\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}")


def _string(args: dict[str, Any], key: str, tool: str) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError(f'{tool} needs a string "{key}" argument')
    return value


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()


# -- the model server ---------------------------------------------------------------------------


class ModelError(UwfError):
    """The model server did not give a usable completion (fails the step)."""


class ChatClient:
    """One OpenAI-compatible chat completion per call; no retries (see the module doc)."""

    def __init__(self, base_url: str, api_key: str, model: str, timeout: float) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.model = model
        self.timeout = timeout

    def body(self, messages: list[dict[str, Any]], tools_on: bool) -> dict[str, Any]:
        """Tools are always declared (a history with tool calls needs them on some providers);
        with tools off the model is told not to use them."""
        return {
            "model": self.model,
            "messages": messages,
            "tools": TOOLS,
            "tool_choice": "auto" if tools_on else "none",
        }

    def __call__(self, messages: list[dict[str, Any]], tools_on: bool) -> dict[str, Any]:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}", "Content-Type": "application/json"}
        try:
            resp = httpx.post(
                self.url, json=self.body(messages, tools_on), headers=headers, timeout=self.timeout
            )
        except httpx.TimeoutException:
            raise ModelError(
                f"LLM request timed out after {self.timeout:g}s: {self.url} "
                f"(--http-timeout or ${HTTP_TIMEOUT_ENV} sets the limit)"
            ) from None
        except httpx.HTTPError as exc:
            raise ModelError(
                f"LLM network error: {type(exc).__name__}: {exc} ({self.url})"
            ) from None
        if resp.status_code // 100 != 2:
            hint = " (rate limited; uwf-builtin does not retry)" if resp.status_code == 429 else ""
            text = " ".join(resp.text[:300].split())
            raise ModelError(f"LLM HTTP {resp.status_code}{hint}: {text or '(empty body)'}")
        try:
            data = resp.json()
        except ValueError:
            text = " ".join(resp.text[:200].split())
            raise ModelError(f"LLM invalid JSON response: {text or '(empty body)'}") from None
        choices = data.get("choices") if isinstance(data, dict) else None
        if not isinstance(choices, list) or not choices:
            raise ModelError("LLM response has no choices")
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            raise ModelError("LLM response has no choices[0].message")
        return message


# -- the agent ----------------------------------------------------------------------------------


@dataclass
class Options:
    model: str | None = None
    allow_outside: bool = False
    command_timeout: float = COMMAND_TIMEOUT
    http_timeout: float | None = None  # None: $UWF_BUILTIN_HTTP_TIMEOUT, else HTTP_TIMEOUT
    max_turns: int = MAX_TURNS


@dataclass
class _Session:
    model: str
    started: float
    messages: list[dict[str, Any]]
    turns: list[dict[str, Any]] = field(default_factory=list)


def _positive(value: str, what: str, error: type[UwfError] = UsageError) -> float:
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not number > 0 or number == float("inf"):
        raise error(f"{what} must be a positive number of seconds, got: {value}")
    return number


def http_timeout(options: Options) -> float:
    if options.http_timeout is not None:
        return options.http_timeout
    value = os.environ.get(HTTP_TIMEOUT_ENV, "")
    return _positive(value, f"${HTTP_TIMEOUT_ENV}", InvalidInput) if value.strip() else HTTP_TIMEOUT


def command_env(config: Any) -> dict[str, str]:
    """The environment for run_command: ours minus every provider's API-key variable, so a
    command like ``env`` cannot put a key into the model's context or the stored turns."""
    secret = {p.api_key_env for p in config.providers.values()}
    return {k: v for k, v in os.environ.items() if k not in secret}


class BuiltinAgent:
    label = LABEL

    def __init__(self, options: Options | None = None) -> None:
        self.options = options or Options()
        self.sessions: dict[str, _Session] = {}
        self.chat: Chat | None = None
        self.tools: Tools | None = None

    def _setup(self, ctx: AgentContext) -> ChatClient:
        from uwf.config.config import load_config, resolve_model

        config = load_config(ctx.root)
        alias = self.options.model or config.default_model
        if alias is None:
            raise InvalidInput(
                "uwf-builtin needs a model: set defaultModel (with its providers and models "
                "entries) in config.yaml, or pass --model <alias>"
            )
        spec = resolve_model(config, alias)
        client = ChatClient(spec.base_url, spec.api_key, spec.model, http_timeout(self.options))
        self.chat = client
        self.tools = Tools(
            Path.cwd(),
            allow_outside=self.options.allow_outside,
            command_timeout=self.options.command_timeout,
            env=command_env(config),
        )
        return client

    def _detail(self, ctx: AgentContext, session_id: str, session: _Session) -> str:
        turns = runner.store_turns(ctx, session.turns)
        detail_type = ctx.store.put_schema(DETAIL)
        duration = max(0, int((time.monotonic() - session.started) * 1000))
        return ctx.store.put(
            detail_type,
            {
                "sessionId": session_id,
                "model": session.model,
                "duration": duration,
                "turnCount": len(session.turns),
                "turns": turns,
            },
        )

    def run(self, ctx: AgentContext) -> runner.RunResult:
        from uwf.util.ulid import new_thread_id

        client = self._setup(ctx)
        assert self.chat is not None and self.tools is not None
        messages = build_messages(
            format_instruction=ctx.format_instruction,
            role_def=ctx.role_def,
            task=ctx.task,
            steps=ctx.steps,
            role=ctx.role,
            edge_prompt=ctx.edge_prompt,
            cwd=self.tools.cwd,
            allow_outside=self.options.allow_outside,
        )
        session = _Session(client.model, time.monotonic(), messages)
        result = run_loop(
            self.chat,
            messages,
            tools_on=True,
            max_turns=self.options.max_turns,
            run_tool=self.tools,
        )
        session.messages, session.turns = result.messages, result.turns
        session_id = new_thread_id()
        self.sessions[session_id] = session
        detail = self._detail(ctx, session_id, session)
        return runner.RunResult(final_output(result.text), detail, session_id)

    def resume(self, ctx: AgentContext, session: str | None, message: str) -> runner.RunResult:
        """A correction: the same conversation plus ``message``, 5 calls, tools off.

        The detail returned covers the whole session (first run and corrections).
        """
        known = self.sessions.get(session or "")
        if known is None or self.chat is None or self.tools is None or session is None:
            raise UwfError(f"uwf-builtin: unknown session {session}")
        messages, turns = list(known.messages), list(known.turns)
        _say(messages, turns, message)
        result = run_loop(
            self.chat, messages, tools_on=False, max_turns=CORRECTION_TURNS, run_tool=self.tools
        )
        known.messages, known.turns = result.messages, turns + result.turns
        detail = self._detail(ctx, session, known)
        return runner.RunResult(final_output(result.text), detail, session)


# -- command line -------------------------------------------------------------------------------

_VALUED = ("--model", "--command-timeout", "--http-timeout", "--max-turns")


def parse_options(argv: Sequence[str]) -> tuple[Options, list[str]]:
    """The leading uwf-builtin options; the rest is the agent-kit part (thread, role…)."""
    options = Options()
    args = list(argv)
    while args and args[0].startswith("--") and args[0] not in ("--thread", "--role", "--prompt"):
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
        if name == "--model":
            if not value.strip():
                raise UsageError("--model needs a model alias")
            options.model = value
        elif name == "--command-timeout":
            options.command_timeout = _positive(value, "--command-timeout")
        elif name == "--http-timeout":
            options.http_timeout = _positive(value, "--http-timeout")
        else:
            try:
                options.max_turns = int(value)
            except ValueError:
                options.max_turns = 0
            if options.max_turns < 1:
                raise UsageError(f"--max-turns must be a positive integer, got: {value}")
    return options, args


def main(argv: Sequence[str] | None = None) -> None:
    def make(args: list[str]) -> tuple[runner.Agent, list[str]]:
        options, rest = parse_options(args)
        return BuiltinAgent(options), rest

    runner.cli(make, argv, HELP)


if __name__ == "__main__":
    main()
