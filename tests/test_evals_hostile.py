"""Someone else's eval task folder (docs/evals.md, "Someone else's task folder";
docs/reliability.md, "Hostile agents" rows 18 and 19), driven through the real CLI.

A task folder is code its author wrote: its command judges run as the user. So its judges'
programs and its workflow file must be its own files unless the user allows a directory
more (`--allow-outside`); its fixture is never followed through a link; and a judge gets no
credential in its environment, and what it prints is masked like everything uwf stores.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import EXAMPLES, Result

KEY_ENV = "MY_PROVIDER_KEY"
KEY = "sk-provider-5c1e77a0b93d"
DOTENV_SECRET = "dotenv-only-4f0e19b2c8"
LISTED = "listed-secret-8e2b71c0aa"
SHOWN = 'docs/evals.md, "Someone else\'s task folder"'


@pytest.fixture
def make_task(tmp_path: Path, cli_proc: Any) -> Any:
    assert cli_proc("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0

    def make(spec: dict[str, Any], files: dict[str, str] | None = None) -> Path:
        folder = tmp_path / "suite" / "task"
        folder.mkdir(parents=True)
        (folder / "task.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        for rel, content in (files or {}).items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content)
            path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return folder

    return make


def refused(r: Result, task: Path, what: str) -> None:
    assert (r.code, r.out) == (1, ""), r
    assert r.err == (
        f"error: eval task task: {what}: outside its folder {task}; a task folder is code, "
        "and runs only its own files unless you allow a directory more with --allow-outside "
        f"DIR ({SHOWN})\n"
    )


def test_judges_and_workflow_files_are_confined_to_the_task_folder(
    cli_proc: Any, make_task: Any, scenario: Any, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"
    outside = tmp_path / "suite" / "x.sh"  # a script of the user's, beside the folder
    outside.parent.mkdir(parents=True)
    outside.write_text(f'#!/bin/sh\necho "$@" >> {ran}\necho \'{{"score": 1, "data": null}}\'\n')
    outside.chmod(0o755)
    wf = tmp_path / "suite" / "solve-issue.yaml"
    wf.write_text((EXAMPLES / "solve-issue.yaml").read_text())
    task = make_task(
        {"workflow": "solve-issue", "prompt": "p", "judges": [{"name": "j", "command": "../x.sh"}]}
    )
    agent = scenario()
    refused(
        cli_proc("eval", "run", str(task), "--agent", agent),
        task,
        f"its judge j runs {task}/../x.sh",
    )
    (task / "j.sh").symlink_to(outside)  # a link of the folder's, to a file elsewhere
    for command, shown in (("j.sh", f"{task}/j.sh"), (str(outside), str(outside))):
        spec = {
            "workflow": "solve-issue",
            "prompt": "p",
            "judges": [{"name": "j", "command": command}],
        }
        (task / "task.yaml").write_text(yaml.safe_dump(spec))
        refused(
            cli_proc("eval", "run", str(task), "--agent", agent), task, f"its judge j runs {shown}"
        )
    spec = {"workflow": "../solve-issue.yaml", "prompt": "p"}
    (task / "task.yaml").write_text(yaml.safe_dump(spec))
    r = cli_proc("eval", "run", str(task), "--agent", agent)
    refused(r, task, f"its workflow is the file {task}/../solve-issue.yaml")
    assert not ran.exists()
    assert cli_proc("eval", "list").json() == [] and cli_proc("thread", "list").json() == []

    # --workflow replaces the task's: its file is not read; --allow-outside lets the rest in
    ok = cli_proc("eval", "run", str(task), "--agent", agent, "--workflow", "solve-issue")
    assert ok.code == 0, ok.err
    spec = {
        "workflow": "../solve-issue.yaml",
        "prompt": "p",
        "judges": [{"name": "j", "command": "j.sh"}],
    }
    (task / "task.yaml").write_text(yaml.safe_dump(spec))
    allowed = ("--allow-outside", str(tmp_path / "suite"))
    ok = cli_proc("eval", "run", str(task), "--agent", agent, *allowed)
    assert ok.code == 0, ok.err
    [line] = ok.jsonl()
    assert line["judges"]["j"] == 1 and ran.read_text() == f"{line['thread']}\n"


def test_a_fixture_that_is_a_link_is_never_followed(
    cli_proc: Any, make_task: Any, agent_script: Any, tmp_path: Path
) -> None:
    """A fixture pointing at a private directory used to copy its id_rsa into the run's
    working directory, where the agent read it."""
    private = tmp_path / "home" / ".ssh"
    private.mkdir(parents=True)
    (private / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY----- secret\n")
    task = make_task({"workflow": "solve-issue", "prompt": "p"})
    (task / "fixture").symlink_to(private)
    reader = agent_script(
        "print(open('id_rsa').read() if os.path.exists('id_rsa') else 'nothing', "
        "file=sys.stderr); sys.exit(1)"
    )
    r = cli_proc("eval", "run", str(task), "--agent", f"uwf-cmd -- {reader}")
    assert (r.code, r.out) == (1, "")
    assert r.err == (
        f"error: eval task task: its fixture {task}/fixture is a symbolic link (to {private}): "
        "a fixture is copied into each run's working directory and never followed through a "
        "link; make it a directory\n"
    )
    assert cli_proc("thread", "list").json() == []
    (task / "fixture").unlink()
    (task / "fixture").write_text("a file")
    r = cli_proc("eval", "run", str(task), "--agent", f"uwf-cmd -- {reader}")
    assert r.err == f"error: eval task task: its fixture {task}/fixture is not a directory\n"


def test_a_judge_gets_no_credentials_and_what_it_prints_is_masked(
    cli_proc: Any, make_task: Any, scenario: Any, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The judge prints its environment and the root's .env: it holds no provider key, no
    .env entry, no listed secret; the .env it read is stored masked."""
    root.mkdir(parents=True, exist_ok=True)
    config = {
        "providers": {"p": {"baseUrl": "http://127.0.0.1:9/v1", "apiKeyEnv": KEY_ENV}},
        "secrets": ["MY_LISTED"],
    }
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    (root / ".env").write_text(f"DOTENV_ONLY={DOTENV_SECRET}\n")
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv("MY_LISTED", LISTED)
    monkeypatch.setenv("PGPASSWORD", "pg-password-77aa")
    judge = (
        "#!/usr/bin/env python3\n"
        "import json, os\n"
        "dotenv = open(os.path.join(os.environ['WORKFLOW_STORAGE_ROOT'], '.env')).read()\n"
        "print(json.dumps({'score': 1, 'data': {'env': dict(os.environ), 'dotenv': dotenv}}))\n"
    )
    spec = {"workflow": "solve-issue", "prompt": "p", "judges": [{"name": "j", "command": "j.py"}]}
    task = make_task(spec, {"j.py": judge})
    r = cli_proc("eval", "run", str(task), "--agent", scenario())
    assert r.code == 0, r.err
    [line] = r.jsonl()
    report = cli_proc("eval", "report", line["run"]).json()
    [judged] = report["judges"]
    env = judged["data"]["env"]
    assert env["UWF_THREAD"] == line["thread"] and "WORKFLOW_STORAGE_ROOT" in env
    for name in (KEY_ENV, "MY_LISTED", "PGPASSWORD", "DOTENV_ONLY"):
        assert name not in env, name
    text = json.dumps(report)
    for secret in (KEY, LISTED, DOTENV_SECRET, "pg-password-77aa"):
        assert secret not in text, secret
    assert judged["data"]["dotenv"] == "DOTENV_ONLY=***\n"  # read (a file), stored masked
    assert os.environ.get(KEY_ENV) == KEY  # the test's own environment kept it
