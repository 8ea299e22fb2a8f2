"""`uwf-hermes` with the REAL Hermes agent (hermes-agent) against the local scripted server.

Every test runs `uwf thread step`, which spawns the real `uwf-hermes`, which runs the real
`hermes chat` in an isolated HOME (tests/hermes_home.py) whose Hermes config points at
tests/llm_server.py. The server's recorded requests show what Hermes sent the model — the
prompts uwf built, and whether a session was resumed (a resumed session sends its history).

The bad-input cases that Hermes itself cannot be made to produce (a non-zero exit, no session
id, a failing session export) use a fake `hermes` script placed first on PATH. The model
server's own failures (500, 429, a stalled reply, garbage) go through the real Hermes, whose
one retry (`agent.api_max_retries: 1`) and `$HERMES_API_TIMEOUT` keep them short.

One HOME serves the whole module (Hermes' first start in a new HOME is the slowest); each
test gets its own server, and the HOME's config is rewritten to point at it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

import version1 as v1
from hermes_home import MODEL, hermes_missing_reason, use_home, write_hermes_config
from llm_server import LLMServer, RecordedRequest
from rootfiles import step_state
from support import APPROVE, BIN, DEV, PLAN, REJECT, Result

_MISSING = hermes_missing_reason()
if _MISSING is not None:  # CI installs hermes-agent (the `hermes` extra): these tests run there
    pytest.skip(f"uwf-hermes tests need the real Hermes agent: {_MISSING}", allow_module_level=True)

from uwf.agent_kit.prompts import CORRECTION_MESSAGE  # noqa: E402
from uwf.agents import hermes as hermes_agent  # noqa: E402

TASK = "Fix the login bug"
DEV_AGAIN = "---\nstatus: _\nfilesChanged: [a.py, test_a.py]\nsummary: added tests\n---\nDone."
AGENT_FAILED = "error: agent command failed (uwf-hermes) with exit code 1: error: "
SESSION_ID = re.compile(r"^\d{8}_\d{6}_[0-9a-f]+$")
STEP_TIMEOUT = 300  # seconds for a subprocess `uwf` running Hermes steps
# the real Hermes starts slowly (seconds a step on a loaded machine): each test gets as long as
# one of its steps may take
pytestmark = pytest.mark.timeout(STEP_TIMEOUT)


def usage_of(i: int) -> dict[str, int]:
    """What the model server reports for the i-th reply of the end-to-end test."""
    return {
        "prompt_tokens": 100 * (i + 1),
        "completion_tokens": i + 1,
        "total_tokens": 101 * (i + 1),
    }


# -- fixtures -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hermes_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hermes-home")


@dataclass
class Hermes:
    server: LLMServer
    home: Path

    def configure(self, **kwargs: Any) -> None:
        write_hermes_config(self.home, self.server.base_url, **kwargs)

    def chats(self) -> list[RecordedRequest]:
        return self.server.chat_requests()

    def export(self, session_id: str) -> dict[str, Any]:
        """The session as the real Hermes stored it."""
        out = subprocess.run(
            ["hermes", "sessions", "export", "--session-id", session_id, "-"],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout
        value = json.loads(out.strip().splitlines()[-1])
        assert isinstance(value, dict)
        return value


@pytest.fixture
def hermes(hermes_home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hermes]:
    """The real Hermes in the module's HOME, pointed at a fresh scripted server."""
    server = LLMServer(models=(MODEL,)).start()
    try:
        write_hermes_config(hermes_home, server.base_url)
        use_home(monkeypatch, hermes_home)
        yield Hermes(server, hermes_home)
    finally:
        server.stop()


@pytest.fixture
def thread(new_thread: Any) -> str:
    return str(new_thread(TASK))


def state_bytes(root: Path) -> Any:
    """Heads, waits and history: what a failed step leaves as it was (``step_state``)."""
    return step_state(root)


def session_cache(root: Path) -> dict[str, str]:
    path = root / "cache" / "hermes-sessions.json"
    return json.loads(path.read_text()) if path.exists() else {}


def user_prompt(request: RecordedRequest) -> str:
    """The last user message Hermes sent the model (what uwf-hermes asked)."""
    users = [m for m in request.body["messages"] if m.get("role") == "user"]
    content = users[-1]["content"]
    assert isinstance(content, str)
    return content


