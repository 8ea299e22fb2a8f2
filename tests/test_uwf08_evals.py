"""uwf 0.8's eval tasks load as written (docs/evals.md, "Tasks of uwf 0.8"): ``builtin: true``
judges by 0.8's names, custom judges given as ``entry:`` (a Node.js script run as ``node
<entry> <working directory> <thread>``) and ``schema:``, a workflow file of the fixture, and
``eval list --limit``. Through the real CLI with ``uwf-mock``, on both backends."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import BIN, EXAMPLES
from test_evals import evalrun

#: uwf 0.8's custom judge: argv is [node, script, cwd, threadId]; the verdict is the last line.
TEST_PASS = """\
const [cwd, thread] = process.argv.slice(2);
const fs = require("fs");
console.log("running the tests…");
const fixed = fs.readFileSync(cwd + "/notes.txt", "utf8").trim();
console.log(JSON.stringify({score: 0.75, data: {cwd, thread, here: process.cwd(), fixed}}));
"""
DATA_SCHEMA = {
    "type": "object",
    "properties": {"fixed": {"type": "string"}, "thread": {"type": "string"}},
    "required": ["fixed", "thread"],
}
JUDGES = [
    {"name": "frontmatter-compliance", "weight": 0.5, "builtin": True},
    {"name": "token-stats", "builtin": True},
    {
        "name": "test-pass",
        "weight": 1,
        "entry": "dist/judges/test-pass.js",
        "schema": "schemas/test-pass.json",
    },
]
NODE = shutil.which("node")


@pytest.fixture
def task08(tmp_path: Path, cli: Any) -> Any:
    """Write a task folder of uwf 0.8 (its judge script and data schema); return its path."""
    assert cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
    counter = iter(range(1000))

    def make(**spec: Any) -> Path:
        folder = tmp_path / "tasks" / f"task{next(counter)}"
        (folder / "dist" / "judges").mkdir(parents=True)
        (folder / "schemas").mkdir()
        (folder / "fixture").mkdir()
        (folder / "fixture" / "notes.txt").write_text("fixed\n")
        (folder / "dist" / "judges" / "test-pass.js").write_text(TEST_PASS)
        (folder / "schemas" / "test-pass.json").write_text(json.dumps(DATA_SCHEMA))
        body = {"name": "fix-it", "workflow": "solve-issue", "prompt": "Fix it."}
        body["judges"] = JUDGES
        body.update(spec)
        (folder / "task.yaml").write_text(yaml.safe_dump(body, sort_keys=False))
        return folder

    return make


def test_a_uwf_08_task_runs_its_judges_as_written(
    any_store: str, cli: Any, cli_proc: Any, task08: Any, scenario: Any, tmp_path: Path
) -> None:
    folder = task08()
    result = cli_proc(
        "eval",
        "run",
        folder,
        "--agent",
        scenario(),
        "--keep-workdir",
        env={"TMPDIR": str(tmp_path)},
    )
    if NODE is None:  # no Node.js here: the task is refused before anything runs
        assert result.code == 1 and "and node is not on PATH" in result.err
        return
    assert result.code == 0, result.err
    [line] = result.jsonl()
    workdir = line["workdir"]
    judged = {j["name"]: j for j in evalrun(cli, line["run"])["judges"]}
    assert judged["frontmatter-compliance"] == {
        "name": "frontmatter-compliance",
        "weight": 0.5,
        "builtin": "compliance",
        "score": 1,
        "data": judged["frontmatter-compliance"]["data"],
    }
    assert judged["frontmatter-compliance"]["data"]["fastPath"] == 5
    assert (judged["token-stats"]["builtin"], judged["token-stats"]["weight"]) == ("cost", 0)
    assert judged["token-stats"]["score"] == 1 and judged["token-stats"]["data"]["steps"] == 5
    assert judged["test-pass"] == {
        "name": "test-pass",
        "weight": 1,
        "command": "node dist/judges/test-pass.js",
        "score": 0.75,
        "data": {"cwd": workdir, "thread": line["thread"], "here": workdir, "fixed": "fixed"},
    }
    assert line["score"] == round((0.5 * 1 + 1 * 0.75) / 1.5, 6)
    assert line["judges"] == {"frontmatter-compliance": 1, "token-stats": 1, "test-pass": 0.75}


def test_a_judges_data_must_satisfy_its_schema(
    cli: Any, cli_proc: Any, task08: Any, scenario: Any
) -> None:
    folder = task08()
    (folder / "dist" / "judges" / "test-pass.js").write_text(
        "console.log(JSON.stringify({score: 1, data: {thread: process.argv[3]}}));\n"
    )
    result = cli_proc("eval", "run", folder, "--agent", scenario())
    if NODE is None:
        assert result.code == 1 and "and node is not on PATH" in result.err
        return
    [line] = result.jsonl()
    judged = {j["name"]: j for j in evalrun(cli, line["run"])["judges"]}
    assert judged["test-pass"]["score"] == 0
    assert judged["test-pass"]["error"].startswith(
        "its data does not satisfy schemas/test-pass.json: fixed: missing"
    )
    assert judged["test-pass"]["data"] == {"thread": line["thread"]}  # kept, to see why


def test_without_node_an_entry_judge_stops_the_eval_in_one_line(
    cli: Any, cli_proc: Any, task08: Any, scenario: Any
) -> None:
    folder = task08()
    result = cli_proc("eval", "run", folder, "--agent", scenario(), env={"PATH": str(BIN)})
    assert (result.code, result.out) == (1, "")
    assert result.err == (
        f"error: invalid task.yaml {folder / 'task.yaml'}: judges[2].entry: runs as node <entry> "
        "<working directory> <thread> (uwf 0.8's judges are Node.js scripts) and node is not on "
        "PATH: install Node.js, or write the judge as command: <program>\n"
    )
    assert cli("eval", "list").json() == [] and cli("thread", "list").json() == []


@pytest.mark.parametrize(
    ("judges", "message"),
    [
        (
            [],
            "judges: the list is empty, so nothing would judge the runs (uwf 0.8 refused it "
            "too): list at least one judge, or leave judges out for the outcome judge",
        ),
        (
            [{"name": "hallucination", "weight": 1, "builtin": True}],
            'judges[0].name: "hallucination" is a built-in judge of uwf 0.8 that it never '
            "implemented (it scored 0 whatever the run did): drop it, or judge with a command",
        ),
        (
            [{"name": "speed", "builtin": True}],
            'judges[0].name: no built-in judge is called "speed" (builtin: true takes one of '
            "outcome, cost, compliance, frontmatter-compliance, token-stats)",
        ),
        (
            [{"name": "t", "entry": "dist/judges/missing.js"}],
            "judges[0].entry: no file dist/judges/missing.js in the task folder",
        ),
        (
            [{"name": "t", "entry": "dist/judges/test-pass.js", "schema": "schemas/none.json"}],
            "judges[0].schema: cannot read schemas/none.json: No such file or directory",
        ),
        (
            [{"name": "t", "builtin": False}],
            "judges[0]: a judge has one of builtin (outcome, cost, compliance), command, or "
            "entry (uwf 0.8's node script)",
        ),
    ],
)
def test_what_a_uwf_08_task_may_not_hold_is_said_in_one_line(
    cli: Any, cli_proc: Any, task08: Any, scenario: Any, judges: Any, message: str
) -> None:
    folder = task08(judges=judges)
    result = cli_proc("eval", "run", folder, "--agent", scenario())
    assert (result.code, result.out) == (1, "")
    assert result.err == f"error: invalid task.yaml {folder / 'task.yaml'}: {message}\n"


def test_a_workflow_file_of_the_fixture_and_eval_list_limit(
    cli: Any, cli_proc: Any, task08: Any, scenario: Any
) -> None:
    """uwf 0.8 started the thread in the copy of the fixture, so a task's workflow file may
    be the fixture's; `eval list --limit N` keeps the N most recent runs."""
    folder = task08(workflow="flows/solve.yaml", judges=[{"name": "outcome", "builtin": "outcome"}])
    (folder / "fixture" / "flows").mkdir()
    shutil.copy(EXAMPLES / "solve-issue.yaml", folder / "fixture" / "flows" / "solve.yaml")
    text = (folder / "fixture" / "flows" / "solve.yaml").read_text()
    (folder / "fixture" / "flows" / "solve.yaml").write_text(
        text.replace("name: solve-issue", "name: solve")
    )
    lines = cli_proc("eval", "run", folder, "--count", "3", "--agent", scenario()).jsonl()
    assert [line["outcome"] for line in lines] == ["completed"] * 3
    every = cli("eval", "list").json()
    assert [r["run"] for r in every] == [line["run"] for line in lines]
    assert cli_proc("eval", "list", "--limit", "2").json() == every[1:]
    assert cli_proc("eval", "list", "--limit", "9", "--task", "fix-it").json() == every
    bad = cli_proc("eval", "list", "--limit", "0")
    assert (bad.code, bad.err) == (2, "error: --limit must be a positive integer\n")


