"""`uwf-cmd` end to end: `uwf thread step --agent "uwf-cmd -- <command…>"` spawns the real
`uwf-cmd`, which runs small scripts written here. The scripts record what they were given
(stdin, argv, environment) so the tests can check the prompt contract (docs/agents.md,
"`uwf-cmd`: any command-line agent, no code"; docs/format.md, "The agent protocol"), then
print the role's frontmatter (or, on purpose, none)."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import version1 as v1
from llm_server import (
    TEST_KEY,
    LLMServer,
    llm_fixture,  # noqa: F401
    write_config,
)
from rootfiles import step_state
from support import DEV, EXAMPLES, PLAN, Result, wait_dead
from uwf.agent_kit.prompts import CORRECTION_MESSAGE

TASK = "Fix the login bug"
ENV_KEYS = ("UWF_THREAD", "UWF_ROLE", "UWF_EDGE_PROMPT", "WORKFLOW_STORAGE_ROOT")
NO_FRONTMATTER = "I did the work but forgot the frontmatter."

RECORDER = """\
import json, os, sys, time
LOG, OUTPUTS, CORRECTED, SLEEP = {log!r}, {outputs!r}, {corrected!r}, {sleep!r}
given = sys.stdin.read()
record = {{
    "argv": sys.argv[1:],
    "stdin": given,
    "env": {{k: os.environ.get(k) for k in {keys!r}}},
}}
with open(LOG, "a") as f:
    f.write(json.dumps(record) + "\\n")
