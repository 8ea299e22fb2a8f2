"""The LLM extract fallback end to end: `uwf thread step` spawns a real `uwf-mock` whose output
has no frontmatter; the agent kit asks the local OpenAI-compatible server (tests/llm_server.py)
to turn it into the role's JSON, and the step records what came back.

Every failure of the fallback fails the step with one `error:` line from uwf (the agent's own
stderr comes through prefixed `uwf-mock: `), leaves the head where it was, and never shows
the API key anywhere.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_server import (
    DEFAULT_MODEL,
    EXTRACT_MODEL,
    TEST_KEY,
    TEST_KEY_ENV,
    LLMServer,
    closed_port_url,
    llm_fixture,  # noqa: F401
    write_config,
)
from rootfiles import step_state
from support import EXAMPLES, Result

RAW = "Here is my plan: refactor the login module, then add a regression test."
PLANNED = {"status": "_", "plan": "refactor login", "steps": ["refactor", "add a test"]}
AGENT_FAILED = "agent command failed (uwf-mock) with exit code 1: error: "


def planner_meta() -> Any:
    """The planner's ``meta`` schema, straight from the example workflow file."""
    workflow = yaml.safe_load((EXAMPLES / "solve-issue.yaml").read_text())
    return workflow["roles"]["planner"]["meta"]


def stored_schema(cli: Any, role: str) -> Any:
    """The role's schema node as `workflow put` stored it (the extract sends this one)."""
    roles = cli("workflow", "show", "solve-issue").json()["payload"]["roles"]
    node = cli("cas", "get", roles[role]["meta"])
    assert node.code == 0, node.err
    return node.json()["payload"]


def state_bytes(root: Path) -> Any:
    """Heads, waits and history: what a failed step leaves as it was (``step_state``)."""
    return step_state(root)


def no_key_in(*results: Result) -> None:
    for r in results:
        assert TEST_KEY not in r.out and TEST_KEY not in r.err


def no_key_stored(root: Path) -> None:
    """The key lives in .env only: not in the store, the state files or the debug log."""
    for path in root.rglob("*"):
        if path.is_file() and path.name != ".env":
            assert TEST_KEY.encode() not in path.read_bytes(), path


@pytest.fixture
def thread(new_thread: Any) -> str:
    return str(new_thread())


@pytest.fixture
def raw_agent(scenario: Any) -> str:
    """A uwf-mock whose planner forgets the frontmatter."""
    return str(scenario({"planner": [RAW]}, inprocess=False))


def step_fails(cli: Any, root: Path, thread: str, agent: str, message: str) -> Result:
    """Run one step; expect exit 5 (the agent failed), one `error:` line starting with
    ``message``, no change."""
    before = state_bytes(root)
    r = cli("thread", "step", thread, "--agent", agent)
    assert r.code == 5, (r.out, r.err)
    errors = [x for x in r.err.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1, r.err
    assert errors[0].startswith(f"error: {AGENT_FAILED}{message}"), errors[0]
    assert f"uwf-mock: error: {message}" in r.err  # the agent's own line, passed through
    assert "Traceback" not in r.err
    assert r.out == ""
    assert state_bytes(root) == before
    no_key_in(r)
    return r


def test_extract_fallback_through_the_cli(
    cli: Any, cli_proc: Any, root: Path, thread: str, raw_agent: str, llm: LLMServer
) -> None:
    write_config(root, llm.base_url)
    llm.reply(json.dumps(PLANNED))
    r = cli_proc("thread", "step", thread, "--agent", raw_agent)
    assert r.code == 0, r.err
    assert r.json()["role"] == "planner" and r.json()["done"] is False

    [req] = llm.requests
    assert (req.method, req.path) == ("POST", "/v1/chat/completions")
    assert req.headers["authorization"] == f"Bearer {TEST_KEY}"  # read from <root>/.env
    assert req.headers["content-type"].startswith("application/json")
    assert req.body["model"] == EXTRACT_MODEL  # models.extract wins over defaultModel
    assert req.body["response_format"] == {"type": "json_object"}
    assert not req.body.get("stream")
    assert [m["role"] for m in req.body["messages"]] == ["system", "user"]
    system = req.message("system")["content"]
    sent = json.loads(system[system.index("{") :])
    assert sent == stored_schema(cli, "planner")
    assert sent.items() >= planner_meta().items()  # the file's schema, plus what put added
    assert req.message("user")["content"] == RAW

    steps = cli("thread", "steps", thread).json()["steps"]
    assert [s.get("role") for s in steps] == [None, "planner"]
    assert steps[1]["output"] == PLANNED
    assert steps[1]["agent"] == "uwf-mock"
    # the raw output is still the step's content; the extracted JSON drives the routing
    read = cli_proc("thread", "read", thread, "--quota", "100000")
    assert read.code == 0 and RAW in read.out
    details = cli_proc("thread", "step-details", steps[1]["hash"])
    assert details.code == 0 and RAW in details.out
    dry = cli("thread", "step", thread, "--agent", raw_agent, "--dry-run").json()
    assert dry["role"] == "developer"
    assert "refactor login" in dry["prompt"] and "- add a test" in dry["prompt"]
    no_key_in(r, read, details)
    no_key_stored(root)


def test_fenced_json_reply(
    cli: Any, root: Path, thread: str, raw_agent: str, llm: LLMServer
) -> None:
    write_config(root, llm.base_url)
    llm.reply("```json\n" + json.dumps(PLANNED, indent=2) + "\n```")
    r = cli("thread", "step", thread, "--agent", raw_agent)
    assert r.code == 0, r.err
    assert cli("thread", "steps", thread).json()["steps"][1]["output"] == PLANNED


@pytest.mark.parametrize("change", ["drop-models-extract", "model-overrides-extract"])
def test_which_model_the_extract_uses(
    cli: Any, root: Path, thread: str, raw_agent: str, llm: LLMServer, change: str
) -> None:
    """models.extract > defaultModel, and modelOverrides.extract beats both."""
    path = write_config(root, llm.base_url)
    config = yaml.safe_load(path.read_text())
    if change == "drop-models-extract":
        del config["models"]["extract"]
    else:
        config["modelOverrides"] = {"extract": "default"}
    path.write_text(yaml.safe_dump(config))
    llm.reply(json.dumps(PLANNED))
    assert cli("thread", "step", thread, "--agent", raw_agent).code == 0
    assert llm.requests[0].body["model"] == DEFAULT_MODEL


def test_environment_key_wins_over_dotenv(
    cli: Any, root: Path, thread: str, raw_agent: str, llm: LLMServer, monkeypatch: Any
) -> None:
    write_config(root, llm.base_url)
    monkeypatch.setenv(TEST_KEY_ENV, "sk-from-environment")
    llm.reply(json.dumps(PLANNED))
    assert cli("thread", "step", thread, "--agent", raw_agent).code == 0
    assert llm.requests[0].headers["authorization"] == "Bearer sk-from-environment"


def test_valid_frontmatter_never_calls_the_model(
    cli: Any, root: Path, thread: str, scenario: Any, llm: LLMServer
) -> None:
    write_config(root, llm.base_url)
    r = cli("thread", "step", thread, "--agent", scenario(inprocess=False))
    assert r.code == 0, r.err
    assert llm.requests == []


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ({"status": 500, "body": "model overloaded"}, "LLM HTTP 500: model overloaded"),
        ({"raw": "not json"}, "LLM invalid JSON response: not json"),
        ({"raw": '{"choices": []}'}, "LLM response has no choices"),
        ("", "LLM message has no text content"),
        ("Sure! The plan is to refactor.", "failed to parse extracted JSON: "),
        (
            json.dumps({"status": "_", "plan": 42}),
            "extracted output failed JSON Schema validation",
        ),
        (json.dumps(["not", "an", "object"]), "extracted output failed JSON Schema validation"),
    ],
    ids=["http-500", "non-json", "no-choices", "empty", "prose", "schema", "array"],
)
def test_extract_failures(
    cli: Any,
    root: Path,
    thread: str,
    raw_agent: str,
    llm: LLMServer,
    reply: Any,
    message: str,
) -> None:
    write_config(root, llm.base_url)
    llm.reply(reply)
    step_fails(cli, root, thread, raw_agent, message)
    assert len(llm.requests) == 1  # no retries
    assert cli("thread", "steps", thread).json()["steps"][1:] == []


