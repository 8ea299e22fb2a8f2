"""People as roles, through the real CLI: deferral (exit 75 -> exit 6, status waiting),
``uwf thread answer``, ``uwf-human`` on a pseudo-terminal with ``$EDITOR`` set to a script,
and a cron loop over examples/write-docs.yaml that runs to $END once a person answered."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from support import BIN, EXAMPLES
from test_builtin import doc_block

WRITE = "---\nstatus: _\nfiles: [docs/install.md]\nsummary: How to install.\n---\nFirst draft."
REWRITE = "---\nstatus: _\nfiles: [docs/install.md]\nsummary: With the extras.\n---\nSecond."

EDITOR_SCRIPT = """\
import json, pathlib, sys
here = pathlib.Path(__file__).parent
answers = json.loads((here / "answers.json").read_text())
count = here / "count"
n = int(count.read_text()) if count.exists() else 0
count.write_text(str(n + 1))
path = pathlib.Path(sys.argv[-1])
(here / f"seen-{n}.md").write_text(path.read_text())
if n < len(answers) and answers[n] is not None:
    path.write_text(answers[n])
"""


@pytest.fixture
def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``$EDITOR`` as a script that writes the n-th scripted answer on its n-th run (None:
    leaves the file as it is) and keeps what it was shown (``seen(n)``)."""
    home = tmp_path / "editor"
    home.mkdir()
    script = home / "editor.py"
    script.write_text(EDITOR_SCRIPT)
    monkeypatch.setenv("EDITOR", f"{sys.executable} {script}")
    monkeypatch.delenv("VISUAL", raising=False)

    class Editor:
        def script(self, *answers: str | None) -> None:
            (home / "answers.json").write_text(json.dumps(list(answers)))
            (home / "count").unlink(missing_ok=True)

        def runs(self) -> int:
            count = home / "count"
            return int(count.read_text()) if count.exists() else 0

        def seen(self, n: int) -> str:
            return (home / f"seen-{n}.md").read_text()

    return Editor()


@pytest.fixture
def docs_thread(cli: Any, root: Path, tmp_path: Path) -> Any:
    """examples/write-docs.yaml with a scripted writer (uwf-mock) and uwf-human as reviewer."""
    import yaml

    scenario = tmp_path / "writer.yaml"
    scenario.write_text(yaml.safe_dump({"roles": {"writer": [WRITE, REWRITE]}}))
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "agents": {
                    "mock": {"command": "uwf-mock", "args": ["--scenario", str(scenario)]},
                    "human": {"command": "uwf-human"},
                },
                "defaultAgent": "mock",
                "agentOverrides": {"write-docs": {"reviewer": "human"}},
            }
        )
    )
    assert cli("workflow", "put", str(EXAMPLES / "write-docs.yaml")).code == 0

    def make() -> str:
        started = cli("thread", "start", "write-docs", "-p", "Document the install")
        assert started.code == 0, started.err
        return str(started.json()["thread"])

    return make


CRON_LOOP = """\
# one cron run: step until the thread is done (3), waits for a person (6) or fails
while :; do
  uwf thread step "$1" >>"$2"; code=$?
  case $code in
    0) ;;
    3) echo done; exit 0 ;;
    6) echo waiting; exit 0 ;;
    *) echo "failed $code"; exit "$code" ;;
  esac
done
"""


