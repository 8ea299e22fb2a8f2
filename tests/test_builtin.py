"""`uwf-builtin`: the OpenAI-compatible tool loop (docs/agents.md, "`uwf-builtin`").

The pure parts (messages, nudges, the deadline warning, tool calls, the loop's end) are tested
as functions; the rest end to end: `uwf thread step` spawns the real `uwf-builtin`, which talks
to the local scripted server of tests/llm_server.py, runs real tools in the test's working
directory and writes its step. The tests then look at what the server received, what landed on
disk and what `uwf` shows.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import version1 as v1
from llm_server import (
    DEFAULT_MODEL,
    EXTRACT_MODEL,
    TEST_KEY,
    TEST_KEY_ENV,
    LLMServer,
    RecordedRequest,
    closed_port_url,
    llm_fixture,  # noqa: F401
    write_config,
)
from rootfiles import step_state
from support import Result
from uwf.adapters import llm as llm_adapter
from uwf.agent_kit.deliverable import build_output_format_instruction
from uwf.agent_kit.prompts import CORRECTION_MESSAGE
from uwf.agents import builtin
from uwf.agents.builtin import (
    NUDGE,
    LoopResult,
    Tools,
    build_messages,
    deadline_due,
    final_output,
    last_assistant_text,
    needs_nudge,
    process_tool_calls,
    resolve_path,
    run_loop,
)

TASK = "Add a greeting module that says hello"
AGENT_FAILED = "error: agent command failed (uwf-builtin) with exit code 1: error: "
PLAN_FM = "---\nstatus: _\nplan: write hello.py\nsteps:\n  - write it\n---\nThe plan."
PLAN_OUTPUT = {"status": "_", "plan": "write hello.py", "steps": ["write it"]}
DEV_FM = "---\nstatus: _\nfilesChanged: [hello.py]\nsummary: wrote hello.py\n---\nDone."
REJECT_FM = "---\nstatus: rejected\ncomments: add a test\n---\nNeeds a test."
APPROVE_FM = "---\nstatus: approved\ncomments: fine\n---\nLGTM."


# -- helpers ------------------------------------------------------------------------------------


def call(name: str, arguments: Any, ident: str | None = None) -> dict[str, Any]:
    """A tool call in the OpenAI shape (arguments as a JSON string unless given as text)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": ident or f"id-{name}",
        "type": "function",
        "function": {"name": name, "arguments": args},
    }


class ScriptedChat:
    """A ``chat`` for :func:`run_loop`: answers from a list of assistant messages (read by the
    LLM adapter, as a server's would be), records what it was sent."""

    def __init__(self, *replies: dict[str, Any]) -> None:
        self.replies = [llm_adapter.reply_of(r) for r in replies]
        self.sent: list[tuple[list[dict[str, Any]], bool]] = []

    def __call__(self, messages: list[dict[str, Any]], tools_on: bool) -> llm_adapter.Reply:
        self.sent.append(([dict(m) for m in messages], tools_on))
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]


def text(content: str | None) -> dict[str, Any]:
    return {"role": "assistant", "content": content}


def calls_reply(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": None, "tool_calls": list(calls)}


class RecordingTool:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __call__(self, name: str, raw: Any) -> str:
        self.calls.append((name, raw))
        return f"result of {name} #{len(self.calls)}"


START = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]


def loop(chat: ScriptedChat, tools_on: bool = True, max_turns: int = 30) -> LoopResult:
    return run_loop(chat, START, tools_on=tools_on, max_turns=max_turns, run_tool=RecordingTool())


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "user"]


# -- nudges, deadline, tool calls, the end of the loop --------------------------------------------


@pytest.mark.parametrize(
    ("reply", "tools_on", "last_turn", "expected"),
    [
        ("I will now look at the code.", True, False, True),
        ("---\nstatus: _\n---\n", True, False, False),
        ("  \n\t---\nstatus: _\n---\n", True, False, False),  # leading whitespace is fine
        ("Done, see below.\n---\nstatus: _\n---", True, False, True),
        ("", True, False, True),
        ("I will now look at the code.", False, False, False),  # tools off: never
        ("I will now look at the code.", True, True, False),  # last turn: never
    ],
)
def test_nudge_rule(reply: str, tools_on: bool, last_turn: bool, expected: bool) -> None:
    assert needs_nudge(reply, tools_on, last_turn) is expected


def test_nudge_mentions_frontmatter() -> None:
    assert "frontmatter" in NUDGE and "`---`" in NUDGE


@pytest.mark.parametrize(
    ("remaining", "warned", "tools_on", "expected"),
    [
        (4, False, True, False),
        (3, False, True, True),
        (2, False, True, True),
        (1, False, True, True),
        (0, False, True, False),
        (2, True, True, False),
        (2, False, False, False),
    ],
)
def test_deadline_rule(remaining: int, warned: bool, tools_on: bool, expected: bool) -> None:
    assert deadline_due(remaining, warned, tools_on) is expected


def test_tool_calls_each_append_a_tool_message() -> None:
    messages: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    tool = RecordingTool()
    raw = [call("read_file", {"path": "a"}, "c1"), call("run_command", {"command": "ls"}, "c2")]
    calls = llm_adapter.reply_of({"tool_calls": raw}).tool_calls
    assert process_tool_calls(calls, messages, turns, tool) == 2
    assert messages == [
        {"role": "tool", "tool_call_id": "c1", "content": "result of read_file #1"},
        {"role": "tool", "tool_call_id": "c2", "content": "result of run_command #2"},
    ]
    assert tool.calls == [("read_file", '{"path": "a"}'), ("run_command", '{"command": "ls"}')]
    assert [t["content"] for t in turns] == [m["content"] for m in messages]
    assert process_tool_calls((), messages, turns, tool) == 0 and len(messages) == 2