time.sleep(SLEEP)
role = os.environ["UWF_ROLE"]
sys.stderr.write("working on " + role + "\\n")
seen = given + " ".join(sys.argv[1:])
corrected = {marker!r} in seen
print(CORRECTED[role] if corrected and role in CORRECTED else OUTPUTS[role])
"""


def workflow_file() -> Any:
    return yaml.safe_load((EXAMPLES / "solve-issue.yaml").read_text())


def state_bytes(root: Path) -> Any:
    """Heads, waits and history: what a failed step leaves as it was (``step_state``)."""
    return step_state(root)


class Recorder:
    """A Python command for uwf-cmd that logs each call (one JSON line) and answers per role."""

    def __init__(
        self,
        tmp_path: Path,
        outputs: dict[str, str],
        corrected: dict[str, str] | None = None,
        sleep: float = 0.0,
    ) -> None:
        self.log = tmp_path / "calls.jsonl"
        self.script = tmp_path / "recorder.py"
        self.script.write_text(
            RECORDER.format(
                log=str(self.log),
                outputs=outputs,
                corrected=corrected or {},
                sleep=sleep,
                keys=ENV_KEYS,
                marker=CORRECTION_MESSAGE.splitlines()[0],
            )
        )

    def command(self, *args: str) -> list[str]:
        return [sys.executable, str(self.script), *args]

    def agent(self, *args: str) -> str:
        """The ``--agent`` command line: ``uwf-cmd -- python recorder.py <args…>``."""
        return shlex.join(["uwf-cmd", "--", *self.command(*args)])

    def calls(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


@pytest.fixture
def thread(new_thread: Any) -> str:
    return str(new_thread(TASK))


def step_ok(cli: Any, thread: str, agent: str) -> dict[str, Any]:
    r = cli("thread", "step", thread, "--agent", agent)
    assert r.code == 0, r.err
    return dict(r.json())


def step_fails(
    cli: Any, root: Path, thread: str, agent: str, message: str, extra: tuple[str, ...] = ()
) -> Result:
    """One step that must fail with exactly ``error: <message>`` and change nothing."""
    before = state_bytes(root)
    r = cli("thread", "step", thread, "--agent", agent, *extra)
    assert r.code == 5, (r.out, r.err)
    assert [x for x in r.err.splitlines() if x.startswith("error: ")] == [f"error: {message}"]
    assert "Traceback" not in r.err and r.out == ""
    assert state_bytes(root) == before
    assert cli("thread", "steps", thread).json()["steps"][1:] == []
    return r


# -- (a) prompt on stdin, environment --------------------------------------------------------


def test_prompt_goes_to_stdin_with_environment(
    cli: Any, root: Path, thread: str, tmp_path: Path
) -> None:
    rec = Recorder(tmp_path, {"planner": PLAN, "developer": DEV})
    out = step_ok(cli, thread, rec.agent())
    assert out["role"] == "planner"
    [call] = rec.calls()
    planner = workflow_file()["roles"]["planner"]
    edge = workflow_file()["graph"]["$START"]["_"]["prompt"]
    prompt = call["stdin"]
    assert prompt.startswith("## Deliverable Format\n")  # the format comes first
    assert f"## Goal\n\n{planner['goal']}" in prompt
    assert f"## Task\n{TASK}" in prompt
    assert prompt.rstrip().endswith(edge)
    assert prompt.index("## Deliverable Format") < prompt.index("## Task") < prompt.index(edge)
    assert call["argv"] == []  # uwf-cmd keeps <thread-id> <role> for itself
    assert call["env"] == {
        "UWF_THREAD": thread,
        "UWF_ROLE": "planner",
        "UWF_EDGE_PROMPT": edge,
        "WORKFLOW_STORAGE_ROOT": str(root),
    }
    steps = cli("thread", "steps", thread).json()["steps"]
    assert steps[1]["agent"] == "uwf-cmd"
    assert steps[1]["output"] == {"status": "_", "plan": "do it", "steps": ["one", "two"]}

    # the second role sees the history and the edge prompt rendered from the planner's output
    assert step_ok(cli, thread, rec.agent())["role"] == "developer"
    second = rec.calls()[1]
    assert second["env"]["UWF_ROLE"] == "developer"
    assert (
        second["env"]["UWF_EDGE_PROMPT"] == "Implement this plan:\ndo it\n\nSteps:\n- one\n- two\n"
    )
    assert "### Step 1: planner" in second["stdin"]
    assert second["stdin"].rstrip().endswith("- two")


# -- (b) placeholders ------------------------------------------------------------------------


def test_placeholders_in_arguments(cli: Any, thread: str, tmp_path: Path) -> None:
    rec = Recorder(tmp_path, {"planner": PLAN})
    agent = rec.agent("--prompt", "{prompt}", "--who={thread}/{role}", "{role}")
    step_ok(cli, thread, agent)
    [call] = rec.calls()
    assert call["stdin"] == ""  # the prompt went into the argument instead
    flag, prompt, who, role = call["argv"]
    assert flag == "--prompt"
    assert prompt.startswith("## Deliverable Format\n") and f"## Task\n{TASK}" in prompt
    assert who == f"--who={thread}/planner"
    assert role == "planner"


# -- (c) the detail --------------------------------------------------------------------------


def test_step_details(cli: Any, cli_proc: Any, thread: str, tmp_path: Path) -> None:
    rec = Recorder(tmp_path, {"planner": PLAN}, sleep=0.3)
    step_ok(cli, thread, rec.agent("{role}"))
    head = cli("thread", "show", thread).json()["head"]
    r = cli_proc("thread", "step-details", head, "--format", "json")
    assert r.code == 0, r.err
    detail = r.json()
    assert detail["command"] == rec.command("planner")  # as run: placeholders expanded
    assert detail["exitCode"] == 0
    assert isinstance(detail["durationMs"], int) and 300 <= detail["durationMs"] < 30_000
    assert detail["stderr"] == "working on planner\n"
    assert detail["turns"] == [{"index": 0, "role": "assistant", "content": PLAN + "\n"}]
    assert set(detail) == {"command", "exitCode", "durationMs", "stderr", "total", "turns"}
    assert detail["total"]["durationMs"] == detail["durationMs"]  # the first step's cost
    assert detail["total"]["calls"] == 0  # no model call: the command answered with frontmatter


# -- (d) corrections -------------------------------------------------------------------------


@pytest.mark.parametrize("via", ["stdin", "argument"])
def test_one_correction_then_success(cli: Any, thread: str, tmp_path: Path, via: str) -> None:
    rec = Recorder(tmp_path, {"planner": NO_FRONTMATTER}, corrected={"planner": PLAN})
    agent = rec.agent() if via == "stdin" else rec.agent("{prompt}")
    step_ok(cli, thread, agent)
    first, second = rec.calls()  # exactly one correction
    given = [c["stdin"] if via == "stdin" else c["argv"][0] for c in (first, second)]
    assert given[1] == f"{given[0]}\n\n{CORRECTION_MESSAGE}"
    assert second["env"]["UWF_ROLE"] == "planner"
    step = cli("thread", "steps", thread).json()["steps"][1]
    assert step["output"] == {"status": "_", "plan": "do it", "steps": ["one", "two"]}
    # the detail keeps both runs and the correction between them
    detail = cli("thread", "step-details", step["hash"], "--format", "json").json()
    assert [(t["role"], t["content"].strip()) for t in detail["turns"]] == [
        ("assistant", NO_FRONTMATTER.strip()),
        ("user", CORRECTION_MESSAGE.strip()),
        ("assistant", PLAN.strip()),
    ]


BAD_PLAN = "---\nstatus: _\nplan: no\nsteps:\n  - one\n---\nThe plan."
PLAN_REJECTED = "plan: expected a string, got a boolean"


def test_a_rejected_field_is_named_in_the_correction_and_the_detail(
    cli: Any, thread: str, tmp_path: Path
) -> None:
    rec = Recorder(tmp_path, {"planner": BAD_PLAN}, corrected={"planner": PLAN})
    step_ok(cli, thread, rec.agent())
    first, second = rec.calls()
    first_line, rest = CORRECTION_MESSAGE.split("\n", 1)
    correction = f"{first_line}\nWhat was wrong:\n- {PLAN_REJECTED}\n{rest}"
    assert second["stdin"] == f"{first['stdin']}\n\n{correction}"
    step = cli("thread", "steps", thread).json()["steps"][1]
    detail = cli("thread", "step-details", step["hash"], "--format", "json").json()
    assert [(t["role"], t["content"].strip()) for t in detail["turns"]] == [
        ("assistant", BAD_PLAN.strip()),
        ("user", correction.strip()),
        ("assistant", PLAN.strip()),
    ]


def test_a_field_still_rejected_after_two_corrections_is_named_in_the_error(
    cli: Any, root: Path, thread: str, tmp_path: Path
) -> None:
    rec = Recorder(tmp_path, {"planner": BAD_PLAN})
    r = cli("thread", "step", thread, "--agent", rec.agent())
    assert r.code == 5
    assert len(rec.calls()) == 3
    [error] = [x for x in r.err.splitlines() if x.startswith("error: ")]
    assert error.startswith(
        "error: agent command failed (uwf-cmd) with exit code 1: error: agent output does not "
        f"satisfy the role schema ({PLAN_REJECTED}), and no extract model is configured"
    )


def test_no_frontmatter_after_two_corrections_and_no_model(
    cli: Any, root: Path, thread: str, tmp_path: Path
) -> None:
    rec = Recorder(tmp_path, {"planner": NO_FRONTMATTER})
    before = state_bytes(root)
    r = cli("thread", "step", thread, "--agent", rec.agent())
    assert r.code == 5
    assert len(rec.calls()) == 3  # the run and two corrections
    [error] = [x for x in r.err.splitlines() if x.startswith("error: ")]
    assert error.startswith("error: agent command failed (uwf-cmd) with exit code 1: ")
    assert "no extract model is configured" in error
    assert error.endswith(f"Raw output (first 500 chars): {NO_FRONTMATTER}")
    assert state_bytes(root) == before


# -- (e) failures ----------------------------------------------------------------------------


def test_command_not_found(cli: Any, root: Path, thread: str) -> None:
    r = step_fails(
        cli,
        root,
        thread,
        "uwf-cmd -- no-such-command-xyz --flag",
        "agent command failed (uwf-cmd) with exit code 1: "
        "error: command not found: no-such-command-xyz",
    )
    assert "uwf-cmd: error: command not found: no-such-command-xyz\n" in r.err


def test_command_exit_code_and_stderr_tail(
    cli: Any, root: Path, thread: str, tmp_path: Path
) -> None:
    script = tmp_path / "fail.py"
    script.write_text(
        "import sys\nprint('partial output')\nprint('noise', file=sys.stderr)\n"
        "print('boom: disk on fire', file=sys.stderr)\nsys.exit(3)\n"
    )
    step_fails(
        cli,
        root,
        thread,
        shlex.join(["uwf-cmd", "--", sys.executable, str(script)]),
        "agent command failed (uwf-cmd) with exit code 1: "
        f"error: command failed ({sys.executable}) with exit code 3: noise boom: disk on fire",
    )


def test_an_answer_over_the_limit_fails_the_step(
    cli: Any, root: Path, thread: str, tmp_path: Path
) -> None:
    """A command's stdout is read up to ``MAX_ANSWER`` bytes: more fails the step (both forms
    of uwf-cmd; in uwf's process it would otherwise grow uwf's own memory)."""
    from uwf.agents.cmd import MAX_ANSWER

    script = tmp_path / "flood.py"
    script.write_text(f"import sys\nsys.stdout.write('---\\n' + 'x' * {MAX_ANSWER})\n")
    command = ["--", sys.executable, str(script)]
    message = (
        f"command printed more than {MAX_ANSWER} bytes, the most an answer may have "
        f"({sys.executable})"
    )
    step_fails(
        cli,
        root,
        thread,
        shlex.join(["uwf-cmd", *command]),
        f"agent command failed (uwf-cmd) with exit code 1: error: the {message}",
    )
    step_fails(
        cli,
        root,
        thread,
        shlex.join(["python:uwf-cmd", *command]),
        f"Python agent failed (python:uwf-cmd) with exit code 1: error: the {message}",
    )


def test_command_killed_by_step_timeout(cli: Any, root: Path, thread: str, tmp_path: Path) -> None:
    pidfile = tmp_path / "command.pid"
    script = tmp_path / "slow.py"
    script.write_text(
        f"import os, time\nopen({str(pidfile)!r}, 'w').write(str(os.getpid()))\ntime.sleep(30)\n"
    )
    began = time.monotonic()
    step_fails(
        cli,
        root,
        thread,
        shlex.join(["uwf-cmd", "--", sys.executable, str(script)]),
        "agent timed out after 1s (uwf-cmd); its process group was killed",
        extra=("--timeout", "1"),
    )
    assert time.monotonic() - began < 10
    wait_dead(int(pidfile.read_text()), timeout=5)  # died with uwf-cmd's process group


def test_usage_without_command(cli: Any, root: Path, thread: str) -> None:
    step_fails(
        cli,
        root,
        thread,
        "uwf-cmd --",
        "agent command failed (uwf-cmd) with exit code 2: error: no command to run; "
        "usage: uwf-cmd -- <command> [args…] <thread-id> <role>",
    )


def test_error_line_says_what_failed_after_long_output(
    cli: Any, root: Path, thread: str, tmp_path: Path
) -> None:
    rec = Recorder(tmp_path, {"planner": "I did the work and wrote a long report. " * 20})
    r = cli("thread", "step", thread, "--agent", rec.agent())
    assert r.code == 5
    [error] = [x for x in r.err.splitlines() if x.startswith("error: ")]
    assert error.startswith("error: agent command failed (uwf-cmd) with exit code 1: ")
    assert "does not contain valid YAML frontmatter" in error


def test_error_line_keeps_the_exit_code_of_a_noisy_command(
    cli: Any, root: Path, thread: str, tmp_path: Path
) -> None:
    script = tmp_path / "noisy.py"
    script.write_text("import sys\nsys.stderr.write('trace line\\n' * 100)\nsys.exit(3)\n")
    r = cli(
        "thread",
        "step",
        thread,
        "--agent",
        shlex.join(["uwf-cmd", "--", sys.executable, str(script)]),
    )
    assert r.code == 5
    [error] = [x for x in r.err.splitlines() if x.startswith("error: ")]
    assert f"command failed ({sys.executable}) with exit code 3" in error


# -- (f) a whole thread, one shell script for every role, one role through the LLM extract ---

SHELL_AGENT = """\
#!/bin/sh
# One agent for every role of solve-issue. The developer never writes frontmatter.
prompt=$(cat)
echo "$UWF_ROLE" >> "{calls}"
n=$(grep -c "^$UWF_ROLE\\$" "{calls}")
case "$UWF_ROLE" in
  planner)
    printf '%s\\n' '---' 'status: _' 'plan: do it' 'steps:' '  - one' '---' 'The plan.' ;;
  developer)
    echo "I changed a.py (attempt $n)." ;;
  reviewer)
    if [ "$n" -eq 1 ]; then
      printf '%s\\n' '---' 'status: rejected' 'comments: add tests' '---'
    else
      printf '%s\\n' '---' 'status: approved' 'comments: looks good' '---'
    fi ;;