def details(cli: Any, step_hash: str) -> dict[str, Any]:
    r = cli("thread", "step-details", step_hash, "--format", "json")
    assert r.code == 0, r.err
    value = r.json()
    assert isinstance(value, dict)
    return value


def step_fails(cli: Any, root: Path, thread: str, message: str, *agent: str) -> Result:
    """One step that must fail with exactly one `error:` line starting with ``message`` (after
    uwf's agent-failed prefix) and leave the head, the history and the session cache alone."""
    before = state_bytes(root)
    r = cli("thread", "step", thread, *agent)
    assert r.code == 5, (r.out, r.err)  # the agent failed
    errors = [x for x in r.err.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1, r.err
    assert errors[0].startswith(message), errors[0]
    ours = [x for x in r.err.splitlines() if not x.startswith("uwf-hermes: hermes: ")]
    assert not any("Traceback" in x for x in ours), r.err  # Hermes' own lines pass through
    assert r.out == ""
    assert state_bytes(root) == before
    assert session_cache(root) == {}
    assert [s.get("role") for s in cli("thread", "steps", thread).json()["steps"]] == [None]
    return r


# -- the whole workflow -------------------------------------------------------------------------


def test_solve_issue_end_to_end(
    cli: Any, cli_proc: Any, root: Path, hermes: Hermes, solve_issue: str, thread: str
) -> None:
    # The model comes from the agent's args in uwf's config.yaml, not from Hermes' own config.
    hermes.configure(model="hermes-config-default")
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "agents": {"hermes": {"command": "uwf-hermes", "args": ["-m", MODEL]}},
                "defaultAgent": "hermes",
            }
        )
    )
    # each reply reports its tokens (in the stream's last chunk, as Hermes asks for them)
    texts = [PLAN, DEV, REJECT, DEV_AGAIN, APPROVE]
    hermes.server.reply(*({"content": text, "usage": usage_of(i)} for i, text in enumerate(texts)))

    r = cli_proc("thread", "step", thread, "-c", "10", timeout=STEP_TIMEOUT)
    assert r.code == 0, r.err
    results = r.jsonl()
    roles = ["planner", "developer", "reviewer", "developer", "reviewer"]
    assert [x["role"] for x in results] == roles
    assert [x["done"] for x in results] == [False] * 4 + [True]

    # Five chat requests, one per step, all for the model the agent's args chose.
    chats = hermes.chats()
    assert len(chats) == 5
    assert {c.body["model"] for c in chats} == {MODEL}
    assert all(c.body.get("stream") is True for c in chats)
    # First visits start new sessions (system + our prompt); the re-entries resume the
    # role's session, so the model sees the earlier visit too.
    assert [len(c.body["messages"]) for c in chats] == [2, 2, 2, 4, 4]
    prompts = [user_prompt(c) for c in chats]
    for prompt in prompts:
        assert prompt.startswith("## Deliverable Format\n")
    for first in prompts[:3]:
        assert f"## Task\n{TASK}" in first
        assert "## Prepare" in first
    for again in prompts[3:]:
        assert "## Task" not in again and "## Prepare" not in again
        assert "## What Happened Since Your Last Turn" in again
    assert "### Step 3: reviewer" in prompts[3]
    assert "The reviewer rejected your change. Address every comment:\nadd tests" in prompts[3]
    assert "### Step 4: developer" in prompts[4] and "Summary: added tests" in prompts[4]
    developer_again = chats[3].body["messages"]
    assert [m["role"] for m in developer_again] == ["system", "user", "assistant", "user"]
    assert developer_again[1]["content"] == prompts[1]
    assert developer_again[2]["content"] == DEV

    # The chain, and the detail of every step: the real model, a real duration, the turn.
    steps = cli("thread", "steps", thread).json()["steps"][1:]
    assert [s["role"] for s in steps] == roles
    assert {s["agent"] for s in steps} == {"uwf-hermes"}
    assert steps[3]["output"] == {
        "status": "_",
        "filesChanged": ["a.py", "test_a.py"],
        "summary": "added tests",
    }
    found = [details(cli, s["hash"]) for s in steps]
    # Each step's tokens come from its session's export: a re-entry counts only its own run.
    for i, step in enumerate(steps):
        assert step["usage"] == {
            "promptTokens": usage_of(i)["prompt_tokens"],
            "completionTokens": usage_of(i)["completion_tokens"],
            "totalTokens": usage_of(i)["total_tokens"],
            "calls": 1,
        }, i
    spent = cli("thread", "show", thread).json()["cost"]
    assert spent["promptTokens"] == sum(usage_of(i)["prompt_tokens"] for i in range(5))
    assert spent["calls"] == 5 and spent["durationMs"] == sum(s["durationMs"] for s in steps)
    for detail, text in zip(found, texts, strict=True):
        assert SESSION_ID.match(detail["sessionId"]), detail
        assert detail["model"] == MODEL
        assert isinstance(detail["duration"], int) and detail["duration"] > 0
        assert detail["turnCount"] == 1
        assert detail["turns"] == [
            {"index": 0, "role": "assistant", "content": text, "toolCalls": None, "reasoning": None}
        ]
    sessions = [d["sessionId"] for d in found]
    assert sessions[1] == sessions[3] and sessions[2] == sessions[4]
    assert len(set(sessions)) == 3
    assert session_cache(root) == {
        f"{thread}:planner": sessions[0],
        f"{thread}:developer": sessions[1],
        f"{thread}:reviewer": sessions[2],
    }
    # Hermes really keeps them, tagged as a tool's sessions, and the developer's holds both visits.
    developer = hermes.export(sessions[1])
    assert developer["source"] == "tool" and developer["model"] == MODEL
    assert [m["role"] for m in developer["messages"]] == ["user", "assistant"] * 2

    read = cli_proc("thread", "read", thread, "--quota", "100000")
    assert read.code == 0, read.err
    for text in texts:
        # the output as frontmatter (its fields in YAML), then the content after it
        frontmatter, content = text.split("\n---\n", 1)
        status = frontmatter.splitlines()[1]
        assert f"```markdown\n---\n{status}\n" in read.out and f"---\n{content}\n```" in read.out
    details_yaml = cli_proc("thread", "step-details", steps[3]["hash"])
    assert details_yaml.code == 0, details_yaml.err
    assert yaml.safe_load(details_yaml.out) == found[3]
    step_md = cli_proc("step", "read", steps[0]["hash"])
    assert step_md.code == 0 and f"## Turn 1: assistant\n\n```markdown\n{PLAN}\n```" in step_md.out
    assert cli("thread", "show", thread).json()["status"] == "completed"