def test_text_only_reply_returns_at_once() -> None:
    chat = ScriptedChat(text(PLAN_FM))
    result = loop(chat)
    assert (result.text, len(result.turns), len(chat.sent)) == (PLAN_FM, 1, 1)
    assert chat.sent[0] == (START, True)


def test_no_tools_mode_ignores_tool_calls() -> None:
    tool = RecordingTool()
    chat = ScriptedChat({"content": "plain answer", "tool_calls": [call("write_file", {})]})
    result = run_loop(chat, START, tools_on=False, max_turns=5, run_tool=tool)
    assert (result.text, len(result.turns), tool.calls) == ("plain answer", 1, [])
    assert "tool_calls" not in result.messages[-1]  # never a dangling call in the session
    assert chat.sent[0][1] is False


def test_tool_call_then_text() -> None:
    chat = ScriptedChat(
        calls_reply(call("write_file", {"path": "x", "content": "y"})), text(DEV_FM)
    )
    result = loop(chat)
    assert len(result.turns) == 3
    assert [t["role"] for t in result.turns] == ["assistant", "tool", "assistant"]
    assert result.turns[0]["toolCalls"] == [
        {"name": "write_file", "args": '{"path": "x", "content": "y"}'}
    ]
    assert result.text == DEV_FM
    # the second request carries the assistant's call and the tool's answer
    second = chat.sent[1][0]
    assert second[-2]["tool_calls"][0]["id"] == "id-write_file"
    assert second[-1] == {
        "role": "tool",
        "tool_call_id": "id-write_file",
        "content": "result of write_file #1",
    }


def test_non_frontmatter_text_gets_a_nudge() -> None:
    chat = ScriptedChat(text("I am done."), text(DEV_FM))
    result = loop(chat)
    assert result.text == DEV_FM
    assert user_texts(chat.sent[1][0]) == ["go", NUDGE]
    assert [t["role"] for t in result.turns] == ["assistant", "user", "assistant"]


@pytest.mark.parametrize("max_turns", [1, 2, 5, 30])
def test_max_turns_is_a_cap_nudges_included(max_turns: int) -> None:
    """A model that keeps answering in prose: exactly max_turns calls (36 at 30 used to be
    possible: 3 nudges were free, then corrections and the extract came on top)."""
    chat = ScriptedChat(text("still thinking"))
    result = loop(chat, max_turns=max_turns)
    assert len(chat.sent) == max_turns
    assert user_texts(result.messages).count(NUDGE) == max_turns - 1  # not after the last
    assert result.text == "still thinking"


def test_turn_exhaustion_returns_last_assistant_content() -> None:
    messages = [dict(m) for m in START]
    chat = ScriptedChat(
        {"content": "first words", "tool_calls": [call("read_file", {"path": "a"})]},
        calls_reply(call("read_file", {"path": "b"})),
    )
    result = run_loop(chat, messages, tools_on=True, max_turns=2, run_tool=RecordingTool())
    assert result.text == "first words"  # the later reply had no text
    assert len(chat.sent) == 2
    assert messages == START  # the caller's list is untouched


def test_one_deadline_warning() -> None:
    chat = ScriptedChat(calls_reply(call("read_file", {"path": "a"})))
    result = loop(chat, max_turns=5)
    warnings = [m for m in user_texts(result.messages) if m.startswith("Only ")]
    assert warnings == [builtin.deadline_message(3)]
    assert "frontmatter" in warnings[0]
    # it is sent with the third call, when three calls remain
    assert [len(user_texts(sent)) for sent, _ in chat.sent] == [1, 1, 2, 2, 2]


def test_no_deadline_warning_without_tools() -> None:
    chat = ScriptedChat(text("no frontmatter"))
    result = loop(chat, tools_on=False, max_turns=2)
    assert user_texts(result.messages) == ["go"]


def test_last_assistant_text() -> None:
    assert last_assistant_text([]) == ""
    messages = [
        {"role": "assistant", "content": "older"},
        {"role": "tool", "content": "tool output"},
        {"role": "assistant", "content": None},
        {"role": "assistant", "content": "  \n"},
        {"role": "user", "content": "a nudge"},
    ]
    assert last_assistant_text(messages) == "older"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("---\na: 1\n---\nbody", "---\na: 1\n---\nbody"),
        ("\n\n  ---\na: 1\n---\n", "---\na: 1\n---\n"),
        ("Here it is:\n---\na: 1\n---\nbody", "---\na: 1\n---\nbody"),
        ("no frontmatter at all", "no frontmatter at all"),
    ],
)
def test_final_output_drops_a_preamble(raw: str, expected: str) -> None:
    assert final_output(raw) == expected


# -- messages ---------------------------------------------------------------------------------

ROLE = {
    "goal": "You are a developer.",
    "capabilities": ["file-edit"],
    "procedure": "Write code.",
    "output": "Files changed.",
}
SCHEMA = {
    "type": "object",
    "properties": {"status": {"type": "string", "enum": ["_"]}, "summary": {"type": "string"}},
    "required": ["status", "summary"],
}


def step(role: str, output: dict[str, Any], edge: str, content: str | None = None) -> Any:
    return {"role": role, "output": output, "agent": "uwf-builtin", "edgePrompt": edge,
            "content": content}  # fmt: skip


def messages_for(steps: list[dict[str, Any]], role: str, edge: str) -> list[dict[str, Any]]:
    return build_messages(
        format_instruction=build_output_format_instruction(SCHEMA),
        role_def=ROLE,
        task=TASK,
        steps=steps,
        role=role,
        edge_prompt=edge,
        cwd="/work/dir",
        cli_reference="(cli reference)",
    )