esac
"""


def test_solve_issue_to_end_with_llm_extract(
    cli: Any, cli_proc: Any, root: Path, thread: str, tmp_path: Path, llm: LLMServer
) -> None:
    calls = tmp_path / "shell-calls"
    script = tmp_path / "agent.sh"
    script.write_text(SHELL_AGENT.format(calls=calls))
    write_config(
        root, llm.base_url, {"cmd": {"command": "uwf-cmd", "args": ["--", "sh", str(script)]}}
    )
    first = {"status": "_", "filesChanged": ["a.py"], "summary": "first try"}
    second = {"status": "_", "filesChanged": ["a.py", "test_a.py"], "summary": "with tests"}
    llm.reply(json.dumps(first), json.dumps(second))

    r = cli_proc("thread", "step", thread, "-c", "20")  # defaultAgent from config.yaml
    assert r.code == 0, r.err
    results = r.jsonl()
    assert [x["role"] for x in results] == [
        "planner",
        "developer",
        "reviewer",
        "developer",
        "reviewer",
    ]
    assert results[-1]["done"] is True
    # every developer visit: the run, two corrections, then the extract on the last output
    assert calls.read_text().split() == [
        "planner",
        *["developer"] * 3,
        "reviewer",
        *["developer"] * 3,
        "reviewer",
    ]
    assert [q.message("user")["content"] for q in llm.chat_requests()] == [
        "I changed a.py (attempt 3).\n",
        "I changed a.py (attempt 6).\n",
    ]
    assert all(q.headers["authorization"] == f"Bearer {TEST_KEY}" for q in llm.requests)
    assert llm.pending == 0

    steps = cli("thread", "steps", thread).json()["steps"]
    assert [s.get("output") for s in steps[1:]] == [
        {"status": "_", "plan": "do it", "steps": ["one"]},
        first,
        {"status": "rejected", "comments": "add tests"},
        second,
        {"status": "approved", "comments": "looks good"},
    ]
    assert {s["agent"] for s in steps[1:]} == {"uwf-cmd"}
    # the extracted output drove the next edge prompt
    reviewer_step = cli("cas", "get", steps[5]["hash"]).json()["payload"]
    assert "Summary: with tests" in reviewer_step["edgePrompt"]
    history = [json.loads(x) for x in (root / "history.jsonl").read_text().splitlines()]
    assert [(h["thread"], h["status"]) for h in history] == [(thread, "completed")]
    assert cli("cas", "verify").code == 0
    assert TEST_KEY not in r.out + r.err
    for path in root.rglob("*"):
        if path.is_file() and path.name != ".env":
            assert TEST_KEY.encode() not in path.read_bytes(), path


# -- (g) the command line and live stderr ---------------------------------------------------------


@pytest.mark.parametrize("prog", ["uwf-cmd", "uwf-mock", "uwf-builtin", "uwf-hermes"])
def test_every_agent_has_help(cli_proc: Any, prog: str) -> None:
    for flag in ("--help", "-h"):
        r = cli_proc(flag, prog=prog)
        assert (r.code, r.err) == (0, ""), r.err
        assert r.out.startswith(f"usage: {prog} ") and "<thread-id> <role>" in r.out
        assert "--help" in r.out


@pytest.mark.parametrize("prog", ["uwf-builtin", "uwf-human"])
def test_missing_arguments_are_a_usage_error_naming_the_agent(cli_proc: Any, prog: str) -> None:
    head = " [options]" if prog == "uwf-builtin" else ""  # uwf-human has no options
    usage = f"usage: {prog}{head} <thread-id> <role>\n"
    for args in ([], ["01ARZ3NDEKTSV4RRFFQ69G5FAV"]):
        r = cli_proc(*args, prog=prog)
        assert (r.code, r.out, r.err) == (2, "", f"error: expected <thread-id> <role>; {usage}")
    named = cli_proc("--thread", "01ARZ3NDEKTSV4RRFFQ69G5FAV", prog=prog)
    assert (named.code, named.err) == (
        2,
        f"error: v0.5.0's form is --thread <id> --role <role> [--prompt <text>]; {usage}",
    )


def test_help_describes_the_command(cli_proc: Any) -> None:
    out = cli_proc("--help", prog="uwf-cmd").out
    for word in ("{prompt}", "{thread}", "{role}", "$UWF_THREAD", "stdin", "stderr"):
        assert word in out, word


LIVE = """\
import os, sys, time
sys.stderr.write("first line\\n"); sys.stderr.flush()
deadline = time.monotonic() + 30
while not os.path.exists({release!r}) and time.monotonic() < deadline:
    time.sleep(0.02)