# -- corrections and re-entries -----------------------------------------------------------------


def test_missing_frontmatter_fixed_by_one_correction_through_resume(
    cli: Any, root: Path, hermes: Hermes, thread: str
) -> None:
    Path("notes.txt").write_text("the login bug is in auth.py\n")
    looked = {
        "content": "Reading the notes.",
        "tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}],
    }
    forgot = "The plan: fix auth.py and add a regression test."
    hermes.server.reply(looked, forgot, PLAN)

    r = cli("thread", "step", thread, "--agent", "uwf-hermes")
    assert r.code == 0, r.err

    chats = hermes.chats()
    assert len(chats) == 3
    assert user_prompt(chats[2]) == CORRECTION_MESSAGE
    # The correction went into the same session: the model sees the whole first run.
    resumed = chats[2].body["messages"]
    assert [m["role"] for m in resumed] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert resumed[4]["content"] == forgot
    assert "the login bug is in auth.py" in resumed[3]["content"]

    [step] = cli("thread", "steps", thread).json()["steps"][1:]
    assert step["output"] == {"status": "_", "plan": "do it", "steps": ["one", "two"]}
    detail = details(cli, step["hash"])
    assert detail["model"] == MODEL and detail["duration"] > 0
    turns = detail["turns"]
    # the step's detail covers the first run and the correction (the corrected answer last)
    assert [t["role"] for t in turns] == ["assistant", "tool", "assistant", "assistant"]
    assert turns[0]["content"] == "Reading the notes."
    assert turns[0]["toolCalls"] == [{"name": "read_file", "args": '{"path": "notes.txt"}'}]
    assert "the login bug is in auth.py" in turns[1]["content"]
    assert turns[2] == {
        "index": 2,
        "role": "assistant",
        "content": forgot,
        "toolCalls": None,
        "reasoning": None,
    }
    assert turns[3]["content"] == PLAN
    assert detail["turnCount"] == 4
    assert session_cache(root) == {f"{thread}:planner": detail["sessionId"]}
    session = hermes.export(detail["sessionId"])
    assert [m["content"] for m in session["messages"] if m["role"] == "user"][-1] == (
        CORRECTION_MESSAGE
    )