def test_cron_loop_with_a_person_as_reviewer_runs_to_end(
    cli: Any, cli_proc: Any, docs_thread: Any, tmp_path: Path
) -> None:
    thread = docs_thread()
    loop = tmp_path / "cron.sh"
    loop.write_text(CRON_LOOP)
    log = tmp_path / "steps.jsonl"

    def cron() -> str:
        run = subprocess.run(
            ["sh", str(loop), thread, str(log)],
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            env=dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}"),
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        return run.stdout.strip()

    assert cron() == "waiting"  # the writer ran; the reviewer deferred: nobody at a terminal
    shown = cli("thread", "show", thread).json()
    assert (shown["status"], shown["steps"]) == ("waiting", 1)
    assert shown["waiting"]["role"] == "reviewer"
    assert shown["waiting"]["reason"] == "no terminal to ask a person on"
    listed = cli("thread", "list", "--status", "waiting").json()
    assert [(t["thread"], t["waiting"]["role"]) for t in listed] == [(thread, "reviewer")]
    assert cron() == "waiting"  # still nobody: nothing moved, the wait keeps its start
    assert cli("thread", "show", thread).json()["waiting"]["since"] == shown["waiting"]["since"]

    rejected = cli_proc(
        "thread", "answer", thread, "--status", "rejected", "--set", "comments=Add the extras."
    )
    assert rejected.code == 0, rejected.err
    assert rejected.json()["role"] == "reviewer" and rejected.json()["status"] == "active"
    assert cron() == "waiting"  # the writer reworked it; the reviewer waits again

    answer = tmp_path / "approve.md"
    answer.write_text("---\nstatus: approved\ncomments: Good now.\n---\nThanks!\n")
    approved = cli_proc("thread", "answer", thread, "--file", str(answer))
    assert approved.code == 0, approved.err
    assert approved.json()["done"] is True and approved.json()["status"] == "completed"
    assert cron() == "done"

    steps = cli("thread", "steps", thread).json()["steps"][1:]
    assert [(s["role"], s["agent"]) for s in steps] == [
        ("writer", "uwf-mock"),
        ("reviewer", "uwf-human"),
        ("writer", "uwf-mock"),
        ("reviewer", "uwf-human"),
    ]
    assert steps[1]["output"] == {"status": "rejected", "comments": "Add the extras."}
    assert steps[3]["output"] == {"status": "approved", "comments": "Good now."}
    read = cli("thread", "read", thread).out
    assert "Thanks!" in read  # the answer's body is the step's content
    assert [json.loads(x)["role"] for x in log.read_text().splitlines()] == ["writer", "writer"]


def test_the_documented_config_makes_the_reviewer_a_person(
    cli: Any, cli_proc: Any, root: Path, tmp_path: Path
) -> None:
    import yaml

    config = yaml.safe_load(doc_block("human-config"))
    scenario = tmp_path / "writer.yaml"
    scenario.write_text(yaml.safe_dump({"roles": {"writer": [WRITE]}}))
    config["agents"]["mock"] = {"command": "uwf-mock", "args": ["--scenario", str(scenario)]}
    config["defaultAgent"] = "mock"
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    assert cli("workflow", "put", str(EXAMPLES / "write-docs.yaml")).code == 0
    thread = cli("thread", "start", "write-docs", "-p", "Document it").json()["thread"]
    ran = cli_proc("thread", "step", thread, "-c", "5")
    assert ran.code == 6, ran.err
    assert [line["role"] for line in ran.jsonl()] == ["writer"]
    assert cli("thread", "show", thread).json()["waiting"]["role"] == "reviewer"


def test_answer_refusals_change_nothing(
    cli: Any, cli_proc: Any, docs_thread: Any, root: Path, snapshot: Any
) -> None:
    thread = docs_thread()
    assert cli_proc("thread", "step", thread).code == 0
    assert cli_proc("thread", "step", thread).code == 6
    before = snapshot(root)
    cases = [
        (
            ["--status", "maybe", "--set", "comments=x"],
            1,
            'error: output rejected by the schema of role "reviewer": status: '
            'expected one of "approved", "rejected", got "maybe"',
        ),
        (
            ["--status", "approved"],
            1,
            'error: output rejected by the schema of role "reviewer": comments: missing '
            "(expected a string)",
        ),
        (["--set", "oops"], 1, "error: --set expects field=value, got: oops"),
        (["-m", "x", "--file", "y"], 2, "error: give -m or --file, not both"),
        (
            ["--file", "/nonexistent/answer.md"],
            1,
            "error: cannot read answer /nonexistent/answer.md: No such file or directory",
        ),
    ]
    for args, code, message in cases:
        out = cli_proc("thread", "answer", thread, *args)
        assert (out.code, out.err.strip()) == (code, message), args
    assert snapshot(root) == before
    ghost = cli_proc("thread", "answer", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "--status", "approved")
    assert (ghost.code, ghost.err) == (1, "error: thread not found: 01ARZ3NDEKTSV4RRFFQ69G5FAV\n")