sys.stderr.write("released\\n" if os.path.exists({release!r}) else "never released\\n")
print({plan!r})
"""


@pytest.mark.parametrize("prog", ["uwf-cmd", "python:uwf-cmd"])  # its process, or uwf's
def test_stderr_is_passed_through_live(cli: Any, thread: str, tmp_path: Path, prog: str) -> None:
    """The command's first stderr line reaches uwf's stderr while the command still runs:
    the command waits for the test to see that line before it goes on."""
    import queue
    import subprocess
    import threading

    release = tmp_path / "release"
    script = tmp_path / "live.py"
    script.write_text(LIVE.format(release=str(release), plan=PLAN))
    agent = shlex.join([prog, "--", sys.executable, str(script)])
    proc = subprocess.Popen(
        ["uwf", "thread", "step", thread, "--agent", agent],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        assert lines.get(timeout=30) == f"{prog}: first line\n"
        release.touch()
        assert proc.stdout is not None
        out = proc.stdout.read()
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
        reader.join(timeout=5)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert lines.get(timeout=5) == f"{prog}: released\n"
    assert json.loads(out)["role"] == "planner"
    head = cli("thread", "show", thread).json()["head"]
    detail = cli("thread", "step-details", head, "--format", "json").json()
    assert detail["stderr"] == "first line\nreleased\n"  # and the detail still keeps it


def test_detail_keeps_the_end_of_a_long_stderr(cli: Any, thread: str, tmp_path: Path) -> None:
    script = tmp_path / "chatty.py"
    script.write_text(
        "import sys\nfor i in range(3000):\n    sys.stderr.write(f'line {i:05d}\\n')\n"
        f"print({PLAN!r})\n"
    )
    r = cli("thread", "step", thread, "--agent",
            shlex.join(["uwf-cmd", "--", sys.executable, str(script)]))  # fmt: skip
    assert r.code == 0, r.err[-500:]
    assert r.err.count("uwf-cmd: line ") == 3000  # every line passed through
    head = cli("thread", "show", thread).json()["head"]
    stderr = cli("thread", "step-details", head, "--format", "json").json()["stderr"]
    assert len(stderr) == 20_000 and stderr.endswith("line 02999\n")


# -- $SUSPEND, then thread resume (docs/format.md, "Suspending and resuming") ------------------

SUSPENDER = """\
import json, os, sys
prompt = sys.stdin.read()
role = os.environ["UWF_ROLE"]
with open({log!r}, "a") as f:
    f.write(json.dumps({{"role": role, "prompt": prompt, "cwd": os.getcwd()}}) + "\\n")