def test_reentry_with_a_lost_session_starts_over_with_the_full_prompt(
    cli: Any, root: Path, hermes: Hermes, thread: str, scenario: Any
) -> None:
    mock = scenario({"planner": [PLAN], "developer": [DEV], "reviewer": [REJECT]})
    for _ in range(3):
        assert cli("thread", "step", thread, "--agent", mock).code == 0
    lost = "20000101_000000_dead00"
    (root / "cache").mkdir(exist_ok=True)
    (root / "cache" / "hermes-sessions.json").write_text(json.dumps({f"{thread}:developer": lost}))
    hermes.server.reply(DEV_AGAIN)

    r = cli("thread", "step", thread, "--agent", "uwf-hermes")
    assert r.code == 0, r.err
    assert (
        f"uwf-hermes: uwf-hermes: could not continue Hermes session {lost} "
        f"(hermes chat --resume {lost} failed with exit code 1: Session not found: {lost}"
    ) in r.err
    assert "starting a new session with the full prompt" in r.err
    [chat] = hermes.chats()
    assert len(chat.body["messages"]) == 2
    prompt = user_prompt(chat)
    assert f"## Task\n{TASK}" in prompt  # the full prompt, with the history's content
    # …which shows the whole thread: a new session remembers nothing, not even the plan
    assert "### Step 3: reviewer" in prompt
    assert "#### Step Content\n\n```markdown\nNeeds tests.\n```" in prompt
    assert "### Step 1: planner" in prompt and "### Step 2: developer" in prompt
    steps = cli("thread", "steps", thread).json()["steps"]
    detail = details(cli, steps[-1]["hash"])
    assert detail["sessionId"] != lost
    assert session_cache(root) == {f"{thread}:developer": detail["sessionId"]}


# -- the model server fails (real Hermes) -------------------------------------------------------

LLM_FAILURES = {
    "http-500": ([{"status": 500, "body": "upstream exploded"}] * 4, "HTTP 500: upstream exploded"),
    "http-429": (
        [
            {
                "status": 429,
                "body": json.dumps({"error": {"message": "rate limit reached for test-model"}}),
                "content_type": "application/json",
            }
        ]
        * 4,
        "HTTP 429: rate limit reached for test-model",
    ),
    "timeout": ([{"delay": 30, "then": PLAN}] * 4, "Request timed out"),
    "garbage": ([{"raw": "this is not an event stream"}] * 8, "malformed SSE response"),
}