def test_first_visit_messages() -> None:
    messages = messages_for([], "developer", "Implement it.")
    assert [m["role"] for m in messages] == ["system", "user"]
    system = messages[0]["content"]
    assert system.startswith(build_output_format_instruction(SCHEMA) + "\n\n## Goal\n\n")
    assert "## Goal\n\nYou are a developer." in system and "(cli reference)" in system
    assert "## Workflow" in system and "`/work/dir`" in system
    assert all(f"`{name}`" in system for name in ("read_file", "write_file", "run_command"))
    assert "must start with `---` at position 0" in system
    assert messages[1]["content"] == (
        f"## Task\n{TASK}\n\n## Moderator Instruction\n\nImplement it."
    )


def test_first_visit_with_history_has_a_summary_with_content() -> None:
    plan = step("planner", {"status": "_", "plan": "p"}, "Plan it.", "The plan body.")
    messages = messages_for([plan], "developer", "Implement it.")
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert user.startswith(f"## Task\n{TASK}\n\n## What Happened Since Your Last Turn\n\n")
    assert '### Step 1: planner\nOutput: {"status":"_","plan":"p"}\nAgent: uwf-builtin' in user
    assert "#### Step Content\n\n```markdown\nThe plan body.\n```" in user
    assert user.endswith("## Moderator Instruction\n\nImplement it.")


def test_reentry_rebuilds_one_pair_per_visit() -> None:
    steps = [
        step("planner", {"status": "_", "plan": "p"}, "Plan it.", "plan body"),
        step("developer", {"status": "_", "summary": "v1"}, "Implement it.", "dev body 1"),
        step("reviewer", {"status": "rejected", "comments": "c1"}, "Review v1.", "review 1"),
        step("developer", {"status": "_", "summary": "v2"}, "Fix c1.", "dev body 2"),
        step("reviewer", {"status": "rejected", "comments": "c2"}, "Review v2.", "review 2"),
    ]
    messages = messages_for(steps, "developer", "Fix c2.")
    assert [m["role"] for m in messages] == [
        "system",
        *["user", "assistant"] * 2,
        "user",
    ]
    # the prefix is exactly what the first and second visits sent
    assert messages[:2] == messages_for(steps[:1], "developer", "Implement it.")
    assert messages[:4] == messages_for(steps[:3], "developer", "Fix c1.")[:4]
    assert messages[2]["content"] == '{"status":"_","summary":"v1"}'
    assert messages[4]["content"] == '{"status":"_","summary":"v2"}'
    assert messages[3]["content"] == (
        "## What Happened Since Your Last Turn\n\n"
        '### Step 3: reviewer\nOutput: {"status":"rejected","comments":"c1"}\n'
        "Agent: uwf-builtin\n\n## Moderator Instruction\n\nFix c1."
    )
    final = messages[5]["content"]
    assert final.startswith("## What Happened Since Your Last Turn\n\n### Step 5: reviewer\n")
    assert "Step 4" not in final and TASK not in final and "review 2" not in final
    assert final.endswith("## Moderator Instruction\n\nFix c2.")
    assert sum(TASK in m["content"] for m in messages) == 1  # once, in the first visit


def test_reentry_without_steps_since() -> None:
    steps = [step("developer", {"status": "_", "summary": "v1"}, "Implement it.")]
    messages = messages_for(steps, "developer", "Again.")
    assert messages[-1]["content"] == "## Moderator Instruction\n\nAgain."


# -- tools ------------------------------------------------------------------------------------


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def test_path_resolution(work: Path, tmp_path: Path) -> None:
    base = work.resolve()
    assert resolve_path("a/b.txt", work) == base / "a" / "b.txt"
    assert resolve_path(str(base / "c.txt"), work) == base / "c.txt"
    assert resolve_path("a/../d.txt", work) == base / "d.txt"
    assert resolve_path(".", work) == base
    outside = tmp_path / "elsewhere.txt"
    for path in ("../elsewhere.txt", str(outside), "/etc/passwd"):
        with pytest.raises(builtin.ToolError) as exc:
            resolve_path(path, work)
        assert str(exc.value) == (
            f"{path} is outside the working directory {base}; "
            "uwf-builtin refuses it unless started with --allow-outside"
        )
    assert resolve_path("../elsewhere.txt", work, allow_outside=True) == outside.resolve()


