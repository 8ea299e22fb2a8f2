"""Editing and re-running steps through the real CLI: ``thread fork --output FILE|-``,
``thread fork --edit`` with ``$EDITOR`` as a script, ``thread rerun``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_human import editor  # noqa: F401 - the $EDITOR fixture

NEW_DEV = "---\nstatus: _\nfilesChanged: [b.py]\nsummary: a smaller change\n---\nRewritten by hand."


def to_reviewer(cli: Any, new_thread: Any, scenario: Any) -> tuple[str, str, list[str]]:
    """A solve-issue thread stepped to its developer step: (thread, agent, heads)."""
    thread = new_thread()
    agent = scenario()
    heads = []
    for _ in range(2):
        out = cli("thread", "step", thread, "--agent", agent)
        assert out.code == 0, out.err
        heads.append(out.json()["head"])
    return thread, agent, heads


def test_fork_with_an_output_file_and_from_stdin(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any, tmp_path: Path
) -> None:
    thread, agent, (plan_step, dev_step) = to_reviewer(cli, new_thread, scenario)
    before = cli("thread", "steps", thread).out
    answer = tmp_path / "dev.md"
    answer.write_text(NEW_DEV)
    forked = cli_proc("thread", "fork", dev_step, "--output", str(answer))
    assert forked.code == 0, forked.err
    out = forked.json()
    assert list(out) == ["thread", "head", "forkedFrom"]
    assert out["forkedFrom"] == {"step": dev_step, "edited": True}
    steps = cli("thread", "steps", out["thread"]).json()["steps"]
    assert [s["hash"] for s in steps[1:]] == [plan_step, out["head"]]
    assert steps[2]["output"] == {
        "status": "_",
        "filesChanged": ["b.py"],
        "summary": "a smaller change",
    }
    details = cli("thread", "step-details", out["head"], "--format", "json").json()
    assert (details["via"], details["editedFrom"]) == ("thread fork --output", dev_step)
    assert details["turns"][0]["content"] == "Rewritten by hand."
    assert cli("thread", "steps", thread).out == before  # the original thread is untouched
    # the fork goes on from the edited step
    stepped = cli("thread", "step", out["thread"], "--agent", agent)
    assert stepped.code == 0 and stepped.json()["role"] == "reviewer"

    piped = cli_proc(
        "thread",
        "fork",
        dev_step,
        "--output",
        "-",
        input='{"status": "_", "filesChanged": [], "summary": "nothing"}',
    )
    assert piped.code == 0, piped.err
    assert cli("thread", "steps", piped.json()["thread"]).json()["steps"][2]["output"] == {
        "status": "_",
        "filesChanged": [],
        "summary": "nothing",
    }


def test_fork_with_a_rejected_output_names_the_field_and_creates_nothing(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any, root: Path, snapshot: Any
) -> None:
    thread, _, (plan_step, dev_step) = to_reviewer(cli, new_thread, scenario)
    before = snapshot(root)
    bad = cli_proc("thread", "fork", dev_step, "--output", "-", input="status: _\nsummary: 3\n")
    assert (bad.code, bad.err.strip()) == (
        1,
        'error: output rejected by the schema of role "developer": summary: expected a '
        "string, got an integer; filesChanged: missing (expected a list of strings)",
    )
    start = cli("thread", "steps", thread).json()["steps"][0]["hash"]
    cases = [
        (["--output", "-", "--edit"], 2, "error: give --output or --edit, not both"),
        (
            ["--output", "/nonexistent"],
            1,
            "error: cannot read output /nonexistent: No such file or directory",
        ),
    ]
    for args, code, message in cases:
        out = cli_proc("thread", "fork", dev_step, *args)
        assert (out.code, out.err.strip()) == (code, message)
    on_start = cli_proc("thread", "fork", start, "--output", "-", input="{}")
    assert on_start.err.strip() == (
        f"error: thread fork --output needs a StepNode; {start} is a StartNode"
    )
    assert snapshot(root) == before
    assert plan_step


def test_fork_edit_opens_the_editor_on_the_output_and_asks_again(
    cli: Any,
    cli_proc: Any,
    new_thread: Any,
    scenario: Any,
    editor: Any,  # noqa: F811
) -> None:
    thread, _, (_, dev_step) = to_reviewer(cli, new_thread, scenario)
    editor.script("---\nstatus: _\nfilesChanged: a.py\nsummary: did it\n---\n", NEW_DEV)
    forked = cli_proc("thread", "fork", dev_step, "--edit")
    assert forked.code == 0, forked.err
    shown = editor.seen(0)
    assert shown.startswith(f"---\n# Edit the output of step {dev_step} (developer)")
    assert "filesChanged:  # required, array\n- a.py\n" in shown
    assert "summary: did it  # required, string" in shown
    assert shown.endswith("---\n\nImplemented.\n")  # the step's content after the block
    assert '# rejected: output rejected by the schema of role "developer": filesChanged:' in (
        editor.seen(1)
    )
    details = cli("thread", "step-details", forked.json()["head"], "--format", "json").json()
    assert details["via"] == "thread fork --edit" and details["durationMs"] >= 0

    editor.script(None)  # saved unchanged: nothing is created
    unchanged = cli_proc("thread", "fork", dev_step, "--edit")
    assert (unchanged.code, unchanged.err.strip()) == (
        1,
        "error: the output was left unchanged: no thread was created",
    )
    assert thread


def test_rerun_runs_the_role_again_in_a_new_thread(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any
) -> None:
    thread, _, (plan_step, dev_step) = to_reviewer(cli, new_thread, scenario)
    other = scenario({"developer": ["---\nstatus: _\nfilesChanged: [c.py]\nsummary: again\n---\n"]})
    out = cli_proc(
        "thread",
        "rerun",
        dev_step,
        "--agent",
        other,
        "--edge-prompt",
        "Keep it tiny.",
        "--timeout",
        "30",
    )
    assert out.code == 0, out.err
    line = out.json()
    assert (line["role"], line["rerunOf"], line["status"]) == ("developer", dev_step, "active")
    assert line["thread"] != thread
    steps = cli("thread", "steps", line["thread"]).json()["steps"]
    assert [s["hash"] for s in steps[1:2]] == [plan_step] and steps[2]["hash"] == line["head"]
    assert steps[2]["output"]["filesChanged"] == ["c.py"]
    node = cli("cas", "get", line["head"]).json()["payload"]
    assert node["edgePrompt"] == "Keep it tiny." and node["prev"] == plan_step
    assert cli("thread", "show", thread).json()["head"] == dev_step  # untouched
    # a failing re-run keeps the exit code of the step and names its thread
    failing = scenario({"developer": [{"exit": 1, "stderr": "error: no"}]})
    bad = cli_proc("thread", "rerun", dev_step, "--agent", failing)
    assert bad.code == 5
    assert "(the re-run's thread " in bad.err
    assert f"forked at {plan_step}, was archived as killed)" in bad.err
    assert [t["thread"] for t in cli("thread", "list").json()] == [line["thread"], thread]
    assert json.loads(out.out)["head"] == line["head"]


def test_every_file_or_stdin_argument_is_read_alike(
    cli: Any, cli_proc: Any, new_thread: Any, scenario: Any, tmp_path: Path
) -> None:
    """One reader (cli/options.read_input) for every "a file, or - for stdin" argument: the
    same line for a file that is not UTF-8, whichever option names it, and for stdin."""
    import subprocess

    from support import BIN

    thread, _, (_plan_step, dev_step) = to_reviewer(cli, new_thread, scenario)
    latin1 = tmp_path / "latin1.md"
    latin1.write_bytes("status: _\nsummary: caf\xe9\n".encode("latin-1"))
    for argv, what in (
        (["thread", "fork", dev_step, "--output", str(latin1)], "output"),
        (["thread", "answer", thread, "--file", str(latin1)], "answer"),
        (["thread", "compact", thread, "--text", str(latin1)], "summary"),
    ):
        r = cli_proc(*argv)
        assert (r.code, r.err) == (1, f"error: cannot read {what} {latin1}: not UTF-8 text\n")
    piped = subprocess.run(
        [str(BIN / "uwf"), "thread", "start", "solve-issue", "-p", "-"],
        input=b"caf\xe9",
        capture_output=True,
    )
    assert (piped.returncode, piped.stderr) == (
        1,
        b"error: cannot read task from stdin: not UTF-8 text\n",
    )
