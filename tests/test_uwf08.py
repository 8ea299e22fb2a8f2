"""Moving from uwf 0.8 without rewriting anything (docs/format.md, "Moving from uwf 0.8"):
uwf 0.8's command names (`thread list --limit/--offset`, `workflow validate`), the checks it
made of a version-1 file (`_body` reserved, `$status` a const, each edge's prompt against the
branch of its status, a `.workflow.yaml` file holding its stem), an edge prompt that renders
blank refusing the step, and a thread remembering where it was started. Through the real CLI,
on both backends where the store matters. uwf 0.8's mock scenarios are in
tests/test_uwf08_mock.py, its eval tasks in tests/test_uwf08_evals.py."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml


def ok(result: Any) -> Any:
    assert result.code == 0, result.err
    return result.json()


def write(path: Path, doc: dict[str, Any] | str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False))
    return path


def problems(cli_proc: Any, path: Path) -> list[str]:
    """The problems `workflow check` finds in a file (it exits 1 with them)."""
    result = cli_proc("workflow", "check", path)
    assert result.code == 1, result.err
    found: list[str] = json.loads(result.out)[0]["problems"]
    return found


def branch(status: str, **fields: Any) -> dict[str, Any]:
    """A ``oneOf`` branch of a version-1 schema: ``$status`` fixed, and ``fields``."""
    return {
        "type": "object",
        "properties": {"$status": {"const": status}, **fields},
        "required": ["$status"],
    }


TEXT = {"type": "string"}


def review(reviewer: Any, approved: str = "Ship {{ comments }}.") -> dict[str, Any]:
    """A version-1 workflow: a writer, then a reviewer who approves or sends it back."""
    return {
        "version": 1,
        "roles": {
            "writer": {"frontmatter": {"oneOf": [branch("written", file=TEXT)]}},
            "reviewer": {"frontmatter": reviewer},
        },
        "graph": {
            "$START": {"new": {"role": "writer", "prompt": "Write {{ _body }}"}},
            "writer": {"written": {"role": "reviewer", "prompt": "Review {{ file }}."}},
            "reviewer": {
                "approved": {"role": "$END", "prompt": approved},
                "rejected": {"role": "writer", "prompt": "Fix: {{ reason }}"},
            },
        },
    }


REVIEWER = {"oneOf": [branch("approved", comments=TEXT), branch("rejected", reason=TEXT)]}


# -- 1. thread list --limit/--offset (eval list --limit: tests/test_uwf08_evals.py) ----------


def test_thread_list_takes_uwf_08s_limit_and_offset(
    any_store: str, cli: Any, cli_proc: Any, solve_issue: str
) -> None:
    started = [ok(cli("thread", "start", "solve-issue", "-p", f"task {i}")) for i in range(5)]
    newest_first = [s["thread"] for s in reversed(started)]

    def listed(*args: str) -> list[str]:
        return [row["thread"] for row in ok(cli_proc("thread", "list", *args))]

    assert listed("--limit", "2", "--offset", "1") == newest_first[1:3]
    assert listed("--limit", "2", "--offset", "1") == listed("--take", "2", "--skip", "1")
    assert listed("--limit", "10") == newest_first
    assert listed("--offset", "4") == newest_first[4:]
    for args, message in [
        (["--limit", "abc"], "--limit must be a positive integer"),
        (["--limit", "0"], "--limit must be a positive integer"),
        (["--offset", "-1"], "--offset must be a non-negative integer"),
        (["--limit", "2", "--take", "2"], "--limit is --take by uwf 0.8's name: give one of them"),
        (
            ["--offset", "1", "--skip", "1"],
            "--offset is --skip by uwf 0.8's name: give one of them",
        ),
    ]:
        result = cli_proc("thread", "list", *args)
        assert (result.code, result.out, result.err) == (2, "", f"error: {message}\n"), args


# -- 4. workflow validate ------------------------------------------------------------------


def test_workflow_validate_is_workflow_check_by_uwf_08s_name(cli_proc: Any, tmp_path: Path) -> None:
    good = write(tmp_path / "review.yaml", review(REVIEWER))
    bad = write(tmp_path / "bad.yaml", review(REVIEWER, approved="{{ reason }}"))
    for files in ([good], [good, bad]):
        checked = cli_proc("workflow", "check", *files)
        validated = cli_proc("workflow", "validate", *files)
        assert (validated.code, validated.out, validated.err) == (
            checked.code,
            checked.out,
            checked.err,
        )
    assert validated.code == 1 and json.loads(validated.out)[0]["problems"] == []
    assert cli_proc("workflow", "list").json() == []  # nothing stored
    shown = " ".join(cli_proc("workflow", "validate", "--help").out.split())
    assert (
        "Alias of `uwf workflow check`, the current name (`uwf workflow validate` is its uwf 0.8 "
        "name). Run every check of `workflow put` on files, writing nothing." in shown
    )
    listing = cli_proc("workflow", "--help").out
    assert "validate" not in listing.split("Commands:")[1]  # hidden, as workflow add is


# -- 5. an edge prompt that renders blank --------------------------------------------------

BLANK = {
    "name": "blank",
    "description": "A prompt that can render blank.",
    "roles": {
        role: {
            "description": role,
            "goal": role,
            "capabilities": [],
            "procedure": role,
            "output": role,
            "meta": {"type": "object", "properties": {"note": TEXT}},
        }
        for role in ("a", "b")
    },
    "graph": {
        "$START": {"_": {"role": "a", "prompt": "Write a note."}},
        "a": {"_": {"role": "b", "prompt": "{{note}}"}},
        "b": {"_": {"role": "$END", "prompt": "Done."}},
    },
}
BLANK_NOTE = "---\nnote: '   '\n---\nNothing to say."
NOTE = "---\nnote: Ship it\n---\nSaid it."
REFUSED = (
    'the prompt of graph.a._ renders empty, so "b" would run without an instruction '
    '(template: "{{note}}")'
)


def test_a_blank_edge_prompt_refuses_the_step_and_the_head_stays(
    any_store: str, cli: Any, cli_proc: Any, tmp_path: Path, scenario: Any
) -> None:
    """After a step whose output makes the next prompt blank, that output is not recorded
    (exit 5) and the role answers again; the next role gets the prompt its edge renders."""
    ok(cli("workflow", "put", write(tmp_path / "blank.yaml", BLANK)))
    thread = ok(cli("thread", "start", "blank", "-p", "x"))["thread"]
    start = ok(cli("thread", "show", thread))["head"]
    agent = scenario(
        {"a": [{"attempts": [BLANK_NOTE, NOTE]}], "b": ["---\nnote: done\n---\nDone."]}
    )
    refused = cli_proc("thread", "step", thread, "--agent", agent)
    assert refused.code == 5 and refused.out == ""
    assert refused.err.splitlines()[-1] == (
        f"error: post-step moderator evaluate failed: {REFUSED} (head not moved)"
    )
    assert ok(cli("thread", "show", thread))["head"] == start
    assert cli_proc("thread", "step", thread, "-c", "2", "--agent", agent).code == 0
    steps = ok(cli("thread", "steps", thread))["steps"][1:]
    assert [s["role"] for s in steps] == ["a", "b"]
    assert ok(cli("cas", "get", steps[1]["hash"]))["payload"]["edgePrompt"] == "Ship it"
    assert ok(cli("thread", "show", thread))["status"] == "completed"


def test_a_head_whose_prompt_renders_blank_runs_nothing(
    cli: Any, cli_proc: Any, tmp_path: Path, scenario: Any
) -> None:
    """A head recorded before (here: a step of a workflow version whose prompt had text of
    its own) that now renders blank: the step is refused before anything runs (exit 1);
    forking with an output that fills the prompt goes on. A person's output that would make
    it blank is refused, and so is a blank --edge-prompt."""
    said = {
        **BLANK,
        "graph": {**BLANK["graph"], "a": {"_": {"role": "b", "prompt": "Note: {{note}}"}}},
    }
    ok(cli("workflow", "put", write(tmp_path / "blank.yaml", said)))
    thread = ok(cli("thread", "start", "blank", "-p", "x"))["thread"]
    agent = scenario({"a": [BLANK_NOTE], "b": ["---\nnote: done\n---\nDone."]})
    assert cli_proc("thread", "step", thread, "--agent", agent).code == 0
    step = ok(cli("thread", "show", thread))["head"]
    ok(cli("workflow", "put", write(tmp_path / "blank.yaml", BLANK)))
    onto = ok(cli("thread", "fork", step, "--workflow", "blank"))["thread"]
    head = ok(cli("thread", "show", onto))["head"]
    dry = cli_proc("thread", "step", onto, "--dry-run")
    assert (dry.code, dry.out, dry.err) == (1, "", f"error: moderator evaluate failed: {REFUSED}\n")
    refused = cli_proc("thread", "step", onto, "--agent", agent)
    assert (refused.code, refused.out, refused.err) == (1, "", dry.err)
    shown = ok(cli("thread", "show", onto))
    assert shown["head"] == head and shown["steps"] == 1  # nothing ran, nothing recorded
    assert shown["failure"]["error"] == f"moderator evaluate failed: {REFUSED}"

    blank_file = write(tmp_path / "blank.md", BLANK_NOTE)
    result = cli_proc("thread", "fork", head, "--output", blank_file)
    assert result.code == 1
    assert result.err == f"error: the graph cannot route this output: {REFUSED}\n"
    rerun = cli_proc("thread", "rerun", head, "--edge-prompt", " ", "--agent", agent)
    assert rerun.code == 2
    assert rerun.err.splitlines()[-1].startswith(
        "error: --edge-prompt is blank: the role would run without an instruction (the "
        "re-run's thread"
    )
    fixed = ok(cli("thread", "fork", head, "--output", write(tmp_path / "note.md", NOTE)))
    assert cli_proc("thread", "step", fixed["thread"], "--agent", agent).code == 0
    assert ok(cli("thread", "show", fixed["thread"]))["status"] == "completed"


def test_a_version_1_prompt_of_blanks_is_refused_at_run_time_too(
    cli: Any, cli_proc: Any, tmp_path: Path, scenario: Any
) -> None:
    """Liquid, whitespace around the variable: still blank; an edge to a role needs a prompt
    in the file, and an edge to $END does not."""
    doc = review(REVIEWER)
    doc["graph"]["writer"]["written"]["prompt"] = "  {{ file }}  "
    ok(cli("workflow", "put", write(tmp_path / "review.yaml", doc)))
    thread = ok(cli("thread", "start", "review", "-p", "notes"))["thread"]
    agent = scenario({"writer": ["---\n$status: written\nfile: ''\n---\nNo file."]})
    result = cli_proc("thread", "step", thread, "--agent", agent)
    assert result.code == 5
    assert result.err.splitlines()[-1] == (
        "error: post-step moderator evaluate failed: the prompt of graph.writer.written renders "
        'empty, so "reviewer" would run without an instruction (template: "{{ file }}") (head '
        "not moved)"
    )
    del doc["graph"]["writer"]["written"]["prompt"]
    doc["graph"]["reviewer"]["approved"].pop("prompt")  # to $END: fine
    assert problems(cli_proc, write(tmp_path / "review.yaml", doc)) == [
        'graph.writer.written.prompt: missing: "reviewer" would run without an instruction '
        "(only an edge to $END may leave its prompt out)"
    ]


# -- 6. and 7. what uwf 0.8 refused in a version-1 file ------------------------------------


def test_body_is_reserved_flat_or_in_a_branch(cli_proc: Any, tmp_path: Path) -> None:
    reserved = (
        "_body is reserved: a prompt reads it as the output's text (the markdown after its "
        "frontmatter); give the field another name"
    )
    doc = review({"oneOf": [branch("approved", comments=TEXT), branch("rejected", _body=TEXT)]})
    doc["roles"]["writer"]["frontmatter"] = {
        "type": "object",
        "properties": {"$status": {"const": "written"}, "file": TEXT, "_body": TEXT},
    }
    assert problems(cli_proc, write(tmp_path / "review.yaml", doc)) == [
        f"roles.writer.frontmatter.properties._body: {reserved}",
        f"roles.reviewer.frontmatter.oneOf[1].properties._body: {reserved}",
    ]


CONST = (
    "a version-1 file fixes $status with const, one status per shape (uwf 0.8's rule; not "
    "enum): write oneOf branches, each with $status: {const: <status>} and its own fields"
)


@pytest.mark.parametrize(
    ("reviewer", "approved", "found"),
    [
        (  # only the rejected branch has reason
            REVIEWER,
            "Ship it: {{ reason }}",
            [
                "graph.reviewer.approved.prompt: {{ reason }} is not a field of the output of "
                'roles.reviewer.frontmatter whose $status is "approved" (its fields: $status, '
                "comments)"
            ],
        ),
        (  # enum, flat
            {
                "type": "object",
                "properties": {"$status": {"enum": ["approved", "rejected"]}, "reason": TEXT},
                "required": ["$status"],
            },
            "Ship it.",
            [f"roles.reviewer.frontmatter.properties.$status: {CONST}"],
        ),
        (  # a branch without const
            {"oneOf": [branch("approved", comments=TEXT), {"properties": {"$status": TEXT}}]},
            "Ship it.",
            [f"roles.reviewer.frontmatter.oneOf[1].properties.$status: {CONST}"],
        ),
        (  # a branch without $status among branches with it
            {"oneOf": [branch("approved"), {"properties": {"reason": TEXT}}]},
            "Ship it.",
            [
                f"roles.reviewer.frontmatter.oneOf[1]: $status is missing: {CONST}",
                'graph.reviewer.rejected: roles.reviewer.frontmatter cannot emit status "rejected" '
                '(its status values are ["approved"])',
            ],
        ),
    ],
)
def test_each_prompt_is_checked_against_its_branch_and_status_is_a_const(
    cli_proc: Any, tmp_path: Path, reviewer: Any, approved: str, found: list[str]
) -> None:
    path = write(tmp_path / "review.yaml", review(reviewer, approved))
    assert problems(cli_proc, path) == found
    fixed = write(tmp_path / "review.yaml", review(REVIEWER, "Ship it: {{ comments }}"))
    assert ok(cli_proc("workflow", "put", fixed))["name"] == "review"


def test_a_uwf_05_file_still_only_warns_about_a_missing_field(
    cli_proc: Any, tmp_path: Path
) -> None:
    doc = {**BLANK, "graph": {**BLANK["graph"], "a": {"_": {"role": "b", "prompt": "{{nope}}"}}}}
    result = cli_proc("workflow", "put", write(tmp_path / "blank.yaml", doc))
    assert result.code == 0, result.err
    assert "warning: graph.a._.prompt: {{nope}} is not a field of roles.a.meta" in result.err


# -- 8. <x>.workflow.yaml ------------------------------------------------------------------


def test_a_dot_workflow_file_holds_the_workflow_of_its_stem(
    cli: Any, cli_proc: Any, tmp_path: Path
) -> None:
    named = write(tmp_path / "linear.workflow.yaml", {**review(REVIEWER), "name": "linear"})
    assert ok(cli_proc("workflow", "put", named))["name"] == "linear"
    unnamed = write(tmp_path / "other.workflow.yaml", review(REVIEWER))
    assert ok(cli_proc("workflow", "validate", unnamed))[0]["name"] == "other"
    whole = write(tmp_path / "v2.workflow.yaml", {**BLANK, "name": "v2.workflow"})
    assert ok(cli_proc("workflow", "put", whole))["name"] == "v2.workflow"  # the whole stem
    thread = ok(cli("thread", "start", str(named), "-p", "x"))["thread"]
    assert (
        ok(cli("thread", "show", thread))["workflow"]
        == ok(cli("workflow", "show", "linear"))["hash"]
    )
    e2e = write(tmp_path / "e2e-linear.workflow.yaml", {**review(REVIEWER), "name": "test-linear"})
    assert problems(cli_proc, e2e) == [
        'workflow name mismatch: file "e2e-linear.workflow.yaml" implies name "e2e-linear" but '
        'YAML declares name "test-linear" (name the file test-linear.yaml or '
        "test-linear.workflow.yaml)"
    ]


# -- 9. a thread remembers where it was started ---------------------------------------------

HERE = {
    **BLANK,
    "name": "here",
    "roles": {"a": BLANK["roles"]["a"]},
    "graph": {
        "$START": {"_": {"role": "a", "prompt": "Say where you are."}},
        "a": {"_": {"role": "$END", "prompt": "Done."}},
    },
}
WHERE = """\
import os, sys
sys.stdin.read()
print(f"---\\nnote: {os.getcwd()}\\n---\\nHere.")
"""


def test_a_thread_remembers_where_it_was_started(
    any_store: str,
    cli: Any,
    cli_proc: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Started without --cwd, a thread's agents run where `thread start` ran, wherever the
    step runs; --no-cwd records none (the agent runs where the step runs)."""
    ok(cli("workflow", "put", write(tmp_path / "here.yaml", HERE)))
    script = write(tmp_path / "where.py", WHERE)
    agent = f"uwf-cmd -- {sys.executable} {script}"
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()

    def where(thread: str) -> str:
        head = ok(cli("thread", "show", thread))["head"]
        output = ok(cli("cas", "get", head))["payload"]["output"]
        note: str = ok(cli("cas", "get", output))["payload"]["note"]
        return note

    monkeypatch.chdir(project)
    kept = ok(cli_proc("thread", "start", "here", "-p", "x"))["thread"]
    loose = ok(cli_proc("thread", "start", "here", "-p", "x", "--no-cwd"))["thread"]
    assert ok(cli("thread", "show", kept))["cwd"] == str(project)
    assert "cwd" not in ok(cli("thread", "show", loose))
    monkeypatch.chdir(elsewhere)
    for thread in (kept, loose):
        assert cli_proc("thread", "step", thread, "--agent", agent).code == 0
    assert (where(kept), where(loose)) == (str(project), str(elsewhere))
    assert [e.get("cwd") for e in [ok(cli("thread", "show", t)) for t in (kept, loose)]] == [
        str(project),
        None,
    ]  # the history keeps it

    link = tmp_path / "link"
    link.symlink_to(project)
    monkeypatch.chdir(link)
    linked = cli_proc("thread", "start", "here", "-p", "x", env={"PWD": str(link)})
    assert ok(cli("thread", "show", ok(linked)["thread"]))["cwd"] == str(
        link
    )  # as the shell has it
    both = cli_proc("thread", "start", "here", "-p", "x", "--cwd", project, "--no-cwd")
    assert (both.code, both.err) == (2, "error: --cwd and --no-cwd exclude each other\n")
    assert os.getcwd() == str(project)  # the link resolved