def test_symlink_out_of_the_working_directory_counts_as_outside(work: Path, tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s3cret")
    (work / "link").symlink_to(tmp_path)
    tools = Tools(work)
    assert tools("read_file", '{"path": "link/secret.txt"}').startswith(
        "Error: link/secret.txt is outside the working directory"
    )
    assert tools("write_file", {"path": "link/new.txt", "content": "x"}).startswith("Error: ")
    assert not (tmp_path / "new.txt").exists()
    assert Tools(work, allow_outside=True)("read_file", {"path": "link/secret.txt"}) == "s3cret"


def test_write_then_read(work: Path) -> None:
    tools = Tools(work)
    content = "héllo\n"
    assert tools("write_file", {"path": "deep/er/f.txt", "content": content}) == (
        f"Wrote {len(content.encode())} bytes to deep/er/f.txt"
    )
    assert (work / "deep/er/f.txt").read_text(encoding="utf-8") == content
    assert tools("read_file", json.dumps({"path": "deep/er/f.txt"})) == content


@pytest.mark.parametrize(
    ("name", "args", "expected"),
    [
        ("read_file", "{not json", "Error: read_file: the arguments are not valid JSON ("),
        ("read_file", "[1, 2]", "Error: read_file: the arguments must be a JSON object"),
        ("read_file", "{}", 'Error: read_file needs a string "path" argument'),
        ("write_file", {"path": "x"}, 'Error: write_file needs a string "content" argument'),
        ("run_command", {"command": 7}, 'Error: run_command needs a string "command" argument'),
        ("read_file", {"path": "missing.txt"}, "Error: read_file: no such file: missing.txt"),
        ("read_file", {"path": "."}, "Error: read_file: not a regular file: ."),
        (
            "delete_everything",
            "{}",
            'Error: unknown tool "delete_everything"; the tools are '
            "read_file, write_file, run_command",
        ),
    ],
)
def test_tool_errors_are_text(work: Path, name: str, args: Any, expected: str) -> None:
    assert Tools(work)(name, args).startswith(expected)


def test_read_file_limit(work: Path) -> None:
    (work / "big.bin").write_bytes(b"x" * (512 * 1024 + 1))
    (work / "ok.bin").write_bytes(b"y" * (512 * 1024))
    tools = Tools(work)
    assert tools("read_file", {"path": "big.bin"}) == (
        "Error: read_file: big.bin is 524289 bytes, over the 512 KiB limit; "
        "read parts of it with run_command (head, tail, grep)"
    )
    assert len(tools("read_file", {"path": "ok.bin"})) == 512 * 1024


def test_run_command_output(work: Path) -> None:
    (work / "sub").mkdir()
    tools = Tools(work)
    out = tools("run_command", {"command": "pwd; echo oops >&2; exit 3", "cwd": "sub"})
    assert out == (
        f"exit_code: 3\n--- stdout ---\n{(work / 'sub').resolve()}\n\n--- stderr ---\noops\n"
    )
    refused = tools("run_command", {"command": "pwd", "cwd": ".."})
    assert refused.startswith("Error: .. is outside the working directory")


def test_run_command_output_is_clipped(work: Path) -> None:
    out = Tools(work)("run_command", {"command": "head -c 100000 /dev/zero | tr '\\0' a"})
    assert len(out) < 32_100 and "characters omitted" in out
    assert out.startswith("exit_code: 0\n--- stdout ---\naaa")


def test_run_command_timeout_kills_the_group(work: Path) -> None:
    tools = Tools(work, command_timeout=0.5)
    out = tools("run_command", {"command": "sleep 30 & echo started; wait"})
    assert out.startswith(
        "Error: the command timed out after 0.5s and was killed "
        "(uwf-builtin --command-timeout sets the limit)\n--- stdout ---\nstarted\n"
    )


def test_run_command_environment_has_no_api_key(
    work: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from uwf.config.config import parse_config

    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    monkeypatch.setenv("OTHER_SETTING", "kept")
    config = parse_config({"providers": {"p": {"baseUrl": "http://x", "apiKeyEnv": TEST_KEY_ENV}}})
    out = Tools(work, env=builtin.command_env(config))("run_command", {"command": "env"})
    assert TEST_KEY not in out and "OTHER_SETTING=kept" in out


# -- command-line options ---------------------------------------------------------------------


def test_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_EDGE_PROMPT", "EDGE")
    parser = builtin.make_parser()
    given, target = parser.parse(
        ["--model", "fast", "--allow-outside", "--command-timeout=5", "--http-timeout", "2.5",
         "--max-turns", "7", "THREAD", "role"]
    )  # fmt: skip
    assert target == ("THREAD", "role", "EDGE")
    options = builtin.options_of(parser, given)
    assert (options.model, options.allow_outside, options.command_timeout) == ("fast", True, 5)
    assert (options.http_timeout, options.max_turns) == (2.5, 7)
    named = ["--thread", "T", "--role", "r", "--prompt", "go", "--allow-outside"]
    given, target = parser.parse(named)
    assert target == ("T", "r", "go")
    assert builtin.options_of(parser, given) == builtin.Options(allow_outside=True)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bogus", "T", "r"], "unrecognized arguments: --bogus; usage: uwf-builtin "),
        (["--model"], "argument --model: expected one argument; usage: uwf-builtin "),
        (["--model", " ", "T", "r"], "--model needs a model alias; usage: uwf-builtin "),
        (["--command-timeout", "0", "T", "r"], "--command-timeout must be a positive number"),
        (["--http-timeout", "soon", "T", "r"], "--http-timeout must be a positive number"),
        (["--max-turns", "0", "T", "r"], "--max-turns must be a positive integer, got: 0"),
    ],
)
def test_bad_options(cli_proc: Any, args: list[str], message: str) -> None:
    r = cli_proc(*args, prog="uwf-builtin")
    assert r.code == 2 and r.out == ""
    assert r.err.startswith(f"error: {message}") and len(r.err.splitlines()) == 1


def test_help(cli_proc: Any) -> None:
    r = cli_proc("--help", prog="uwf-builtin")
    assert r.code == 0 and r.out.startswith("usage: uwf-builtin [options] <thread-id> <role>\n")
    for option in ("--model", "--allow-outside", "--command-timeout", "--http-timeout"):
        assert option in r.out
    assert "$UWF_LLM_TIMEOUT" in r.out


# -- end to end through `uwf thread step` ----------------------------------------------------------


def state_bytes(root: Path) -> Any:
    """Heads, waits and history: what a failed step leaves as it was (``step_state``)."""
    return step_state(root)


@pytest.fixture
def thread(new_thread: Any) -> str:
    return str(new_thread(TASK))


@pytest.fixture
def served(root: Path, llm: LLMServer) -> LLMServer:
    """config.yaml and .env pointing at the local server (defaultModel = ``default``)."""
    write_config(root, llm.base_url)
    return llm


