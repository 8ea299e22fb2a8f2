"""Version-1 workflows (uwf 0.8's format) end to end through the real CLI, on both backends:
a folder workflow split with ``!include`` is checked, stored and shown as written; a thread
started with ``--cwd`` routes on ``$status`` (``oneOf`` branches), renders Liquid prompts
with filters, loops and ``_body``, is suspended by its agent (``$SUSPEND``) and resumed with
``thread resume -p``, runs its agents where ``--cwd`` and ``location`` say, reaches ``$END``
and is resumed again through ``$START.resume`` (docs/format.md, "Version-1 workflow files",
"Suspending and resuming", "Working directories")."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

import version1 as v1
from support import EXAMPLES
from uwf.protocol import schemas


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The working directory of the test (conftest's), holding the ``review`` workflow."""
    cwd = tmp_path / "cwd"
    v1.write_review(cwd)
    return cwd


def ok(result: Any) -> Any:
    assert result.code == 0, result.err
    return result.json()


def node(cli: Any, h: str) -> Any:
    return ok(cli("cas", "get", h))["payload"]


def steps_of(cli: Any, thread: str) -> list[dict[str, Any]]:
    """Every step of a thread, oldest first, with its StepNode's payload (``edgePrompt``)."""
    listed = ok(cli("thread", "steps", thread))["steps"][1:]
    return [{**s, "node": node(cli, s["hash"])} for s in listed]


# -- the file: checked, stored, shown ----------------------------------------------------


def test_a_folder_workflow_with_includes_is_stored_with_its_files(cli: Any, project: Path) -> None:
    folder = project / ".workflows" / "review"
    checked = ok(cli("workflow", "check", folder))
    assert checked[0]["name"] == "review" and checked[0]["problems"] == []
    put = ok(cli("workflow", "put", folder / "index.yaml"))
    assert put == {"name": "review", "hash": checked[0]["hash"]}
    assert ok(cli("workflow", "put", folder))["hash"] == put["hash"]  # idempotent
    shown = ok(cli("workflow", "show", "review"))
    assert shown["type"] == schemas.HASHES.workflow_v1
    payload = shown["payload"]
    assert payload["version"] == 1
    assert list(payload["graph"]["$START"]) == ["new", "resume"]
    assert payload["graph"]["planner"]["planned"]["location"] == "work"
    assert payload["roles"]["builder"]["procedure"] == v1.BUILD  # !include of a text file
    reviewer = node(cli, payload["roles"]["reviewer"]["meta"])  # !include of a JSON file
    assert [b["properties"]["$status"] for b in reviewer["oneOf"]] == [
        {"const": "approved"},
        {"const": "rejected"},
    ]
    assert [s["path"] for s in payload["source"]] == [
        "index.yaml",
        "schemas/planner.yaml",
        "build.md",
        "schemas/reviewer.json",
    ]
    source = cli("workflow", "show", "review", "--source")
    assert source.code == 0, source.err
    assert source.out == (
        f"==> index.yaml <==\n{v1.INDEX}\n"
        f"==> schemas/planner.yaml <==\n{v1.PLANNER_SCHEMA}\n"
        f"==> build.md <==\n{v1.BUILD}\n"
        f"==> schemas/reviewer.json <==\n{json.dumps(v1.REVIEWER_SCHEMA, indent=2)}"
    )
    listed = ok(cli("workflow", "list"))
    assert {"name": "review", "hash": "(local)", "origin": "local"} in listed


def test_show_source_prints_a_single_file_byte_for_byte(cli: Any, tmp_path: Path) -> None:
    text = "version: 1  # no final newline\nroles:\n  a:\n    frontmatter: {}\ngraph:\n"
    text += "  $START:\n    new: {role: a, prompt: go}\n  a:\n    _: {role: $END}"
    path = tmp_path / "tiny.yaml"
    path.write_bytes(text.encode())
    h = ok(cli("workflow", "put", path))["hash"]
    assert cli("workflow", "show", h, "--source").out == text


def test_uwf_05_files_keep_their_nodes(cli: Any) -> None:
    """The example of uwf 0.5's format gives the node it gave before version-1 files existed."""
    put = ok(cli("workflow", "put", EXAMPLES / "solve-issue.yaml"))
    assert put["hash"] == "4WV82QSTJ4217"
    assert ok(cli("workflow", "show", "solve-issue"))["type"] == schemas.HASHES.workflow
    source = cli("workflow", "show", "solve-issue", "--source")
    assert source.code == 1
    assert source.err == (
        f"error: workflow {put['hash']} has no stored source: only a version-1 file's node "
        "keeps the files it was read from (a uwf 0.5 file's node is its content: "
        "`uwf workflow show` prints it)\n"
    )