def test_a_rerun_keeps_the_threads_directory_or_records_none_with_no_cwd(
    cli: Any, cli_proc: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`thread rerun` of a thread works where the thread was started; with --no-cwd (a fleet
    whose machines do not share paths) its new thread records none, as `thread start
    --no-cwd` does; --cwd with --no-cwd is refused before anything runs."""
    ok(cli("workflow", "put", write(tmp_path / "here.yaml", HERE)))
    agent = f"uwf-cmd -- {sys.executable} {write(tmp_path / 'where.py', WHERE)}"
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    thread = ok(cli_proc("thread", "start", "here", "-p", "x"))["thread"]
    assert cli_proc("thread", "step", thread, "--agent", agent).code == 0
    monkeypatch.chdir(tmp_path)
    kept = ok(cli_proc("thread", "rerun", thread, "--agent", agent))["thread"]
    loose = ok(cli_proc("thread", "rerun", thread, "--agent", agent, "--no-cwd"))["thread"]
    shown = [ok(cli("thread", "show", t)).get("cwd") for t in (kept, loose)]
    assert shown == [str(project), None]
    both = cli_proc("thread", "rerun", thread, "--cwd", str(project), "--no-cwd")
    assert (both.code, both.err) == (2, "error: --cwd and --no-cwd exclude each other\n")