def step_ok(cli: Any, thread: str, agent: str = "uwf-builtin") -> dict[str, Any]:
    r = cli("thread", "step", thread, "--agent", agent)
    assert r.code == 0, r.err
    return dict(r.json())


def step_fails(
    cli: Any, root: Path, thread: str, agent: str, message: str, prefix: bool = False
) -> Result:
    """One step that fails with ``error: agent command failed … error: <message>`` (or a line
    starting so, with ``prefix``) and changes nothing."""
    before = state_bytes(root)
    r = cli("thread", "step", thread, "--agent", agent)
    assert r.code == 5, (r.out, r.err)
    errors = [x for x in r.err.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1, r.err
    if prefix:
        assert errors[0].startswith(AGENT_FAILED + message), r.err
    else:
        assert errors == [AGENT_FAILED + message], r.err
    assert "Traceback" not in r.err and r.out == ""
    assert state_bytes(root) == before
    assert TEST_KEY not in r.err
    return r


def tool_messages(request: RecordedRequest) -> list[dict[str, Any]]:
    return [m for m in request.body["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("agent", ["uwf-builtin", "python:uwf-builtin"])  # a process; in uwf's
def test_tool_call_writes_a_file_then_answers(
    cli: Any, cli_proc: Any, root: Path, thread: str, served: LLMServer, agent: str
) -> None:
    served.reply(
        {
            "content": "Writing the plan file first.",
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "notes/plan.md", "content": "# P\n"}}
            ],
            "reasoning_content": "a plan file helps",
        },
        PLAN_FM,
    )
    out = step_ok(cli, thread, agent)
    assert out["role"] == "planner" and out["done"] is False
    assert (Path.cwd() / "notes" / "plan.md").read_text() == "# P\n"

    first, second = served.chat_requests()
    assert served.pending == 0
    for req in (first, second):
        assert req.headers["authorization"] == f"Bearer {TEST_KEY}"
        assert req.body["model"] == DEFAULT_MODEL
        assert req.body["tool_choice"] == "auto"
        assert [t["function"]["name"] for t in req.body["tools"]] == [
            "read_file",
            "write_file",
            "run_command",
        ]
        assert "response_format" not in req.body and not req.body.get("stream")
    assert [m["role"] for m in first.body["messages"]] == ["system", "user"]
    assert "## Goal\n\nYou are a planning agent." in first.message("system")["content"]
    assert "## Deliverable Format" in first.message("system")["content"]
    assert str(Path.cwd().resolve()) in first.message("system")["content"]
    user = first.message("user")["content"]
    assert (
        user == f"## Task\n{TASK}\n\n## Moderator Instruction\n\nPlan the work for the task above."
    )
    assert [m["role"] for m in second.body["messages"]] == ["system", "user", "assistant", "tool"]
    assert second.body["messages"][2]["tool_calls"][0]["function"]["name"] == "write_file"
    assert tool_messages(second) == [
        {"role": "tool", "tool_call_id": "call_0", "content": "Wrote 4 bytes to notes/plan.md"}
    ]

    steps = cli("thread", "steps", thread).json()["steps"]
    assert steps[1]["output"] == {"status": "_", "plan": "write hello.py", "steps": ["write it"]}
    assert steps[1]["agent"] == "uwf-builtin"
    detail = cli("thread", "step-details", steps[1]["hash"], "--format", "json").json()
    assert detail["model"] == DEFAULT_MODEL and len(detail["sessionId"]) == 26
    assert detail["turnCount"] == 3 and isinstance(detail["duration"], int)
    assert [(t["index"], t["role"]) for t in detail["turns"]] == [
        (0, "assistant"),
        (1, "tool"),
        (2, "assistant"),
    ]
    assert detail["turns"][0]["toolCalls"] == [
        {"name": "write_file", "args": json.dumps({"path": "notes/plan.md", "content": "# P\n"})}
    ]
    assert detail["turns"][0]["reasoning"] == "a plan file helps"
    assert detail["turns"][2]["content"] == PLAN_FM
    read = cli_proc("thread", "read", thread)
    assert read.code == 0 and "**Agent:** uwf-builtin" in read.out and "The plan." in read.out
    step_read = cli_proc("step", "read", steps[1]["hash"])
    assert '\n\n**Tool call:** `write_file`\n\n```\n{"path": "notes/plan.md"' in step_read.out
    assert "## Turn 2: tool\n\n```markdown\nWrote 4 bytes to notes/plan.md" in step_read.out
    assert not (root / "sessions").exists()
    assert cli("cas", "verify").code == 0


@pytest.mark.parametrize("agent", ["uwf-builtin", "python:uwf-builtin"])
def test_run_command_sees_no_secret_in_a_process_or_in_uwfs(
    cli: Any, root: Path, thread: str, served: LLMServer, agent: str
) -> None:
    """The commands a model runs get the step's environment without the provider's key, the
    .env entries or the store's credentials, whether the agent is a process or runs in uwf's
    own process (docs/api.md, "What cannot apply in-process")."""
    served.reply(
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "env"}}]}, PLAN_FM
    )
    step_ok(cli, thread, agent)
    [seen] = [m["content"] for m in tool_messages(served.chat_requests()[1])]
    assert "UWF_EDGE_PROMPT=" in seen and TEST_KEY not in seen and TEST_KEY_ENV not in seen


