"""Step options and agent plumbing: max rounds, the agent's environment, timeouts from
config, per-role overrides, uwf-mock entry forms and the v0.5.0 argument form."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from support import APPROVE, DEV, PLAN, REJECT


def run_to_end(cli: Any, thread: str, agent: str | None = None) -> list[dict[str, Any]]:
    args = ["thread", "step", thread, "-c", "20"] + (["--agent", agent] if agent else [])
    r = cli(*args)
    assert r.code == 0, r.err
    return r.jsonl()


def test_max_rounds_from_thread_start(
    cli: Any, root: Path, solve_issue: str, scenario: Any
) -> None:
    always_reject = scenario({"planner": [PLAN], "developer": [DEV], "reviewer": [REJECT]})
    thread = cli("thread", "start", "solve-issue", "-p", "t", "--max-rounds", "4").json()["thread"]
    results = run_to_end(cli, thread, always_reject)
    assert [r["role"] for r in results] == ["planner", "developer", "reviewer", "developer"]
    assert results[-1]["done"] is True and results[-1]["status"] == "max_rounds"
    history = [json.loads(x) for x in (root / "history.jsonl").read_text().splitlines()]
    assert [(h["thread"], h["status"]) for h in history] == [(thread, "max_rounds")]
    assert cli("thread", "show", thread).json()["status"] == "max_rounds"


def test_max_rounds_from_config(cli: Any, root: Path, new_thread: Any, scenario: Any) -> None:
    agent = scenario({"planner": [PLAN], "developer": [DEV], "reviewer": [REJECT]})
    (root / "config.yaml").write_text(
        f"agents:\n  m: {{command: {agent.split()[0]}, args: "
        f"['--scenario', '{agent.split()[2]}']}}\n"
        "defaultAgent: m\nmaxRounds: 2\n"
    )
    thread = new_thread()
    results = run_to_end(cli, thread)
    assert [r["role"] for r in results] == ["planner", "developer"]
    assert results[-1]["status"] == "max_rounds"


def test_bad_max_rounds(cli: Any, solve_issue: str) -> None:
    r = cli("thread", "start", "solve-issue", "-p", "t", "--max-rounds", "0")
    assert (r.code, r.err) == (1, "error: --max-rounds must be a positive integer, got: 0\n")


def test_agent_environment_and_dotenv(
    cli: Any, root: Path, new_thread: Any, agent_script: Any, scenario: Any, tmp_path: Path
) -> None:
    seen = tmp_path / "env.json"
    mock = scenario(inprocess=False).split()
    agent = agent_script(
        "import json\n"
        f"json.dump({{k: os.environ.get(k) for k in ['UWF_EDGE_PROMPT', 'WORKFLOW_STORAGE_ROOT',"
        f" 'FROM_DOTENV', 'ALREADY_SET']}} | {{'argv': sys.argv[1:], 'stdin': sys.stdin.read()}},"
        f" open({str(seen)!r}, 'w'))\n"
        f"os.execvp({mock[0]!r}, {mock!r} + sys.argv[1:])\n"
    )
    root.mkdir(exist_ok=True)
    (root / ".env").write_text("FROM_DOTENV=dotenv-value\nALREADY_SET=from-dotenv\n")
    os.environ["ALREADY_SET"] = "from-environment"
    try:
        thread = new_thread()
        assert cli("thread", "step", thread, "--agent", agent).code == 0
    finally:
        del os.environ["ALREADY_SET"]
    env = json.loads(seen.read_text())
    assert env == {
        "UWF_EDGE_PROMPT": "Plan the work for the task above.",
        "WORKFLOW_STORAGE_ROOT": str(root),
        "FROM_DOTENV": "dotenv-value",
        "ALREADY_SET": "from-environment",  # .env never overrides the environment
        "argv": [thread, "planner"],
        "stdin": "",  # stdin is closed
    }


def test_agent_timeout_from_config(
    cli: Any, root: Path, new_thread: Any, agent_script: Any
) -> None:
    agent = agent_script("time.sleep(30)\n")
    exe, script = agent.split()
    (root / "config.yaml").write_text(
        f"agents:\n  slow: {{command: {exe}, args: ['{script}']}}\n"
        "defaultAgent: slow\nagentTimeout: 1\n"
    )
    thread = new_thread()
    r = cli("thread", "step", thread)
    assert r.code == 5
    assert r.err_line == f"error: agent timed out after 1s ({exe}); its process group was killed"


def test_agent_overrides_per_role(
    cli: Any, root: Path, new_thread: Any, scenario: Any, agent_script: Any, tmp_path: Path
) -> None:
    mock = scenario(inprocess=False).split()
    marker = tmp_path / "reviewer-agent-ran"
    special = agent_script(
        f"open({str(marker)!r}, 'a').write(sys.argv[-1] + '\\n')\n"
        f"os.execvp({mock[0]!r}, {mock!r} + sys.argv[1:])\n"
    ).split()
    (root / "config.yaml").write_text(
        f"agents:\n  mock: {{command: {mock[0]}, args: ['--scenario', '{mock[2]}']}}\n"
        f"  special: {{command: {special[0]}, args: ['{special[1]}']}}\n"
        "defaultAgent: mock\nagentOverrides:\n  solve-issue: {reviewer: special}\n"
    )
    thread = new_thread()
    results = run_to_end(cli, thread)
    assert results[-1]["done"] is True
    assert marker.read_text().splitlines() == ["reviewer", "reviewer"]


def test_mock_entry_with_exit_and_stderr(cli: Any, new_thread: Any, scenario: Any) -> None:
    agent = scenario(
        {"planner": [{"output": "", "exit": 4, "stderr": "simulated crash"}]}, inprocess=False
    )
    thread = new_thread()
    r = cli("thread", "step", thread, "--agent", agent)
    assert r.code == 5
    assert "uwf-mock: simulated crash" in r.err  # passed through live, prefixed
    assert r.err.splitlines()[-1] == (
        "error: agent command failed (uwf-mock) with exit code 4: simulated crash"
    )


def test_mock_visits_use_entries_in_order_and_repeat_the_last(
    cli: Any, new_thread: Any, scenario: Any
) -> None:
    agent = scenario({"planner": [PLAN], "developer": [DEV], "reviewer": [REJECT, REJECT, APPROVE]})
    thread = new_thread()
    results = run_to_end(cli, thread, agent)
    assert [r["role"] for r in results] == [
        "planner",
        "developer",
        "reviewer",
        "developer",
        "reviewer",
        "developer",
        "reviewer",
    ]


def test_agent_kit_accepts_the_named_argument_form(
    cli_proc: Any, cli: Any, new_thread: Any, scenario: Any
) -> None:
    thread = new_thread()
    mock = scenario().split()
    r = cli_proc(
        *mock[1:], "--thread", thread, "--role", "planner", "--prompt", "edge text", prog="uwf-mock"
    )
    assert r.code == 0, r.err
    step_hash = r.out.strip()
    node = cli("cas", "get", step_hash).json()["payload"]
    assert node["role"] == "planner" and node["edgePrompt"] == "edge text"
    assert node["prev"] is None and node["depth"] == 1
    bad = cli_proc(*mock[1:], "--thread", thread, prog="uwf-mock")
    assert (bad.code, bad.err) == (
        2,
        "error: v0.5.0's form is --thread <id> --role <role> [--prompt <text>]; "
        "usage: uwf-mock [options] <thread-id> <role>\n",
    )


def test_mock_without_scenario(cli_proc: Any) -> None:
    r = cli_proc("01ARZ3NDEKTSV4RRFFQ69G5FAV", "planner", prog="uwf-mock")
    assert (r.code, r.err) == (
        2,
        "error: uwf-mock needs --scenario FILE or $UWF_MOCK_SCENARIO; "
        "usage: uwf-mock [options] <thread-id> <role>\n",
    )


def test_mock_attempts_fail_then_succeed(
    cli: Any, cli_proc: Any, root: Path, new_thread: Any, scenario: Any
) -> None:
    """An ``attempts`` entry scripts the runs of one visit: a failed run leaves the thread
    where it was, and the next run of the same visit takes the next attempt."""
    limited = {"exit": 1, "stderr": "error: rate limited"}
    agent = scenario(
        {
            "planner": [{"attempts": [limited, PLAN]}],
            "developer": [DEV],
            "reviewer": [{"attempts": [limited, REJECT]}, APPROVE],
        },
        inprocess=False,
    )
    thread = new_thread()

    def step(*more: str) -> Any:
        return cli_proc("thread", "step", thread, "--agent", agent, *more)

    failed = step()
    assert failed.code == 5  # the agent failed: a loop retries
    assert failed.err.splitlines()[-1] == (
        "error: agent command failed (uwf-mock) with exit code 1: error: rate limited"
    )
    assert [step().json()["role"] for _ in range(2)] == ["planner", "developer"]
    assert step().code == 5  # the reviewer's first visit, first attempt
    rest = step("-c", "10")
    assert rest.code == 0, rest.err
    assert [r["role"] for r in rest.jsonl()] == ["reviewer", "developer", "reviewer"]
    assert rest.jsonl()[-1]["done"] is True
    steps = cli("thread", "steps", thread).json()["steps"][1:]
    assert [(s["role"], s["output"]["status"]) for s in steps] == [
        ("planner", "_"),
        ("developer", "_"),
        ("reviewer", "rejected"),  # its second attempt
        ("developer", "_"),
        ("reviewer", "approved"),  # a second visit: the next entry
    ]
    details = [cli("thread", "step-details", s["hash"], "--format", "json").json() for s in steps]
    assert [(d["visit"], d.get("attempt")) for d in details] == [
        (1, 2),
        (1, None),
        (1, 2),
        (2, None),
        (2, None),
    ]
    counts = json.loads((root / "cache" / "mock-attempts.json").read_text())
    assert counts == {f"{thread}:planner:1": 2, f"{thread}:reviewer:1": 2}


def test_mock_attempts_must_be_a_list(cli: Any, new_thread: Any, scenario: Any) -> None:
    agent = scenario({"planner": [{"attempts": [], "output": PLAN}]}, inprocess=False)
    r = cli("thread", "step", new_thread(), "--agent", agent)
    assert r.code == 5
    path = agent.split()[-1]
    assert r.err.splitlines()[-1] == (
        "error: agent command failed (uwf-mock) with exit code 1: error: scenario "
        f"{path}: role planner: 'attempts' must be a non-empty list of entries, alone in its "
        "mapping"
    )


def test_mock_help(cli_proc: Any) -> None:
    r = cli_proc("--help", prog="uwf-mock")
    assert (r.code, r.err) == (0, "")
    assert r.out.startswith("usage: uwf-mock [options] <thread-id> <role>\n")
    assert "--scenario FILE" in r.out
    assert "attempts:" in r.out and "mock-attempts.json" in r.out