def test_connection_refused(cli: Any, root: Path, thread: str, raw_agent: str) -> None:
    url = closed_port_url()
    write_config(root, url)
    r = step_fails(cli, root, thread, raw_agent, "LLM network error: ")
    assert f"({url}/chat/completions)" in r.err


def test_missing_api_key(cli: Any, root: Path, thread: str, raw_agent: str, llm: LLMServer) -> None:
    write_config(root, llm.base_url, key=None)
    r = step_fails(cli, root, thread, raw_agent, f"missing API key env var: {TEST_KEY_ENV}")
    assert [x for x in r.err.splitlines() if x.startswith("error: ")] == [
        f"error: {AGENT_FAILED}missing API key env var: {TEST_KEY_ENV}"
    ]
    assert llm.requests == []


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0.5", "LLM request timed out after 0.5s: {url}/chat/completions "
                "($UWF_LLM_TIMEOUT sets the limit)"),
        ("soon", "$UWF_LLM_TIMEOUT must be a positive number of seconds, got: soon"),
    ],
    ids=["times-out", "not-a-number"],
)  # fmt: skip
def test_extract_timeout_from_the_environment(
    cli: Any,
    root: Path,
    thread: str,
    raw_agent: str,
    llm: LLMServer,
    monkeypatch: pytest.MonkeyPatch,
    value: str,
    message: str,
) -> None:
    """``$UWF_LLM_TIMEOUT`` bounds each LLM call of the agent (60 s for the extract without it);
    the message names the variable, never the key."""
    write_config(root, llm.base_url)
    monkeypatch.setenv("UWF_LLM_TIMEOUT", value)
    llm.reply({"delay": 10, "then": json.dumps(PLANNED)})
    began = time.monotonic()
    step_fails(cli, root, thread, raw_agent, message.format(url=llm.base_url))
    assert time.monotonic() - began < 8
    assert len(llm.requests) == (1 if value == "0.5" else 0)


def test_hung_model_is_bounded_by_the_step_timeout(
    cli: Any, root: Path, thread: str, raw_agent: str, llm: LLMServer
) -> None:
    write_config(root, llm.base_url)
    llm.reply({"delay": 30})
    before = state_bytes(root)
    began = time.monotonic()
    r = cli("thread", "step", thread, "--agent", raw_agent, "--timeout", "2")
    assert r.code == 5
    assert r.err.splitlines()[-1] == (
        "error: agent timed out after 2s (uwf-mock); its process group was killed"
    )
    assert time.monotonic() - began < 15
    assert len(llm.requests) == 1  # the agent did reach the model before it was killed
    assert state_bytes(root) == before