def test_bad_tool_calls_go_back_to_the_model(
    cli: Any, thread: str, served: LLMServer, tmp_path: Path
) -> None:
    served.reply(
        {
            "tool_calls": [
                {"name": "read_file", "arguments": '{"path": "x.txt"'},  # malformed JSON
                {"name": "launch_rockets", "arguments": {}},
                {"name": "write_file", "arguments": {"path": "../escape.txt", "content": "x"}},
            ]
        },
        PLAN_FM,
    )
    step_ok(cli, thread)
    answers = [m["content"] for m in tool_messages(served.chat_requests()[1])]
    assert answers[0].startswith("Error: read_file: the arguments are not valid JSON (")
    assert answers[1] == (
        'Error: unknown tool "launch_rockets"; the tools are read_file, write_file, run_command'
    )
    assert answers[2] == (
        f"Error: ../escape.txt is outside the working directory {Path.cwd().resolve()}; "
        "uwf-builtin refuses it unless started with --allow-outside"
    )
    assert not (tmp_path / "escape.txt").exists()


def test_allow_outside(cli: Any, thread: str, served: LLMServer, tmp_path: Path) -> None:
    served.reply(
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "../out.txt", "content": "x"}}
            ]
        },
        PLAN_FM,
    )
    step_ok(cli, thread, "uwf-builtin --allow-outside")
    assert (tmp_path / "out.txt").read_text() == "x"
    assert "Paths outside it are allowed." in served.chat_requests()[0].message("system")["content"]


def test_command_timeout_option(cli: Any, thread: str, served: LLMServer) -> None:
    served.reply(
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "sleep 20"}}]}, PLAN_FM
    )
    step_ok(cli, thread, "uwf-builtin --command-timeout 0.3")
    [answer] = [m["content"] for m in tool_messages(served.chat_requests()[1])]
    assert answer.startswith("Error: the command timed out after 0.3s and was killed")


def test_model_option(cli: Any, thread: str, served: LLMServer) -> None:
    served.reply(PLAN_FM)
    step_ok(cli, thread, "uwf-builtin --model extract")
    assert served.chat_requests()[0].body["model"] == EXTRACT_MODEL


@pytest.mark.parametrize(("max_turns", "calls"), [(5, 8), (None, 33)])
def test_the_most_model_calls_of_a_step(
    cli_proc: Any, thread: str, served: LLMServer, max_turns: int | None, calls: int
) -> None:
    """A model that keeps answering in prose: --max-turns N calls of the tool loop, then the
    2 corrections and the LLM extract, one call each (docs/agents.md states N + 3; 11 at 5
    and 36 at the default 30 before)."""
    served.reply(*["Still thinking about it."] * (calls - 1), json.dumps(PLAN_OUTPUT))
    agent = "uwf-builtin" + (f" --max-turns {max_turns}" if max_turns else "")
    r = cli_proc("thread", "step", thread, "--agent", agent)
    assert r.code == 0, r.err
    requests = served.chat_requests()
    assert len(requests) == calls
    assert [r.body.get("tool_choice") for r in requests[-3:]] == ["none", "none", None]
    assert requests[-1].body["model"] == EXTRACT_MODEL  # the extract
    usage = cli_proc("thread", "steps", thread).json()["steps"][1]["usage"]
    assert usage["calls"] == calls


def test_correction_runs_without_tools(cli: Any, thread: str, served: LLMServer) -> None:
    # one call allowed: the text on the last call gets no nudge, so the kit sends a correction
    served.reply("I planned it but forgot the format.", PLAN_FM)
    step_ok(cli, thread, "uwf-builtin --max-turns 1")
    first, correction = served.chat_requests()
    warning = {"role": "user", "content": builtin.deadline_message(1)}
    assert first.body["tool_choice"] == "auto"
    assert first.body["messages"][2:] == [warning]  # one call left from the start
    assert correction.body["tool_choice"] == "none"
    assert correction.body["messages"][:3] == first.body["messages"]
    assert correction.body["messages"][3:] == [
        {"role": "assistant", "content": "I planned it but forgot the format."},
        {"role": "user", "content": CORRECTION_MESSAGE},
    ]


def test_solve_issue_to_end(
    cli: Any, cli_proc: Any, root: Path, thread: str, llm: LLMServer
) -> None:
    write_config(root, llm.base_url, {"builtin": {"command": "uwf-builtin", "args": []}})
    write = {"name": "write_file", "arguments": {"path": "hello.py", "content": "print('hi')\n"}}
    run = {"name": "run_command", "arguments": {"command": "cat hello.py"}}
    test = {"name": "write_file", "arguments": {"path": "test_hello.py", "content": "ok\n"}}
    llm.reply(
        PLAN_FM,
        {"tool_calls": [write]},
        DEV_FM,
        {"tool_calls": [run]},
        REJECT_FM,
        {"tool_calls": [test]},
        DEV_FM.replace("[hello.py]", "[hello.py, test_hello.py]"),
        APPROVE_FM,
    )
    r = cli_proc("thread", "step", thread, "-c", "10")  # defaultAgent from config.yaml
    assert r.code == 0, r.err
    results = r.jsonl()
    assert [x["role"] for x in results] == [
        "planner",
        "developer",
        "reviewer",
        "developer",
        "reviewer",
    ]
    assert results[-1]["done"] is True and llm.pending == 0
    assert (Path.cwd() / "hello.py").read_text() == "print('hi')\n"
    assert (Path.cwd() / "test_hello.py").exists()

    requests = llm.chat_requests()
    reviewer_saw = tool_messages(requests[4])
    assert reviewer_saw[0]["content"] == (
        "exit_code: 0\n--- stdout ---\nprint('hi')\n\n--- stderr ---\n"
    )
    # the developer's second visit: its first visit replayed, then what happened since
    rework = requests[5].body["messages"]
    first_visit = requests[1].body["messages"]
    assert rework[:2] == first_visit
    assert [m["role"] for m in rework] == ["system", "user", "assistant", "user"]
    assert json.loads(rework[2]["content"])["summary"] == "wrote hello.py"
    assert "### Step 3: reviewer" in rework[3]["content"]
    assert rework[3]["content"].endswith("Address every comment:\nadd a test\n")
    assert TASK in first_visit[1]["content"]
    assert '### Step 1: planner\nOutput: {"status":"_"' in first_visit[1]["content"]

    history = [json.loads(x) for x in (root / "history.jsonl").read_text().splitlines()]
    assert [(h["thread"], h["status"]) for h in history] == [(thread, "completed")]
    steps = cli("thread", "steps", thread).json()["steps"]
    assert {s["agent"] for s in steps[1:]} == {"uwf-builtin"}
    assert cli("cas", "verify").code == 0
    for path in root.rglob("*"):
        if path.is_file() and path.name != ".env":
            assert TEST_KEY.encode() not in path.read_bytes(), path


