"""`workflowPaths` (docs/format.md, "Workflow directories"): directories of config.yaml that
hold workflow files, searched by `thread start <name>` when the name is not stored, by
`workflow put/check/graph <name>`, and listed by `workflow list`. Both backends: the
registry decides which name is stored."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import EXAMPLES

pytestmark = pytest.mark.usefixtures("any_store")  # the filesystem and PostgreSQL

SOLVE = (EXAMPLES / "solve-issue.yaml").read_text()


def flows(tmp_path: Path, name: str, description: str, folder: bool = False) -> Path:
    """A solve-issue workflow named ``name`` with ``description``, in the directory
    ``tmp_path/<where>``: ``<name>.yaml``, or ``<name>/index.yaml``."""
    doc = yaml.safe_load(SOLVE)
    doc["name"], doc["description"] = name, description
    path = tmp_path / f"{name}.yaml" if not folder else tmp_path / name / "index.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def described(cli: Any, workflow: str) -> str:
    return str(cli("cas", "get", workflow).json()["payload"]["description"])


def test_thread_start_finds_a_name_in_the_workflow_directories_when_it_is_not_stored(
    cli: Any, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    first, second = home / "flows", tmp_path / "shared"
    flows(first, "review", "from ~/flows")
    flows(second, "review", "from shared")  # the first directory that has it wins
    flows(second, "triage", "a folder workflow", folder=True)
    set_paths = cli("config", "set", "workflowPaths", f'["~/flows", "{second}"]')
    assert set_paths.code == 0, set_paths.err

    started = cli("thread", "start", "review", "-p", "Review it")
    assert started.code == 0, started.err
    assert described(cli, started.json()["workflow"]) == "from ~/flows"
    folder = cli("thread", "start", "triage", "-p", "Sort it")
    assert described(cli, folder.json()["workflow"]) == "a folder workflow"
    assert cli("workflow", "show", "review").code == 1  # started from a file: not registered

    # a stored name wins: the registered version runs until the registry changes
    stored = flows(tmp_path / "elsewhere", "review", "registered")
    assert cli("workflow", "put", str(stored)).code == 0
    again = cli("thread", "start", "review", "-p", "Review it")
    assert described(cli, again.json()["workflow"]) == "registered"
    # and a project workflow wins over both
    flows(Path.cwd() / ".workflows", "review", "the project's")
    local = cli("thread", "start", "review", "-p", "Review it")
    assert described(cli, local.json()["workflow"]) == "the project's"

    missing = cli("thread", "start", "nothing-here", "-p", "x")
    assert (missing.code, missing.err) == (1, "error: workflow not found: nothing-here\n")


def test_workflow_put_and_check_take_a_name_from_the_workflow_directories(
    cli: Any, root: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    flows(shared, "review", "shared review")
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text("workflowPaths: [../shared]\n")  # relative to the root
    assert (root / ".." / "shared").resolve() == shared.resolve()

    checked = cli("workflow", "check", "review")
    assert checked.code == 0, checked.err
    assert checked.json()[0]["file"] == str(shared.resolve() / "review.yaml")
    put = cli("workflow", "put", "review")
    assert put.code == 0, put.err
    assert described(cli, put.json()["hash"]) == "shared review"
    assert cli("workflow", "show", "review").json()["hash"] == put.json()["hash"]

    flows(Path.cwd() / ".workflows", "review", "project review")  # the project comes first
    assert described(cli, cli("workflow", "put", "review").json()["hash"]) == "project review"
    shutil.copy(shared / "review.yaml", Path.cwd() / "review")  # a file of that name here wins
    here = cli("workflow", "check", "review")
    assert here.code == 0, here.err
    assert here.json()[0]["file"] == "review"  # read as given, not looked up

    missing = cli("workflow", "put", "ghost")
    assert (missing.code, missing.out) == (1, "")
    assert missing.err == (
        "error: file not found: ghost (nor a workflow of that name in .workflows/ up the tree "
        "or in workflowPaths)\n"
    )
    assert cli("workflow", "put", "ghost.yaml").err == "error: file not found: ghost.yaml\n"


def test_workflow_list_and_graph_show_the_workflow_directories(
    cli: Any, root: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    flows(shared, "review", "shared")
    flows(shared, "triage", "shared", folder=True)
    flows(shared, "solve-issue", "shadowed by the registry")
    (shared / "notes.txt").write_text("not a workflow")
    assert cli("config", "set", "workflowPaths", f'["{shared}"]').code == 0
    assert cli("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
    flows(Path.cwd() / ".workflows", "local-one", "a project workflow")

    listed = cli("workflow", "list")
    assert listed.code == 0, listed.err
    assert [(w["name"], w["origin"], w["hash"]) for w in listed.json()] == [
        ("local-one", "local", "(local)"),
        ("solve-issue", "global", listed.json()[1]["hash"]),
        ("review", "paths", "(file)"),
        ("triage", "paths", "(file)"),
    ]
    table = cli("workflow", "list", "--format", "table").out.splitlines()
    assert table[3].split() == ["review", "paths", "(file)"]

    graph = cli("workflow", "graph", "triage")
    assert graph.code == 0, graph.err
    assert graph.out.startswith("flowchart TD")
    assert cli("workflow", "graph", "ghost").err == "error: workflow not found: ghost\n"