@pytest.mark.parametrize("case", list(LLM_FAILURES))
def test_model_server_failure_fails_the_step(
    cli: Any, root: Path, hermes: Hermes, thread: str, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    specs, said = LLM_FAILURES[case]
    if case == "timeout":
        monkeypatch.setenv("HERMES_API_TIMEOUT", "2")  # Hermes' own request timeout, seconds
    hermes.server.reply(*specs)
    r = step_fails(
        cli,
        root,
        thread,
        f"{AGENT_FAILED}hermes chat failed with exit code 1: API call failed after 1 retries: ",
        "--agent",
        "uwf-hermes",
    )
    [line] = [x for x in r.err.splitlines() if x.startswith("error: ")]
    assert said in line
    assert re.search(r"\(session \d{8}_\d{6}_[0-9a-f]+\)$", line), line
    assert hermes.chats(), "Hermes never reached the server"
    assert len(hermes.chats()) <= len(specs)


# -- Hermes itself misbehaves (a fake `hermes` first on PATH) -----------------------------------

FAKE = """\
import json, os, sys
LOG = {log!r}
CASE = {case!r}
SESSION = "20261122_000000_fake00"
with open(LOG, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
answer = "---\\nstatus: _\\nplan: p\\nsteps: [a]\\n---\\nplan"
if sys.argv[1] == "chat":
    if CASE == "chat-exit":
        sys.stderr.write("Traceback (most recent call last):\\n  ...\\n")
        sys.stderr.write("RuntimeError: state.db is locked by another process\\n")
        sys.exit(3)
    print(answer)
    if CASE != "no-session-id":
        sys.stderr.write("\\nsession_id: " + SESSION + "\\n")
    sys.exit(0)
if sys.argv[1:3] == ["sessions", "export"]:
    if CASE == "export-exit":
        sys.stderr.write("database disk image is malformed\\n")
        sys.exit(1)
    if CASE == "export-not-found":
        print("Session '" + SESSION + "' not found.")
        sys.exit(0)
    messages = [{{"role": "user", "content": "hi", "timestamp": 1.0}}]
    if CASE != "export-no-answer":
        messages.append({{"role": "assistant", "content": answer, "timestamp": 2.0}})
    print(json.dumps({{"id": SESSION, "model": "fake", "started_at": 1.0, "messages": messages}}))
    sys.exit(0)
sys.exit(9)
"""

FAKE_CASES = {
    "chat-exit": "hermes chat failed with exit code 3: "
    "RuntimeError: state.db is locked by another process",
    "no-session-id": 'hermes chat printed no "session_id: <id>" line, so its session cannot be '
    "read (is `hermes` the Hermes agent from the hermes-agent package? check `hermes --version`)",
    "export-exit": "hermes sessions export --session-id 20261122_000000_fake00 failed with "
    "exit code 1: database disk image is malformed",
    "export-not-found": "hermes sessions export --session-id 20261122_000000_fake00 printed no "
    "session (one JSON line with id 20261122_000000_fake00 was expected): "
    "Session '20261122_000000_fake00' not found.",
    "export-no-answer": "hermes chat finished without an answer: session 20261122_000000_fake00 "
    "has no assistant message with text in this run",
}


@pytest.mark.parametrize("case", list(FAKE_CASES))
def test_misbehaving_hermes_fails_the_step(
    cli: Any,
    root: Path,
    thread: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    fake_bin = tmp_path / "fake-bin"
    fake_bin.mkdir()
    log = tmp_path / "fake-calls.jsonl"
    fake = fake_bin / "hermes"
    fake.write_text(f"#!{sys.executable}\n" + FAKE.format(log=str(log), case=case))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_bin}{os.pathsep}{os.environ['PATH']}")

    step_fails(cli, root, thread, AGENT_FAILED + FAKE_CASES[case], "--agent", "uwf-hermes")
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    chat = calls[0]
    assert chat[:3] == ["chat", "-Q", "-q"]
    assert chat[3].startswith("## Deliverable Format\n") and f"## Task\n{TASK}" in chat[3]
    assert chat[4:] == ["--source", "tool"]
    exports = [["sessions", "export", "--session-id", "20261122_000000_fake00", "-"]]
    assert calls[1:] == ([] if case in ("chat-exit", "no-session-id") else exports)


def test_hermes_not_on_path(
    cli: Any, root: Path, thread: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    agent = str(BIN / "uwf-hermes")
    step_fails(
        cli,
        root,
        thread,
        f"error: agent command failed ({agent}) with exit code 1: error: hermes not found on "
        "PATH: uwf-hermes drives the Hermes agent; install it with `pip install hermes-agent` "
        "(or `pip install 'uwf[hermes]'`), then configure a model with `hermes setup`",
        "--agent",
        agent,
    )


# -- arguments and parsing (no Hermes run) -----------------------------------------------------


def test_arguments_before_thread_and_role_go_to_hermes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UWF_EDGE_PROMPT", "EDGE")
    parser = hermes_agent.make_parser()

    def split(argv: list[str]) -> tuple[list[str], tuple[str, str, str]]:
        given, target = parser.parse(argv)
        return hermes_agent.chat_options(parser, given), tuple(target)

    assert split(["T", "planner"]) == ([], ("T", "planner", "EDGE"))
    assert split(["-m", "m1", "--provider", "p", "--yolo", "T", "r"]) == (
        ["-m", "m1", "--provider", "p", "--yolo"],
        ("T", "r", "EDGE"),
    )
    assert split(["-m", "m1", "--thread", "T", "--role", "r", "--prompt", "go"]) == (
        ["-m", "m1"],
        ("T", "r", "go"),
    )
    argv = hermes_agent.chat_argv("hermes", "P", ["-m", "m1"], None)
    assert argv == ["hermes", "chat", "-Q", "-q", "P", "--source", "tool", "-m", "m1"]
    argv = hermes_agent.chat_argv("hermes", "P", [], "S1")
    assert argv[-3:] == ["--resume", "S1", "--no-restore-cwd"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["-q", "x", "T", "r"],
            "error: uwf-hermes sets -q itself; remove it from the agent's args",
        ),
        (["--resume=S", "T", "r"], "error: uwf-hermes sets --resume itself;"),
        (
            ["T"],
            "error: expected <thread-id> <role>; "
            "usage: uwf-hermes [hermes chat options…] <thread-id> <role>\n",
        ),
    ],
)
def test_usage_errors(cli_proc: Any, args: list[str], message: str) -> None:
    r = cli_proc(*args, prog="uwf-hermes")
    assert r.code == 2
    assert r.err.startswith(message), r.err
    assert r.out == ""