def run_on_terminal(args: list[str], timeout: float = 60) -> tuple[int, str, str, str]:
    """Run ``uwf <args>`` with a pseudo-terminal as stdin (as a person at a terminal would);
    (exit code, stdout, stderr, what was written on the terminal)."""
    primary, secondary = pty.openpty()
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", TERM="dumb")
    proc = subprocess.Popen(
        [str(BIN / "uwf"), *args],
        stdin=secondary,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    os.close(secondary)
    screen: list[bytes] = []

    def drain() -> None:
        while True:
            if not select.select([primary], [], [], 0.2)[0]:
                if proc.poll() is not None:
                    return
                continue
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                return
            if not chunk:
                return
            screen.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        proc.kill()
        reader.join(timeout=5)
        os.close(primary)
    return proc.returncode, out.decode(), err.decode(), b"".join(screen).decode("utf-8", "replace")


def test_uwf_human_on_a_terminal_asks_again_on_a_rejection(
    cli: Any, cli_proc: Any, docs_thread: Any, editor: Any
) -> None:
    thread = docs_thread()
    assert cli_proc("thread", "step", thread).code == 0
    editor.script(
        "---\nstatus: maybe\ncomments: not sure\n---\n",
        "---\nstatus: approved\ncomments: Clear and short.\n---\nI read it twice.\n",
    )
    code, out, err, screen = run_on_terminal(["thread", "step", thread])
    assert code == 0, err
    assert json.loads(out)["role"] == "reviewer" and json.loads(out)["done"] is True
    # the context the role would get was shown on the terminal
    assert f"# uwf-human: thread {thread}, step 2, role reviewer" in screen
    assert "Document the install" in screen and "## Moderator Instruction" in screen
    assert "Review the documentation in" in screen
    # the template came from the role's schema; the second run showed the rejection on top
    first = editor.seen(0)
    assert first.rstrip("\n") == doc_block("human-template").rstrip("\n")  # as documented
    second = editor.seen(1)
    assert second.startswith(
        '---\n# rejected: output rejected by the schema of role "reviewer": status: '
        'expected one of "approved", "rejected", got "maybe"\nstatus: maybe'
    )
    assert editor.runs() == 2
    steps = cli("thread", "steps", thread).json()["steps"]
    assert steps[2]["output"] == {"status": "approved", "comments": "Clear and short."}
    assert steps[2]["agent"] == "uwf-human" and steps[2]["durationMs"] >= 0
    details = cli("thread", "step-details", steps[2]["hash"], "--format", "json").json()
    assert details["via"] == "uwf-human" and details["durationMs"] == steps[2]["durationMs"]
    assert details["turns"][0]["content"] == "I read it twice."
    assert "I read it twice." in cli("thread", "read", thread).out


def test_uwf_human_defers_when_the_template_comes_back_unchanged(
    cli: Any, cli_proc: Any, docs_thread: Any, editor: Any
) -> None:
    thread = docs_thread()
    assert cli_proc("thread", "step", thread).code == 0
    editor.script(None)
    code, out, err, _ = run_on_terminal(["thread", "step", thread])
    assert (code, out) == (6, "")
    assert (
        f"error: thread {thread} waits for reviewer: the agent deferred the step (the answer "
        in err
    )
    shown = cli("thread", "show", thread).json()
    assert shown["status"] == "waiting" and shown["steps"] == 1
    assert shown["waiting"]["reason"] == "the answer template came back unchanged"