# -- a thread: routing, Liquid, suspension, resume, working directories, the end ---------


def test_a_thread_runs_to_end_suspended_and_resumed_on_the_way(
    cli: Any, any_store: str, project: Path, scenario: Any
) -> None:
    agent = scenario(
        {
            "planner": [{"attempts": [v1.SUSPEND, v1.PLAN]}],
            "builder": [v1.BUILT],
            "reviewer": [v1.REJECTED, v1.APPROVED],
        }
    )
    started = ok(cli("thread", "start", "review", "-p", "Add a flag", "--cwd", project))
    thread = started["thread"]

    suspended = cli("thread", "step", thread, "--agent", agent)
    assert suspended.code == 6
    assert suspended.err.splitlines()[-1] == (
        f"error: thread {thread} waits for planner: the agent suspended the step (which "
        f"branch?); resume it with uwf thread resume {thread} -p <the answer>, or answer it "
        f"with uwf thread answer {thread}"
    )
    shown = ok(cli("thread", "show", thread))
    assert shown["status"] == "waiting" and shown["steps"] == 0
    assert shown["cwd"] == str(project)
    assert shown["waiting"]["role"] == "planner"
    assert shown["waiting"]["reason"] == "$SUSPEND: which branch?"

    resumed = ok(cli("thread", "resume", thread, "-p", "main", "--agent", agent))
    assert (resumed["role"], resumed["status"], resumed["thread"]) == ("planner", "active", thread)
    assert "resumedFrom" not in resumed

    planned = ok(cli("thread", "step", thread, "--dry-run", "--agent", agent))
    assert planned["role"] == "builder"
    assert planned["cwd"] == str(project / "work")
    assert planned["prompt"] == "Build 2 files: a.py, b.py.\n- a.py\n- b.py\nPlan: Touch a, then b."

    stepped = cli("thread", "step", thread, "-c", "10", "--agent", agent)
    assert stepped.code == 0, stepped.err
    lines = stepped.jsonl()
    assert [line["role"] for line in lines] == ["builder", "reviewer", "builder", "reviewer"]
    assert lines[-1]["status"] == "completed" and lines[-1]["done"] is True

    steps = steps_of(cli, thread)
    assert [s["role"] for s in steps] == ["planner", "builder", "reviewer", "builder", "reviewer"]
    assert [s["output"]["$status"] for s in steps] == [
        "planned",
        "built",
        "rejected",
        "built",
        "approved",
    ]
    prompts = [s["node"]["edgePrompt"] for s in steps]
    assert prompts[0] == (
        "Plan this task: Add a flag\n\n## Resumed\n\nYou suspended this step: which branch?\n"
        "A person resumed it and wrote:\n\nmain"
    )
    assert prompts[2] == "Review a.py."
    assert prompts[3] == "Fix it: add tests (No tests yet.)"
    assert ok(cli("thread", "show", thread))["status"] == "completed"

    table = cli("thread", "show", thread, "--format", "table").out.splitlines()
    assert [line.split() for line in table if line.startswith("working")] == [
        ["working", "directory", str(project)]
    ]
    rows = cli("thread", "steps", thread, "--format", "table").out.splitlines()[2:]
    assert [row.split()[3] for row in rows] == ["planned", "built", "rejected", "built", "approved"]


def test_an_ended_thread_is_resumed_as_a_new_thread(
    cli: Any, any_store: str, project: Path, scenario: Any
) -> None:
    first = scenario({"planner": [v1.PLAN], "builder": [v1.BUILT], "reviewer": [v1.APPROVED]})
    thread = ok(cli("thread", "start", "review", "-p", "Add a flag", "--cwd", project))["thread"]
    assert cli("thread", "step", thread, "-c", "5", "--agent", first).code == 0
    ended = ok(cli("thread", "show", thread))
    assert (ended["status"], ended["steps"]) == ("completed", 3)

    again = scenario({"planner": [v1.PLAN], "builder": [v1.BUILT], "reviewer": [v1.APPROVED]})
    resumed = ok(cli("thread", "resume", thread, "-p", "one more file", "--agent", again))
    new = resumed["thread"]
    assert new != thread and resumed["resumedFrom"] == thread
    assert (resumed["role"], resumed["status"]) == ("planner", "active")

    head = node(cli, resumed["head"])
    assert head["edgePrompt"] == "The thread was resumed: ONE MORE FILE"
    assert head["depth"] == 4 and head["prev"] is None
    start = node(cli, head["start"])
    assert start == {
        "workflow": ended["workflow"],
        "prompt": "Add a flag",
        "resumes": ended["head"],
        "resumeText": "one more file",
    }
    shown = ok(cli("thread", "show", new))
    assert (shown["steps"], shown["cwd"]) == (4, str(project))
    read = cli("thread", "read", new, "--quota", "100000").out
    assert "## Step 1: planner" in read and "## Step 4: planner" in read

    assert ok(cli("thread", "show", thread)) == ended  # the ended thread never changes
    assert cli("thread", "step", new, "-c", "5", "--agent", again).code == 0
    assert ok(cli("thread", "show", new))["status"] == "completed"
    assert [s["role"] for s in steps_of(cli, new)] == ["planner", "builder", "reviewer"] * 2