# -- the model server failing ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"status": 500, "body": "upstream exploded"}, "LLM HTTP 500: upstream exploded"),
        (
            {"status": 429, "body": "slow down"},
            "LLM HTTP 429 (rate limited; uwf does not retry): slow down",
        ),
        ({"raw": "<html>not json</html>"}, "LLM invalid JSON response: <html>not json</html>"),
        ({"raw": '{"choices": []}'}, "LLM response has no choices"),
        ({"raw": '{"id": "x"}'}, "LLM response has no choices"),
    ],
)
def test_server_errors_fail_the_step(
    cli: Any, root: Path, thread: str, served: LLMServer, spec: Any, message: str
) -> None:
    served.reply(spec)
    step_fails(cli, root, thread, "uwf-builtin", message)
    assert len(served.chat_requests()) == 1  # no retries


def test_server_timeout_flag(cli: Any, root: Path, thread: str, served: LLMServer) -> None:
    served.reply({"delay": 10, "then": PLAN_FM})
    url = served.base_url + "/chat/completions"
    step_fails(
        cli,
        root,
        thread,
        "uwf-builtin --http-timeout 0.5",
        f"LLM request timed out after 0.5s: {url} "
        "(--http-timeout or $UWF_LLM_TIMEOUT sets the limit)",
    )