def test_session_id_line_and_the_slice_of_a_resumed_session() -> None:
    assert hermes_agent.parse_session_id("answer\n", "\nSession_ID: 2026_x\n") == "2026_x"
    assert hermes_agent.parse_session_id("no id here") is None
    # What a failure quotes: Hermes' words, without its session line, notices or colours.
    out = "  ⚠ tirith security scanner enabled but not available\n\x1b[2mHTTP 500: boom\x1b[0m\n"
    assert hermes_agent.failure_text(out, "\nsession_id: S\n") == "HTTP 500: boom"
    assert hermes_agent.failure_text(out, "Session not found: S\n") == "Session not found: S"
    session = {
        "id": "S",
        "model": "m",
        "started_at": 100.0,
        "ended_at": None,
        "messages": [
            {"role": "user", "content": "first visit", "timestamp": 100.0},
            {"role": "assistant", "content": "old answer", "timestamp": 101.0},
            {"role": "user", "content": "again", "timestamp": 200.5},
            {
                "role": "assistant",
                "content": None,
                "reasoning": "look first",
                "tool_calls": [{"function": {"name": "terminal", "arguments": {"cmd": "ls"}}}],
                "timestamp": 201.0,
            },
            {"role": "tool", "content": "a.py", "tool_name": "terminal", "timestamp": 201.5},
            {"role": "assistant", "content": "new answer", "timestamp": 202.75},
        ],
    }
    run = hermes_agent.run_of(session, launched=200.0, resumed=True)
    assert run.output == "new answer"
    assert [t["role"] for t in run.turns] == ["assistant", "tool", "assistant"]
    assert run.turns[0] == {
        "role": "assistant",
        "content": "",
        "toolCalls": [{"name": "terminal", "args": '{"cmd": "ls"}'}],
        "reasoning": "look first",
    }
    assert (run.start, run.end) == (200.5, 202.75)
    fresh = hermes_agent.run_of(session, launched=99.0, resumed=False)
    assert fresh.output == "new answer" and len(fresh.turns) == 4
    assert (fresh.start, fresh.end) == (100.0, 202.75)


# -- $SUSPEND, then thread resume (docs/format.md, "Suspending and resuming") ------------------


def test_hermes_suspends_the_step_and_a_person_resumes_it(cli_proc: Any, hermes: Hermes) -> None:
    """The model behind Hermes answers ``$status: $SUSPEND``: the thread waits (exit 6);
    ``thread resume -p`` runs Hermes again with the person's answer in its prompt."""
    v1.write_review(Path.cwd())
    hermes.server.reply(v1.SUSPEND, v1.PLAN)
    v1.suspend_and_resume(cli_proc, "uwf-hermes", timeout=STEP_TIMEOUT)
    first, again = (user_prompt(c) for c in hermes.chats())
    instruction = f"## Moderator Instruction\n\nPlan this task: {v1.TASK}"
    assert instruction in first and "## Resumed" not in first
    assert f"{instruction}\n\n{v1.RESUMED}" in again
    assert "answer instead with `$status: $SUSPEND`" in first