def test_a_thread_that_neither_waits_nor_ended_is_not_resumed(
    cli: Any, project: Path, scenario: Any
) -> None:
    thread = ok(cli("thread", "start", "review", "-p", "x"))["thread"]
    r = cli("thread", "resume", thread, "-p", "go on")
    assert r.code == 1
    assert r.err == (
        f"error: thread {thread} is not waiting (status: idle); "
        f"`uwf thread step {thread}` continues it\n"
    )


def test_an_ended_uwf_05_thread_cannot_be_resumed(cli: Any, scenario: Any) -> None:
    assert cli("workflow", "put", EXAMPLES / "solve-issue.yaml").code == 0
    thread = ok(cli("thread", "start", "solve-issue", "-p", "x"))["thread"]
    head = ok(cli("thread", "kill", thread)) and ok(cli("thread", "show", thread))["head"]
    r = cli("thread", "resume", thread)
    assert r.code == 1
    assert r.err == (
        f"error: thread {thread} has ended (killed) and its workflow has no $START.resume "
        f"edge, so it cannot be resumed; `uwf thread fork {head}` starts a thread at its last "
        "step\n"
    )


# -- working directories --------------------------------------------------------------------

WHERE = """\
import os, sys
sys.stdin.read()
role = os.environ["UWF_ROLE"]
here = os.getcwd()
assert os.environ["PWD"] == here
if role == "planner":
    print(f"---\\n$status: planned\\nspecFiles: [{here}]\\n---\\nPlanned in {here}.")
elif role == "builder":
    print(f"---\\n$status: built\\nfiles: [{here}]\\n---\\nBuilt in {here}.")
else:
    print("---\\n$status: approved\\ncomments: fine\\n---\\n")
"""


def test_agents_start_in_the_thread_directory_or_the_edge_location(
    cli: Any, any_store: str, project: Path, tmp_path: Path
) -> None:
    script = tmp_path / "where.py"
    script.write_text(WHERE)
    agent = f"uwf-cmd -- {sys.executable} {script}"
    thread = ok(cli("thread", "start", "review", "-p", "x", "--cwd", project))["thread"]
    assert cli("thread", "step", thread, "-c", "5", "--agent", agent).code == 0
    steps = steps_of(cli, thread)
    assert steps[0]["output"]["specFiles"] == [str(project)]  # --cwd
    assert steps[1]["output"]["files"] == [str(project / "work")]  # location: work