def test_server_timeout_env(
    cli: Any, root: Path, thread: str, served: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UWF_LLM_TIMEOUT", "0.5")
    served.reply({"delay": 10, "then": PLAN_FM})
    r = step_fails(
        cli,
        root,
        thread,
        "uwf-builtin",
        f"LLM request timed out after 0.5s: {served.base_url}/chat/completions "
        "(--http-timeout or $UWF_LLM_TIMEOUT sets the limit)",
    )
    assert "uwf-builtin: error: LLM request timed out" in r.err  # the agent's own line


def test_bad_timeout_env(
    cli: Any, root: Path, thread: str, served: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UWF_LLM_TIMEOUT", "-1")
    step_fails(
        cli,
        root,
        thread,
        "uwf-builtin",
        "$UWF_LLM_TIMEOUT must be a positive number of seconds, got: -1",
    )
    assert served.requests == []


def test_server_unreachable(cli: Any, root: Path, thread: str) -> None:
    url = closed_port_url()
    write_config(root, url)
    r = step_fails(cli, root, thread, "uwf-builtin", "LLM network error: ConnectError: ", True)
    assert r.err.splitlines()[-1].endswith(f"({url}/chat/completions)")


def test_no_model_configured(cli: Any, root: Path, thread: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text("agents: {b: {command: uwf-builtin}}\ndefaultAgent: b\n")
    step_fails(
        cli,
        root,
        thread,
        "uwf-builtin",
        "uwf-builtin needs a model: set defaultModel (with its providers and models entries) "
        "in config.yaml, or pass --model <alias>",
    )


def test_unknown_model_alias(cli: Any, root: Path, thread: str, served: LLMServer) -> None:
    step_fails(cli, root, thread, "uwf-builtin --model nope", "unknown model alias: nope")


def test_missing_api_key(cli: Any, root: Path, thread: str, llm: LLMServer) -> None:
    write_config(root, llm.base_url, key=None)
    assert TEST_KEY_ENV not in os.environ
    step_fails(cli, root, thread, "uwf-builtin", f"missing API key env var: {TEST_KEY_ENV}")
    assert llm.requests == []


# -- docs/agents.md: the agents and configs it shows really work ----------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs" / "agents.md"


def doc_block(name: str) -> str:
    """The fenced block right after ``<!-- tested: name -->`` in docs/agents.md."""
    text = DOCS.read_text(encoding="utf-8")
    marker = f"<!-- tested: {name} -->\n```"
    assert marker in text, name
    body = text[text.index(marker) + len(marker) :]
    body = body[body.index("\n") + 1 :]
    return body[: body.index("\n```\n")] + "\n"


PLANNER_OUTPUT = {"status": "_", "plan": "Check the address.", "steps": ["add the check"]}


@pytest.mark.skipif(shutil.which("jq") is None, reason="the shell example needs jq")
def test_doc_shell_agent(cli: Any, thread: str, tmp_path: Path) -> None:
    script = tmp_path / "my-agent"
    script.write_text(doc_block("shell-agent"))
    script.chmod(0o755)
    r = cli("thread", "step", thread, "--agent", str(script))
    assert r.code == 0, r.err
    assert f"my-agent: working as planner on: {TASK}" in r.err
    steps = cli("thread", "steps", thread).json()["steps"]
    assert steps[1]["agent"] == "my-agent"
    assert steps[1]["output"] == {
        "status": "_",
        "plan": "Check the address with a regex.",
        "steps": ["add the check", "add a test"],
    }
    node = cli("cas", "get", steps[1]["hash"]).json()["payload"]
    assert node["depth"] == 1 and node["prev"] is None
    assert node["edgePrompt"] == "Plan the work for the task above."
    r = cli("thread", "step", thread, "--agent", str(script))
    assert r.code == 5
    assert r.err.splitlines()[-1] == (
        f"error: agent command failed ({script}) with exit code 1: "
        "error: my-agent cannot play the role developer"
    )
    assert cli("cas", "verify").code == 0


def test_doc_python_agent(cli: Any, thread: str, tmp_path: Path) -> None:
    script = tmp_path / "echo-agent.py"
    script.write_text(doc_block("python-agent"))
    r = cli("thread", "step", thread, "--agent", f"{sys.executable} {script}")
    assert r.code == 0, r.err
    [step] = cli("thread", "steps", thread).json()["steps"][1:]
    assert (step["agent"], step["output"]) == ("echo-agent", PLANNER_OUTPUT)
    detail = cli("thread", "step-details", step["hash"], "--format", "json").json()
    assert detail["promptChars"] > 1000 and detail["turns"][0]["content"].endswith("The plan.")


def test_doc_claude_config(
    cli: Any, root: Path, thread: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claude example, with a stand-in `claude` that records what it was given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "claude-argv.json"
    fake = bin_dir / "claude"
    answer = "---\nstatus: _\nplan: Check the address.\nsteps: [add the check]\n---\nThe plan."
    fake.write_text(
        f"#!{sys.executable}\nimport json, sys\n"
        f"given = {{'argv': sys.argv[1:], 'stdin': sys.stdin.read()}}\n"
        f"json.dump(given, open({str(record)!r}, 'w'))\n"
        f"print({answer!r})\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(doc_block("claude-config"))
    dry = cli("thread", "step", thread, "--dry-run").json()
    assert dry["agent"] == [
        "uwf-cmd",
        "--",
        "claude",
        "-p",
        "--permission-mode",
        "acceptEdits",
        "{prompt}",
        thread,
        "planner",
    ]
    r = cli("thread", "step", thread)
    assert r.code == 0, r.err
    given = json.loads(record.read_text())
    assert given["argv"][:3] == ["-p", "--permission-mode", "acceptEdits"]
    prompt = given["argv"][3]
    assert prompt.startswith("## Deliverable Format") and given["stdin"] == ""
    assert f"## Task\n{TASK}\n\n## Moderator Instruction\n\nPlan the work" in prompt
    [step] = cli("thread", "steps", thread).json()["steps"][1:]
    assert (step["agent"], step["output"]) == ("uwf-cmd", PLANNER_OUTPUT)


def test_doc_builtin_config(
    cli: Any, root: Path, thread: str, llm: LLMServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import yaml

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = yaml.safe_load(doc_block("builtin-config"))
    config["providers"]["openai"]["baseUrl"] = llm.base_url
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    (root / ".env").write_text(f"OPENAI_API_KEY={TEST_KEY}\n")
    llm.reply({"tool_calls": [{"name": "run_command", "arguments": {"command": "true"}}]}, PLAN_FM)
    r = cli("thread", "step", thread)
    assert r.code == 0, r.err
    first, second = llm.chat_requests()
    assert first.body["model"] == "gpt-4o-mini"
    assert first.headers["authorization"] == f"Bearer {TEST_KEY}"
    assert tool_messages(second)[0]["content"].startswith("exit_code: 0\n")
    assert cli("thread", "steps", thread).json()["steps"][1]["agent"] == "uwf-builtin"


def test_doc_hermes_config(cli: Any, root: Path, thread: str) -> None:
    """The config is what uwf-hermes expects: its args go before `<thread-id> <role>`."""
    from uwf.agents.hermes import make_parser

    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(doc_block("hermes-config"))
    dry = cli("thread", "step", thread, "--dry-run").json()
    assert dry["agent"] == ["uwf-hermes", "-m", "anthropic/claude-sonnet-4", thread, "planner"]
    given, target = make_parser().parse(dry["agent"][1:])
    assert (given.passed, target[:2]) == (["-m", "anthropic/claude-sonnet-4"], (thread, "planner"))


# -- $SUSPEND, then thread resume (docs/format.md, "Suspending and resuming") ------------------


def test_the_model_suspends_the_step_and_a_person_resumes_it(
    cli_proc: Any, served: LLMServer
) -> None:
    """The model answers ``$status: $SUSPEND``: the thread waits (exit 6) with its reason;
    ``thread resume -p`` asks the model again with the person's answer in the prompt, and
    the thread goes on to ``$END``."""
    v1.write_review(Path.cwd())
    served.reply(v1.SUSPEND, v1.PLAN, v1.BUILT, v1.APPROVED)
    thread, _ = v1.suspend_and_resume(cli_proc, "uwf-builtin")
    done = cli_proc("thread", "step", thread, "-c", "5", "--agent", "uwf-builtin")
    assert done.code == 0, done.err
    assert [(x["role"], x["status"]) for x in done.jsonl()] == [
        ("builder", "active"),
        ("reviewer", "completed"),
    ]
    assert served.pending == 0
    first, again = (r.message("user")["content"] for r in served.chat_requests()[:2])
    instruction = f"## Moderator Instruction\n\nPlan this task: {v1.TASK}"
    assert first.endswith(instruction)
    assert again.endswith(f"{instruction}\n\n{v1.RESUMED}")
    deliverable = served.chat_requests()[0].message("system")["content"]
    assert "answer instead with `$status: $SUSPEND` and `reason: <what you" in deliverable
    steps = json.loads(cli_proc("thread", "steps", thread).out)["steps"][1:]
    assert [s["output"]["$status"] for s in steps] == ["planned", "built", "approved"]
    assert {s["agent"] for s in steps} == {"uwf-builtin"}
