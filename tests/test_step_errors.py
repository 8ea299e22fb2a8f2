"""Every way a step can fail: one clear line, non-zero exit, head and history untouched; the
thread records the failure (docs/format.md, "Thread state")."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from support import PLAN, store_state, wait_dead

pytestmark = pytest.mark.usefixtures("any_store")  # the filesystem and PostgreSQL

GHOST = "01ARZ3NDEKTSV4RRFFQ69G5FAV"  # a well-formed ULID that names no thread


def state_bytes(root: Path) -> Any:
    """The thread table and history, through the backend (the files, or PostgreSQL), without
    the threads' last failures (``fails`` checks those)."""
    active, history = store_state()
    return [r._replace(failure=None) for r in active], history


def failures() -> dict[str, Any]:
    """Thread -> its last failure as stored (None: none)."""
    return {r.thread: r.failure for r in store_state()[0]}


@pytest.fixture
def thread(new_thread: Any) -> str:
    return str(new_thread())


def fails(cli: Any, root: Path, args: list[str], message: str, code: int = 1) -> None:
    """Run ``uwf <args>``; expect exit ``code``, exactly ``error: <message>`` and no state
    change. ``thread step`` has codes of its own: 3 not active, 4 busy, 5 agent failed."""
    before, failed = state_bytes(root), failures()
    r = cli(*args)
    assert r.code == code, (r.out, r.err)
    lines = [x for x in r.err.splitlines() if x.startswith("error: ")]
    assert lines == [f"error: {message}"], r.err
    assert "Traceback" not in r.err
    assert state_bytes(root) == before
    now = failures()
    recorded = {t: f for t, f in now.items() if f != failed.get(t)}
    if args[:2] == ["thread", "step"] and code in (1, 5) and args[2] in now:
        assert [(f.error, f.code) for f in recorded.values()] == [(message, code)]
    else:
        assert recorded == {}  # not a failure of a thread: none recorded


@pytest.mark.parametrize(
    "command",
    [
        ["thread", "step"],
        ["thread", "show"],
        ["thread", "read"],
        ["thread", "kill"],
        ["thread", "steps"],
    ],
)
def test_unknown_and_malformed_thread_ids(cli: Any, root: Path, command: list[str]) -> None:
    fails(cli, root, [*command, GHOST], f"thread not found: {GHOST}")
    fails(
        cli,
        root,
        [*command, "not-a-thread"],
        'invalid thread id: "not-a-thread" (expected a 26-character ULID)',
    )


def test_fork_errors(cli: Any, root: Path, solve_issue: str) -> None:
    fails(cli, root, ["thread", "fork", "0123456789ABC"], "CAS node not found: 0123456789ABC")
    fails(
        cli,
        root,
        ["thread", "fork", solve_issue],
        f"node {solve_issue} is not a StartNode or StepNode",
    )
    fails(
        cli,
        root,
        ["thread", "fork", "../../etc"],
        'invalid hash: "../../etc" (expected 13 upper-case Crockford Base32 characters)',
    )


def test_step_killed_thread(cli: Any, root: Path, thread: str, scenario: Any) -> None:
    assert cli("thread", "kill", thread).code == 0
    fails(
        cli,
        root,
        ["thread", "step", thread, "--agent", scenario()],
        f"thread not active: {thread} (status: killed)",
        code=3,
    )
    fails(cli, root, ["thread", "kill", thread], f"thread not active: {thread} (status: killed)")


def test_unknown_workflow(cli: Any, root: Path) -> None:
    fails(cli, root, ["thread", "start", "nope", "-p", "x"], "workflow not found: nope")


@pytest.mark.parametrize("value", ["0", "x", "-3"])
def test_bad_quota(cli: Any, root: Path, thread: str, value: str) -> None:
    fails(
        cli,
        root,
        ["thread", "read", thread, "--quota", value],
        "invalid --quota: must be a positive integer",
    )


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "x"])
def test_bad_count(cli: Any, root: Path, thread: str, value: str) -> None:
    fails(
        cli,
        root,
        ["thread", "step", thread, "-c", value],
        f"--count must be a positive integer, got: {value}",
        code=2,  # a usage error
    )


def test_agent_not_on_path(cli: Any, root: Path, thread: str) -> None:
    fails(
        cli,
        root,
        ["thread", "step", thread, "--agent", "no-such-agent-xyz --flag"],
        "agent command not found: no-such-agent-xyz (is it installed and on PATH?)",
    )


def test_agent_exit_code_and_stderr_tail(
    cli: Any, root: Path, thread: str, agent_script: Any
) -> None:
    agent = agent_script(
        "print('noise', file=sys.stderr)\nprint('boom: disk on fire', "
        "file=sys.stderr)\nsys.exit(3)\n"
    )
    fails(
        cli,
        root,
        ["thread", "step", thread, "--agent", agent],
        f"agent command failed ({agent.split()[0]}) with exit code 3: noise boom: disk on fire",
        code=5,
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("pass\n", "agent stdout is not a valid CAS hash: (empty)"),
        ("print('hello world')\n", "agent stdout is not a valid CAS hash: hello world"),
        (
            "print('0123456789ABC')\n",
            "agent returned a hash that is not in the store: 0123456789ABC",
        ),
    ],
)
def test_agent_bad_stdout(
    cli: Any, root: Path, thread: str, agent_script: Any, body: str, message: str
) -> None:
    fails(cli, root, ["thread", "step", thread, "--agent", agent_script(body)], message, code=5)