# -- a task folder of uwf 0.8 is confined as any other (docs/evals.md, "Someone else's task
# folder"): its entry script, its schema file and a workflow found in its fixture ----------

OUTSIDE = 'docs/evals.md, "Someone else\'s task folder"'
PROVIDER_KEY = "sk-uwf08-judge-4c1d2e"


def refused_outside(result: Any, folder: Path, what: str) -> None:
    assert (result.code, result.out) == (1, ""), result
    assert result.err == (
        f"error: eval task fix-it: {what}: outside its folder {folder}; a task folder is code, "
        "and runs only its own files unless you allow a directory more with --allow-outside "
        f"DIR ({OUTSIDE})\n"
    )


def test_an_entry_judge_and_its_schema_are_the_task_folders_and_get_no_credentials(
    cli: Any,
    cli_proc: Any,
    task08: Any,
    scenario: Any,
    tmp_path: Path,
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "judge.js").write_text(
        "console.log(JSON.stringify({score: 1, data: {keys: Object.keys(process.env)}}));\n"
    )
    (shared / "data.json").write_text(json.dumps({"type": "object"}))
    entry = {"name": "t", "weight": 1, "entry": "../../shared/judge.js"}
    folder = task08(judges=[entry])
    agent = scenario()
    if NODE is None:  # the task is refused for node before its files are looked at
        result = cli_proc("eval", "run", folder, "--agent", agent)
        assert result.code == 1 and "and node is not on PATH" in result.err
        return
    result = cli_proc("eval", "run", folder, "--agent", agent)
    refused_outside(result, folder, f"its judge t runs {folder}/../../shared/judge.js")
    (folder / "dist" / "judges" / "linked.js").symlink_to(shared / "judge.js")
    linked = {**entry, "entry": "dist/judges/linked.js", "schema": str(shared / "data.json")}
    (folder / "task.yaml").write_text(
        yaml.safe_dump(
            {"name": "fix-it", "workflow": "solve-issue", "prompt": "p", "judges": [linked]}
        )
    )
    result = cli_proc("eval", "run", folder, "--agent", agent)
    refused_outside(
        result,
        folder,
        f"its judge t runs {folder}/dist/judges/linked.js; its judge t reads {shared}/data.json",
    )
    assert cli("eval", "list").json() == [] and cli("thread", "list").json() == []

    # allowed, it runs with node from PATH, and without the provider's key
    root.mkdir(parents=True, exist_ok=True)
    provider = {"p": {"baseUrl": "http://127.0.0.1:9/v1", "apiKeyEnv": "UWF08_JUDGE_KEY"}}
    (root / "config.yaml").write_text(yaml.safe_dump({"providers": provider}))
    monkeypatch.setenv("UWF08_JUDGE_KEY", PROVIDER_KEY)
    result = cli_proc("eval", "run", folder, "--agent", agent, "--allow-outside", str(shared))
    assert result.code == 0, result.err
    [line] = result.jsonl()
    [judged] = evalrun(cli, line["run"])["judges"]
    assert judged["score"] == 1 and "UWF_THREAD" in judged["data"]["keys"]
    assert "UWF08_JUDGE_KEY" not in judged["data"]["keys"]