if role == "planner":
    print({plan!r} if "## Resumed" in prompt else {suspend!r})
else:
    print({built!r} if role == "builder" else {approved!r})
"""


def test_a_command_suspends_with_its_frontmatter_and_is_resumed(
    cli_proc: Any, any_store: str, tmp_path: Path
) -> None:
    """A command whose answer is ``$status: $SUSPEND`` leaves the thread waiting (exit 6);
    ``thread resume -p`` runs it again with the person's answer in its prompt, and the thread
    goes on to ``$END`` — every ``uwf`` a subprocess, on both backends."""
    v1.write_review(Path.cwd())
    log = tmp_path / "calls.jsonl"
    script = tmp_path / "suspender.py"
    answers = {"plan": v1.PLAN, "suspend": v1.SUSPEND, "built": v1.BUILT, "approved": v1.APPROVED}
    script.write_text(SUSPENDER.format(log=str(log), **answers))
    agent = shlex.join(["uwf-cmd", "--", sys.executable, str(script)])
    thread, _ = v1.suspend_and_resume(cli_proc, agent)

    done = cli_proc("thread", "step", thread, "-c", "5", "--agent", agent)
    assert done.code == 0, done.err
    assert [(x["role"], x["status"]) for x in done.jsonl()] == [
        ("builder", "active"),
        ("reviewer", "completed"),
    ]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["role"] for c in calls] == ["planner", "planner", "builder", "reviewer"]
    assert "## Resumed" not in calls[0]["prompt"]
    resumed = f"## Moderator Instruction\n\nPlan this task: {v1.TASK}\n\n{v1.RESUMED}"
    assert resumed in calls[1]["prompt"]
    assert calls[2]["cwd"] == str(Path.cwd() / "work")  # the edge's location
    steps = json.loads(cli_proc("thread", "steps", thread).out)["steps"][1:]
    assert [s["output"]["$status"] for s in steps] == ["planned", "built", "approved"]
    assert {s["agent"] for s in steps} == {"uwf-cmd"}