def test_agent_returns_non_step_node(cli: Any, root: Path, thread: str, agent_script: Any) -> None:
    head = cli("thread", "show", thread).json()["head"]  # the StartNode
    fails(
        cli,
        root,
        ["thread", "step", thread, "--agent", agent_script(f"print('{head}')\n")],
        f"agent returned hash that is not a StepNode: {head}",
        code=5,
    )


def test_agent_returns_step_of_another_step(
    cli: Any, root: Path, new_thread: Any, scenario: Any, agent_script: Any
) -> None:
    first = new_thread()
    planner_step = cli("thread", "step", first, "--agent", scenario()).json()["head"]
    # same thread, next step: the planner's own StepNode has the wrong prev and role
    fails(
        cli,
        root,
        ["thread", "step", first, "--agent", agent_script(f"print('{planner_step}')")],
        f"agent returned StepNode {planner_step} for another step: prev is null, expected "
        f'{planner_step}; role is "planner", expected "developer"; depth is 1, expected 2',
        code=5,
    )
    # another thread: wrong start
    other = new_thread("another task")
    other_start = cli("thread", "show", other).json()["head"]
    first_start = cli("thread", "steps", first).json()["steps"][0]["hash"]
    fails(
        cli,
        root,
        ["thread", "step", other, "--agent", agent_script(f"print('{planner_step}')")],
        f"agent returned StepNode {planner_step} for another step: start is {first_start}, "
        f"expected {other_start}",
        code=5,
    )


def test_agent_timeout_kills_the_process_group(
    cli: Any, root: Path, thread: str, agent_script: Any, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    agent = agent_script(
        "import subprocess\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(30)\n"
    )
    began = time.monotonic()
    fails(
        cli,
        root,
        ["thread", "step", thread, "--agent", agent, "--timeout", "1"],
        f"agent timed out after 1s ({agent.split()[0]}); its process group was killed",
        code=5,
    )
    assert time.monotonic() - began < 10
    wait_dead(int(pidfile.read_text()), timeout=5)  # the agent's child died with the group


def test_output_without_frontmatter_and_no_model(
    cli: Any, root: Path, thread: str, scenario: Any
) -> None:
    agent = scenario({"planner": ["I made a plan but forgot the frontmatter."]}, inprocess=False)
    before = state_bytes(root)
    r = cli("thread", "step", thread, "--agent", agent)
    assert r.code == 5
    assert r.err.startswith("uwf-mock: error: agent output does not contain valid YAML")
    errors = [x for x in r.err.splitlines() if x.startswith("error: ")]
    assert len(errors) == 1
    assert errors[0].startswith(
        "error: agent command failed (uwf-mock) with exit code 1: "
        "error: agent output does not contain valid YAML frontmatter"
    )
    assert "Raw output (first 500 chars): I made a plan" in errors[0]
    assert state_bytes(root) == before


def test_output_failing_the_role_schema(cli: Any, root: Path, thread: str, scenario: Any) -> None:
    agent = scenario({"planner": ["---\nstatus: _\nplan: 42\n---\nwrong type, no steps"]})
    before = state_bytes(root)
    r = cli("thread", "step", thread, "--agent", agent)
    assert r.code == 5
    assert (
        "error: agent output does not satisfy the role schema (plan: expected a string, got "
        "an integer; steps: missing (expected a list of strings)), and no extract model is "
        "configured" in r.err
    )
    assert state_bytes(root) == before


def test_status_missing_from_graph_leaves_head(
    cli: Any, root: Path, thread: str, scenario: Any
) -> None:
    """A role emitting a status its schema allows but the graph lacks cannot happen after
    `workflow put`'s checks; an agent bypassing them (a custom StepNode) is refused."""
    agent = scenario({"planner": [PLAN]})
    assert cli("thread", "step", thread, "--agent", agent).code == 0
    show = cli("thread", "show", thread).json()
    assert show["steps"] == 1


def test_invalid_config(cli: Any, root: Path, thread: str) -> None:
    (root / "config.yaml").write_text("agents: [not, a, mapping]\n")
    r = cli("thread", "step", thread)
    assert r.code == 1 and r.err_line.startswith("error: invalid config.yaml: ")
    (root / "config.yaml").write_text("agents:\n  mock: {command: uwf-mock}\ndefaultAgent: ghost\n")
    fails(cli, root, ["thread", "step", thread], "unknown agent alias in config: ghost")


def test_no_agent_configured(cli: Any, root: Path, thread: str) -> None:
    fails(
        cli,
        root,
        ["thread", "step", thread],
        "no agent configured: pass --agent or set defaultAgent in config.yaml",
    )


def test_dry_run_runs_nothing(cli: Any, root: Path, thread: str, scenario: Any) -> None:
    agent = scenario()
    before = state_bytes(root)
    r = cli("thread", "step", thread, "--agent", agent, "--dry-run")
    assert r.code == 0, r.err
    out = r.json()
    assert out["role"] == "planner" and out["dryRun"] is True
    assert out["prompt"] == "Plan the work for the task above."
    assert out["agent"] == [*agent.split(), thread, "planner"]
    assert state_bytes(root) == before