def test_a_workflow_file_found_in_the_fixture_is_confined_too(
    cli_proc: Any, task08: Any, scenario: Any, tmp_path: Path
) -> None:
    """The fixture's file is the task folder's; a link there to a file elsewhere is not."""
    elsewhere = tmp_path / "solve.yaml"
    elsewhere.write_text((EXAMPLES / "solve-issue.yaml").read_text())
    folder = task08(workflow="flows/solve.yaml", judges=[{"name": "outcome", "builtin": "outcome"}])
    (folder / "fixture" / "flows").mkdir()
    (folder / "fixture" / "flows" / "solve.yaml").symlink_to(elsewhere)
    result = cli_proc("eval", "run", folder, "--agent", scenario())
    refused_outside(result, folder, f"its workflow is the file {folder}/fixture/flows/solve.yaml")


def test_a_judges_schema_is_read_only_from_a_regular_file_of_bounded_size(
    cli_proc: Any, task08: Any, scenario: Any
) -> None:
    """A named pipe would block the read and a device never end it; a huge or deeply nested
    file is refused in one line, as NaN is."""
    import os

    folder = task08()
    schema = folder / "schemas" / "test-pass.json"
    head = f"error: invalid task.yaml {folder / 'task.yaml'}: judges[2].schema: cannot read "
    cases = [
        ("not a regular file", lambda: os.mkfifo(schema)),
        ("larger than 1048576 bytes", lambda: schema.write_text(" " * (1 << 20) + "{}")),
        ("it nests too deep", lambda: schema.write_text("[" * 100_000 + "]" * 100_000)),
        ("NaN is not a JSON number", lambda: schema.write_text('{"maximum": NaN}')),
    ]
    for why, make in cases:
        schema.unlink()
        make()
        result = cli_proc("eval", "run", folder, "--agent", scenario())
        if NODE is None:
            assert result.code == 1 and "and node is not on PATH" in result.err
            continue
        assert (result.code, result.out) == (1, ""), why
        assert result.err == f"{head}schemas/test-pass.json: {why}\n"