def test_forks_and_reruns_keep_or_take_a_working_directory(
    cli: Any, any_store: str, project: Path, tmp_path: Path
) -> None:
    """A fork of a thread by number keeps its directory; a fork of a node takes the current
    directory (none with --no-cwd) unless given one, in every form of ``thread fork`` and in
    ``thread rerun``, whose agent starts there."""
    script = tmp_path / "where.py"
    script.write_text(WHERE)
    agent = f"uwf-cmd -- {sys.executable} {script}"
    thread = ok(cli("thread", "start", "review", "-p", "x", "--cwd", project))["thread"]
    assert cli("thread", "step", thread, "--agent", agent).code == 0
    planned = steps_of(cli, thread)[0]["hash"]
    other = tmp_path / "other"
    other.mkdir()

    def cwd_of(forked: dict[str, Any]) -> Any:
        return ok(cli("thread", "show", forked["thread"])).get("cwd")

    assert cwd_of(ok(cli("thread", "fork", thread, "--at", "1"))) == str(project)
    assert cwd_of(ok(cli("thread", "fork", thread, "--at", "1", "--cwd", other))) == str(other)
    assert cwd_of(ok(cli("thread", "fork", planned))) == str(Path.cwd())
    assert cwd_of(ok(cli("thread", "fork", planned, "--no-cwd"))) is None
    assert cwd_of(ok(cli("thread", "fork", thread, "--at", "1", "--no-cwd"))) is None
    onto = ok(cli("thread", "fork", planned, "--workflow", "review", "--cwd", project))
    assert cwd_of(onto) == str(project)  # and the name is found from there, as at a start
    edited = tmp_path / "edited.md"
    edited.write_text("---\n$status: planned\nspecFiles: [a.md]\n---\nEdited.\n")
    by_hand = ok(cli("thread", "fork", planned, "--output", edited, "--cwd", other))
    assert cwd_of(by_hand) == str(other)

    rerun = ok(cli("thread", "rerun", planned, "--agent", agent, "--cwd", other))
    assert cwd_of(rerun) == str(other)
    assert steps_of(cli, rerun["thread"])[0]["output"]["specFiles"] == [str(other)]
    of_thread = ok(cli("thread", "rerun", thread, "--agent", agent))  # its last step
    assert cwd_of(of_thread) == str(project)
    assert steps_of(cli, of_thread["thread"])[0]["output"]["specFiles"] == [str(project)]


def test_a_missing_working_directory_fails_the_step_and_changes_nothing(
    cli: Any, cli_proc: Any, any_store: str, project: Path, tmp_path: Path, scenario: Any
) -> None:
    ok(cli("workflow", "put", project / ".workflows" / "review"))  # not found from elsewhere
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    thread = ok(cli("thread", "start", "review", "-p", "x", "--cwd", elsewhere))["thread"]
    before = ok(cli("thread", "show", thread))
    elsewhere.rmdir()  # as on a worker where the directory does not exist
    r = cli_proc("thread", "step", thread, "--agent", scenario({"planner": [v1.PLAN]}))
    assert r.code == 5
    error = (
        f"thread {thread}: the working directory {elsewhere} of planner does not exist "
        f"on this machine ({socket.gethostname()}); the step was not run. It is the directory "
        "the thread records (its --cwd, else where it was started): step the thread on a "
        "machine that has it, or go on without it in a new thread (uwf thread fork "
        f"{before['head']} --no-cwd, or --cwd DIR; then uwf thread kill {thread}). In a fleet "
        "whose machines do not share paths, start threads with --no-cwd or a --cwd every "
        "machine has"
    )
    assert r.err == f"error: {error}\n"

    def unchanged(attempts: int) -> None:
        """The head and the chain stay; the failed attempts (at least ``attempts``: the worker
        may try again within its second) are the thread's last failure."""
        shown = ok(cli("thread", "show", thread))
        failure = shown.pop("failure")
        assert (failure["error"], failure["code"]) == (error, 5)
        assert failure["attempts"] >= attempts
        assert failure["host"] == socket.gethostname()
        assert shown == {**before, "status": "failing"}

    unchanged(1)
    worked = cli_proc("worker", "--max-steps", "1", "--idle-exit", "1", "--agent", "uwf-mock")
    failure = worked.jsonl()[0]
    assert (failure["thread"], failure["exit"]) == (thread, 5)
    unchanged(2)

    # what the line says to do: go on without the directory in a new thread, end the old one
    forked = ok(cli("thread", "fork", before["head"], "--no-cwd"))["thread"]
    assert "cwd" not in ok(cli("thread", "show", forked))
    stepped = cli_proc("thread", "step", forked, "--agent", scenario({"planner": [v1.PLAN]}))
    assert stepped.code == 0, stepped.err
    assert ok(cli("thread", "kill", thread))["killed"] is True


def test_thread_start_refuses_a_working_directory_that_is_not_one(
    cli: Any, project: Path, tmp_path: Path, snapshot: Any, root: Path
) -> None:
    ok(cli("workflow", "put", project / ".workflows" / "review"))
    before = snapshot(root)
    missing = tmp_path / "nope"
    r = cli("thread", "start", "review", "-p", "x", "--cwd", missing)
    assert (r.code, r.err) == (1, f"error: working directory does not exist: {missing}\n")
    afile = tmp_path / "file"
    afile.write_text("")
    r = cli("thread", "start", "review", "-p", "x", "--cwd", afile)
    assert (r.code, r.err) == (1, f"error: working directory is not a directory: {afile}\n")
    r = cli("thread", "start", "review", "-p", "x", "--cwd", "a\nb")
    assert r.err == 'error: working directory must be one line of printable characters: "a\\nb"\n'
    assert snapshot(root) == before


def test_a_project_workflow_is_found_from_the_thread_directory(
    cli: Any, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # no .workflows here
    assert cli("thread", "start", "review", "-p", "x").code == 1
    started = ok(cli("thread", "start", "review", "-p", "x", "--cwd", project))
    assert ok(cli("thread", "show", started["thread"]))["cwd"] == str(project)


def test_the_python_api_starts_a_thread_in_a_directory(project: Path, root: Path) -> None:
    """Issue 27's evals start threads in a fresh directory each: ``lifecycle.start(cwd=…)``."""
    from uwf.backend import open_backend
    from uwf.engine.threads import lifecycle

    with open_backend() as backend:
        started = lifecycle.start(backend, "review", "Fix it", cwd=project / "work")
        record = backend.threads.get(started["thread"])
        assert record is not None and record.info.cwd == str(project / "work")
        assert lifecycle.show(backend, started["thread"])["cwd"] == str(project / "work")


# -- suspension by an agent that writes its own nodes -----------------------------------------

SELF_WRITER = """\
import json, subprocess, sys
thread, role = sys.argv[1], sys.argv[2]
def uwf(*args):
    return json.loads(subprocess.check_output(["uwf", *args]))
show = uwf("thread", "show", thread)
schema = uwf("cas", "get", show["workflow"])["payload"]["roles"][role]["meta"]
output = uwf("cas", "put", schema, json.dumps({"$status": "$SUSPEND", "reason": "need a key"}))
detail = uwf("cas", "put-text", "asked for a key")
kinds = {s["title"]: s["hash"] for s in uwf("cas", "schema", "list")}
step = {"start": show["head"], "prev": None, "role": role, "output": output["hash"],
        "detail": detail["hash"], "agent": "self-writer", "depth": 1}
print(uwf("cas", "put", kinds["StepNode"], json.dumps(step))["hash"])
"""


def test_an_output_that_suspends_is_never_routed(
    cli: Any, cli_proc: Any, any_store: str, project: Path, tmp_path: Path
) -> None:
    script = tmp_path / "self_writer.py"
    script.write_text(SELF_WRITER)
    thread = ok(cli("thread", "start", "review", "-p", "x"))["thread"]
    head = ok(cli("thread", "show", thread))["head"]
    r = cli_proc("thread", "step", thread, "--agent", f"{sys.executable} {script}")
    assert r.code == 6, r.err
    assert r.err.splitlines()[-1].startswith(
        f"error: thread {thread} waits for planner: the agent suspended the step (need a key)"
    )
    shown = ok(cli("thread", "show", thread))
    assert (shown["head"], shown["status"]) == (head, "waiting")
    assert shown["waiting"]["reason"] == "$SUSPEND: need a key"


def test_the_example_runs_as_the_readme_shows(cli: Any) -> None:
    """README, "Workflows written for uwf 0.8": examples/release-notes with its mock."""
    mock = f"uwf-mock --scenario {EXAMPLES / 'release-notes.mock.yaml'}"
    ok(cli("workflow", "put", EXAMPLES / "release-notes"))
    source = cli("workflow", "show", "release-notes", "--source").out
    assert source.startswith("==> index.yaml <==\n# A version-1 workflow")
    thread = ok(cli("thread", "start", "release-notes", "-p", "uwf 2.1", "--cwd", "."))["thread"]
    waits = cli("thread", "step", thread, "--agent", mock)
    assert waits.code == 6 and "(Which version is this release?)" in waits.err
    assert (
        ok(cli("thread", "resume", thread, "-p", "2.1.0", "--agent", mock))["role"] == "collector"
    )
    done = cli("thread", "step", thread, "-c", "10", "--agent", mock)
    assert [line["role"] for line in done.jsonl()] == ["writer", "editor", "writer", "editor"]
    assert done.jsonl()[-1]["status"] == "completed"
    steps = steps_of(cli, thread)
    assert steps[1]["node"]["edgePrompt"] == (
        "Release 2.1.0 has 2 changes:\n- Faster start-up\n- Folder workflows\n"
    )
    assert steps[3]["node"]["edgePrompt"] == "Revise: Name the issue of each change.\n\nAlmost."


# -- a single-file workflow, every command a process of its own ------------------------------

NOTES = """\
version: 1
description: Collect the changes of a release, then write its notes.
roles:
  collector:
    goal: List the changes of the release.
    frontmatter:
      oneOf:
        - type: object
          properties:
            $status: {const: collected}
            version: {type: string}
            changes: {type: array, items: {type: string}}
          required: [$status, version, changes]
        - type: object
          properties:
            $status: {const: $SUSPEND}
            reason: {type: string}
          required: [$status, reason]
  writer:
    goal: Write the release notes.
    frontmatter:
      oneOf:
        - type: object
          properties:
            $status: {const: written}
            title: {type: string}
          required: [$status, title]
        - type: object
          properties:
            $status: {const: unsure}
            title: {type: string}
          required: [$status, title]
graph:
  $START:
    new:
      role: collector
      prompt: "Collect the changes of {{ _body }}."
  collector:
    collected:
      role: writer
      prompt: |-
        {{ version }}: {{ changes | size }} changes.
        {% for c in changes %}* {{ c | capitalize }}
        {% endfor %}
  writer:
    written: {role: $END}
    unsure:
      role: writer
      prompt: "Write \\"{{ title | downcase }}\\" again: {{ _body }}"
"""

ASKS = "---\n$status: $SUSPEND\nreason: Which version?\n---\n"
COLLECTED = "---\n$status: collected\nversion: 2.1.0\nchanges: [faster start, folders]\n---\n"
UNSURE = "---\n$status: unsure\ntitle: Notes 2.1\n---\nToo short."
WRITTEN = "---\n$status: written\ntitle: uwf 2.1\n---\n# uwf 2.1\n"


def test_a_single_file_workflow_runs_to_end_through_the_command_line(
    cli_proc: Any, any_store: str, tmp_path: Path, scenario: Any
) -> None:
    """``uwf`` in a subprocess for every command, on both backends: a one-file version-1
    workflow is stored, its thread is suspended by its agent on the way, resumed with
    ``thread resume -p``, and runs to ``$END``."""

    def run(*args: Any, code: int = 0) -> Any:
        result = cli_proc(*args)
        assert result.code == code, result.err
        return result

    path = tmp_path / "notes.yaml"
    path.write_text(NOTES)
    assert json.loads(run("workflow", "check", path).out)[0]["problems"] == []
    put = json.loads(run("workflow", "put", path).out)
    assert put["name"] == "notes"
    assert run("workflow", "show", "notes", "--source").out == NOTES
    agent = scenario({"collector": [{"attempts": [ASKS, COLLECTED]}], "writer": [UNSURE, WRITTEN]})
    thread = json.loads(run("thread", "start", "notes", "-p", "uwf 2.1").out)["thread"]

    waits = run("thread", "step", thread, "--agent", agent, code=6)
    assert waits.err.splitlines()[-1].startswith(
        f"error: thread {thread} waits for collector: the agent suspended the step (Which version?)"
    )
    shown = json.loads(run("thread", "show", thread).out)
    assert (shown["status"], shown["waiting"]["reason"]) == ("waiting", "$SUSPEND: Which version?")
    resumed = json.loads(run("thread", "resume", thread, "-p", "2.1.0", "--agent", agent).out)
    assert (resumed["role"], resumed["status"]) == ("collector", "active")

    done = run("thread", "step", thread, "-c", "10", "--agent", agent)
    assert [(x["role"], x["status"], x["done"]) for x in done.jsonl()] == [
        ("writer", "active", False),
        ("writer", "completed", True),
    ]
    shown = json.loads(run("thread", "show", thread).out)
    assert (shown["status"], shown["steps"], shown["workflow"]) == ("completed", 3, put["hash"])
    steps = json.loads(run("thread", "steps", thread).out)["steps"][1:]
    assert [(s["role"], s["output"]["$status"]) for s in steps] == [
        ("collector", "collected"),
        ("writer", "unsure"),
        ("writer", "written"),
    ]
    prompts = [json.loads(run("cas", "get", s["hash"]).out)["payload"]["edgePrompt"] for s in steps]
    assert prompts == [
        "Collect the changes of uwf 2.1.\n\n## Resumed\n\nYou suspended this step: Which "
        "version?\nA person resumed it and wrote:\n\n2.1.0",
        "2.1.0: 2 changes.\n* Faster start\n* Folders\n",
        'Write "notes 2.1" again: Too short.',
    ]
    read = run("thread", "read", thread, "--quota", "100000").out
    assert "## Step 3: writer" in read and "# uwf 2.1" in read
    listed = json.loads(run("thread", "list", "--all").out)
    assert [(t["thread"], t["status"]) for t in listed] == [(thread, "completed")]
