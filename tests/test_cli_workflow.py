"""`uwf workflow put/show/list/history/rollback` and the workflow resolution of `thread start`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rootfiles import open_store
from support import EXAMPLES
from uwf.backend.fs import FsBackend
from uwf.cas.schema import meta_hash
from uwf.engine.workflows.stored import resolve_for_start
from uwf.protocol import schemas
from uwf.util.base32 import is_hash

SOLVE = EXAMPLES / "solve-issue.yaml"


def variant(
    directory: Path, description: str, name: str = "solve-issue", ext: str = ".yaml"
) -> Path:
    """A copy of solve-issue with another description (so another hash)."""
    directory.mkdir(parents=True, exist_ok=True)
    text = SOLVE.read_text(encoding="utf-8")
    lines = [
        f"description: {json.dumps(description)}" if line.startswith("description:") else line
        for line in text.splitlines()
    ]
    text = "\n".join(lines) + "\n"
    if name != "solve-issue":
        text = text.replace("name: solve-issue", f"name: {name}", 1)
    path = directory / f"{name}{ext}"
    path.write_text(text, encoding="utf-8")
    return path


def put(cli: Any, path: Path) -> str:
    result = cli("workflow", "put", path)
    assert result.code == 0, result.err
    h = result.json()["hash"]
    assert is_hash(h)
    return str(h)


def description_of(root: Path, h: str) -> str:
    node = open_store(root).get(h)
    assert node is not None and node.type == schemas.hashes().workflow
    return str(node.payload["description"])


def log_tags(root: Path) -> list[str]:
    tags = []
    for path in (root / "logs").glob("*.jsonl"):
        tags += [json.loads(line)["tag"] for line in path.read_text().splitlines()]
    return tags


# -- put ---------------------------------------------------------------------------------


def test_put_prints_name_and_hash_and_registers(cli: Any, root: Path) -> None:
    result = cli("workflow", "put", SOLVE)
    assert result.code == 0
    assert result.err == ""
    out = result.json()
    assert list(out) == ["name", "hash"]
    assert out["name"] == "solve-issue"
    registry = (root / "registry.yaml").read_text()
    assert f'"solve-issue": "{out["hash"]}"\n' in registry
    node = open_store(root).get(out["hash"])
    assert node is not None and node.type == schemas.hashes().workflow
    assert "H5R9C2X7" in log_tags(root)


def test_put_twice_is_idempotent(cli: Any, root: Path, snapshot: Any) -> None:
    first = cli("workflow", "put", SOLVE)
    before = snapshot(root)
    second = cli("workflow", "put", SOLVE)
    assert second.code == 0
    assert second.out == first.out
    assert snapshot(root) == before


def test_add_is_a_hidden_alias_of_put(cli: Any) -> None:
    added = cli("workflow", "add", SOLVE)
    assert added.code == 0
    assert added.out == cli("workflow", "put", SOLVE).out
    help_text = cli("workflow", "--help").out
    assert "put" in help_text
    assert " add " not in help_text


def test_put_prints_warnings_on_stderr(cli: Any, tmp_path: Path) -> None:
    path = variant(tmp_path, "with an unreachable role")
    text = path.read_text().replace(
        "\ngraph:\n",
        "\n  idle:\n    description: d\n    goal: g\n    capabilities: []\n    procedure: p\n"
        "    output: o\n    meta: {type: object, properties: {x: {type: string}}}\n"
        "\ngraph:\n  idle:\n    _: {role: $END, prompt: done}\n",
    )
    path.write_text(text)
    result = cli("workflow", "put", path)
    assert result.code == 0
    assert result.err == "warning: roles.idle: not reachable from $START\n"
    assert result.json()["name"] == "solve-issue"


def test_put_through_the_installed_script(cli_proc: Any, root: Path) -> None:
    result = cli_proc("workflow", "put", SOLVE)
    assert result.code == 0, result.err
    h = result.json()["hash"]
    assert f'"solve-issue": "{h}"' in (root / "registry.yaml").read_text()


def test_bad_file_through_the_installed_script(cli_proc: Any, tmp_path: Path, root: Path) -> None:
    path = tmp_path / "solve-issue.yaml"
    path.write_text(SOLVE.read_text().replace("role: $END", "role: nowhere"))
    result = cli_proc("workflow", "put", path)
    assert result.code == 1
    lines = result.err.splitlines()
    assert lines[0] == f"error: invalid workflow {path}: 1 problem"
    assert lines[1].startswith('  - graph.reviewer.approved: routes to unknown role "nowhere"')
    assert "Traceback" not in result.err
    assert result.out == ""
    assert not root.exists()


# -- show ------------------------------------------------------------------------------


def test_any_file_stem_safe_name_works_end_to_end(cli_proc: Any, tmp_path: Path) -> None:
    """v0.5.0 accepts any name equal to its file stem: `2026-review`, `review.v2`, a name
    starting with a digit, registered or project-local."""
    registered = put(cli_proc, variant(tmp_path / "wf", "dated", name="2026-review"))
    variant(Path.cwd() / ".workflows", "local", name="review.v2")
    listed = cli_proc("workflow", "list").json()
    assert [(w["name"], w["origin"]) for w in listed] == [
        ("review.v2", "local"),
        ("2026-review", "global"),
    ]
    for name in ("2026-review", "review.v2"):
        started = cli_proc("thread", "start", name, "-p", "go")
        assert started.code == 0, started.err
    assert cli_proc("workflow", "show", "2026-review").json()["hash"] == registered
    hashlike = cli_proc("workflow", "put", variant(tmp_path / "wf", "x", name="0123456789ABC"))
    assert hashlike.code == 1
    assert hashlike.err.splitlines()[1] == (
        '  - name: "0123456789ABC" would be ambiguous with a hash '
        "(a valid 13-character hash is never a name)"
    )


def test_show_by_name_and_by_hash(cli: Any) -> None:
    h = put(cli, SOLVE)
    by_name = cli("workflow", "show", "solve-issue")
    assert by_name.code == 0
    out = by_name.json()
    assert list(out) == ["hash", "name", "type", "payload", "timestamp"]
    assert out["hash"] == h
    assert out["name"] == "solve-issue"
    assert out["type"] == schemas.hashes().workflow
    payload = out["payload"]
    assert list(payload["roles"]) == ["planner", "developer", "reviewer"]
    for role in payload["roles"].values():
        assert is_hash(role["meta"])
    assert payload["graph"]["reviewer"]["rejected"]["role"] == "developer"
    assert cli("workflow", "show", h).out == by_name.out


def test_show_names_only_the_current_version(cli: Any, tmp_path: Path) -> None:
    old = put(cli, variant(tmp_path / "v1", "first"))
    put(cli, variant(tmp_path / "v2", "second"))
    out = cli("workflow", "show", old).json()
    assert out["name"] is None
    assert out["payload"]["description"] == "first"


def test_show_in_yaml(cli: Any) -> None:
    h = put(cli, SOLVE)
    result = cli("workflow", "show", "solve-issue", "--format", "yaml")
    assert result.code == 0
    assert f'hash: "{h}"' in result.out


# -- list ------------------------------------------------------------------------------


def test_list_is_empty_at_first(cli: Any) -> None:
    assert cli("workflow", "list").json() == []


def test_list_puts_project_workflows_first(cli: Any, tmp_path: Path) -> None:
    solve = put(cli, SOLVE)
    put(cli, EXAMPLES / "debate.yaml")
    local = Path.cwd() / ".workflows"
    local.mkdir()
    for name in ("debate.yaml", "beta.yml", "alpha.yaml", "notes.txt", "-x.yaml"):
        (local / name).write_text("not read\n")
    (local / "dir.yaml").mkdir()
    assert cli("workflow", "list").json() == [
        {"name": "alpha", "hash": "(local)", "origin": "local"},
        {"name": "beta", "hash": "(local)", "origin": "local"},
        {"name": "debate", "hash": "(local)", "origin": "local"},
        {"name": "solve-issue", "hash": solve, "origin": "global"},
    ]


# -- history and rollback ------------------------------------------------------------------


def test_history_lists_every_version_oldest_first(cli: Any, tmp_path: Path) -> None:
    v1 = put(cli, variant(tmp_path / "v1", "first"))
    put(cli, EXAMPLES / "debate.yaml")
    v2 = put(cli, variant(tmp_path / "v2", "second"))
    result = cli("workflow", "history", "solve-issue")
    assert result.code == 0
    versions = result.json()
    assert [v["hash"] for v in versions] == [v1, v2]
    assert [v["current"] for v in versions] == [False, True]
    assert versions[0]["timestamp"] <= versions[1]["timestamp"]
    assert list(versions[0]) == ["hash", "timestamp", "current"]


def test_rollback_moves_the_registry_entry(cli: Any, root: Path, tmp_path: Path) -> None:
    v1 = put(cli, variant(tmp_path / "v1", "first"))
    v2 = put(cli, variant(tmp_path / "v2", "second"))
    result = cli("workflow", "rollback", "solve-issue", v1)
    assert result.code == 0, result.err
    assert result.json() == {"name": "solve-issue", "hash": v1, "previous": v2}
    assert f'"solve-issue": "{v1}"' in (root / "registry.yaml").read_text()
    assert cli("workflow", "show", "solve-issue").json()["hash"] == v1
    assert [v["current"] for v in cli("workflow", "history", "solve-issue").json()] == [True, False]
    assert "T3G8B5N2" in log_tags(root)


# -- bad input: exit 1, one error line, nothing changed --------------------------------------


def _bad_cases(tmp_path: Path, debate: str) -> list[tuple[list[str], str]]:
    broken = tmp_path / "broken" / "solve-issue.yaml"
    broken.parent.mkdir()
    broken.write_text(SOLVE.read_text().replace("enum: [approved, rejected]", "enum: [approved]"))
    listdoc = tmp_path / "list.yaml"
    listdoc.write_text("- a\n")
    badyaml = tmp_path / "bad.yaml"
    badyaml.write_text("invalid: yaml: : :\n")
    other = tmp_path / "other.yaml"
    other.write_text(SOLVE.read_text())
    missing = tmp_path / "missing.yaml"
    return [
        (["workflow", "put", str(missing)], f"file not found: {missing}"),
        (
            ["workflow", "put", str(listdoc)],
            f"invalid workflow YAML in {listdoc}: expected a mapping with name, description, "
            "roles and graph",
        ),
        (["workflow", "put", str(badyaml)], f"invalid YAML in {badyaml}: "),
        (["workflow", "put", str(broken)], f"invalid workflow {broken}: 1 problem"),
        (["workflow", "put", str(other)], f"invalid workflow {other}: 1 problem"),
        (["workflow", "add", str(missing)], f"file not found: {missing}"),
        (["workflow", "show", "nope"], "workflow not found: nope"),
        (["workflow", "show", "0000000000000"], "CAS node not found: 0000000000000"),
        (["workflow", "show", meta_hash()], f"node {meta_hash()} is not a Workflow (type "),
        (["workflow", "show", "  "], "workflow ID cannot be empty"),
        (["workflow", "history", "nope"], "workflow not found: nope"),
        (
            ["workflow", "rollback", "solve-issue", "xyz"],
            'invalid hash: "xyz" (expected 13 upper-case Crockford Base32 characters)',
        ),
        (
            ["workflow", "rollback", "solve-issue", "0000000000000"],
            "CAS node not found: 0000000000000",
        ),
        (
            ["workflow", "rollback", "solve-issue", debate],
            f'workflow {debate} is named "debate", not "solve-issue"',
        ),
        (
            ["workflow", "rollback", "--", "-rf", debate],
            '"-rf" is not a valid workflow name (letters, digits, _, - and ., '
            "starting with a letter, a digit or _, at most 64 characters)",
        ),
    ]


def test_bad_input_fails_cleanly_and_changes_nothing(
    cli: Any, root: Path, tmp_path: Path, snapshot: Any
) -> None:
    put(cli, SOLVE)
    debate = put(cli, EXAMPLES / "debate.yaml")
    for args, message in _bad_cases(tmp_path, debate):
        before = snapshot(root)
        result = cli(*args)
        assert result.code == 1, (args, result.err)
        assert result.out == ""
        first = result.err.splitlines()[0]
        assert first.startswith(f"error: {message}"), (args, first)
        assert sum(line.startswith("error:") for line in result.err.splitlines()) == 1
        assert "Traceback" not in result.err
        assert snapshot(root) == before, args


def test_invalid_file_lists_every_problem(cli: Any, tmp_path: Path) -> None:
    path = tmp_path / "wrong-name.yaml"
    path.write_text(
        SOLVE.read_text()
        .replace("role: $END", "role: nowhere")
        .replace("enum: [approved, rejected]", "enum: [approved, rejected, pending]")
    )
    result = cli("workflow", "put", path)
    assert result.code == 1
    assert result.err.splitlines() == [
        f"error: invalid workflow {path}: 3 problems",
        '  - workflow name mismatch: file "wrong-name.yaml" implies name "wrong-name" '
        'but YAML declares name "solve-issue"',
        '  - graph.reviewer.approved: routes to unknown role "nowhere" '
        "(roles: developer, planner, reviewer)",
        '  - graph.reviewer: no edge for status "pending" declared in roles.reviewer.meta',
    ]


# -- resolve_for_start (docs/format.md, "uwf's schemas") -------------------------------------------


def test_resolve_a_stored_hash(cli: Any, root: Path) -> None:
    h = put(cli, SOLVE)
    assert resolve_for_start(FsBackend(root), h, Path.cwd()) == h
    assert resolve_for_start(FsBackend(root), f"  {h}\n", Path.cwd()) == h


def test_resolve_an_absolute_path_stores_but_does_not_register(root: Path, tmp_path: Path) -> None:
    path = variant(tmp_path / "files", "absolute")
    h = resolve_for_start(FsBackend(root), str(path), Path.cwd())
    assert description_of(root, h) == "absolute"
    assert not (root / "registry.yaml").exists()


def test_resolve_a_relative_path(root: Path) -> None:
    variant(Path.cwd() / "subdir", "relative", name="x")
    h = resolve_for_start(FsBackend(root), "subdir/x.yaml", Path.cwd())
    assert description_of(root, h) == "relative"


def test_resolve_local_workflow_dir_in_cwd_and_parent(root: Path) -> None:
    cwd = Path.cwd()
    variant(cwd / ".workflow", "here", name="here")
    variant(cwd / ".workflow", "as yml", name="yml-one", ext=".yml")
    child = cwd / "a" / "b"
    child.mkdir(parents=True)
    assert description_of(root, resolve_for_start(FsBackend(root), "here", cwd)) == "here"
    assert description_of(root, resolve_for_start(FsBackend(root), "here", child)) == "here"
    assert description_of(root, resolve_for_start(FsBackend(root), "yml-one", child)) == "as yml"


def test_resolve_prefers_workflow_dir_and_closer_dirs(root: Path) -> None:
    cwd = Path.cwd()
    child = cwd / "child"
    variant(cwd / ".workflows", "plural")
    variant(cwd / ".workflow", "singular")
    backend = FsBackend(root)
    assert description_of(root, resolve_for_start(backend, "solve-issue", cwd)) == "singular"
    variant(child / ".workflows", "closer")
    assert description_of(root, resolve_for_start(backend, "solve-issue", child)) == "closer"


def test_resolve_priority_path_then_local_then_registry(
    cli: Any, root: Path, tmp_path: Path
) -> None:
    registered = put(cli, variant(tmp_path / "reg", "registered"))
    cwd = Path.cwd()
    assert resolve_for_start(FsBackend(root), "solve-issue", cwd) == registered
    variant(cwd / ".workflows", "local")
    assert description_of(root, resolve_for_start(FsBackend(root), "solve-issue", cwd)) == "local"
    path = variant(tmp_path / "explicit", "explicit")
    assert description_of(root, resolve_for_start(FsBackend(root), str(path), cwd)) == "explicit"
    assert (root / "registry.yaml").read_text().count(registered) == 1


@pytest.mark.parametrize(
    ("ident", "message"),
    [
        ("", "workflow ID cannot be empty"),
        ("  \t ", "workflow ID cannot be empty"),
        ("0000000000000", "CAS node not found: 0000000000000"),
        ("a" * 40, f"workflow not found: {'a' * 40}"),
        (
            "0123456789abcdef0123456789abcdef01234567",
            "workflow not found: 0123456789abcdef0123456789abcdef01234567",
        ),
        ("nothing", "workflow not found: nothing"),
        ("-rf", "workflow not found: -rf"),
    ],
)
def test_resolve_failures(root: Path, ident: str, message: str) -> None:
    from uwf.util.errors import UwfError

    with pytest.raises(UwfError) as info:
        resolve_for_start(FsBackend(root), ident, Path.cwd())
    assert info.value.message == message


@pytest.mark.parametrize("ident", ["0123456789ABC.yaml", "subdir/x.yaml", "sub\\x", "x.yml"])
def test_path_like_ids_are_paths(root: Path, ident: str) -> None:
    from uwf.util.errors import NotFound

    with pytest.raises(NotFound) as info:
        resolve_for_start(FsBackend(root), ident, Path.cwd())
    assert info.value.message == f"file not found: {Path.cwd() / ident}"


def test_resolve_reports_local_file_problems_with_the_path(root: Path, snapshot: Any) -> None:
    from uwf.util.errors import InvalidInput

    cwd = Path.cwd()
    local = cwd / ".workflow"
    local.mkdir()
    cases = {
        "badyaml": ("invalid: yaml: : :\n", f"invalid YAML in {local / 'badyaml.yaml'}: "),
        "listdoc": (
            "- a\n",
            f"invalid workflow YAML in {local / 'listdoc.yaml'}: expected a "
            "mapping with name, description, roles and graph",
        ),
        "mismatch": (
            SOLVE.read_text(),
            f"invalid workflow {local / 'mismatch.yaml'}: 1 problem\n"
            '  - workflow name mismatch: file "mismatch.yaml" implies name "mismatch" '
            'but YAML declares name "solve-issue"',
        ),
    }
    before = snapshot(root)
    for name, (text, message) in cases.items():
        (local / f"{name}.yaml").write_text(text)
        with pytest.raises(InvalidInput) as info:
            resolve_for_start(FsBackend(root), name, cwd)
        assert info.value.message.startswith(message), name
    assert snapshot(root) == before


def test_resolve_registry_entry_to_a_missing_node(root: Path) -> None:
    from rootfiles import RootFiles
    from uwf.util.errors import NotFound

    with RootFiles(root).registry.edit() as registry:
        registry["gone"] = "0000000000001"
    with pytest.raises(NotFound) as info:
        resolve_for_start(FsBackend(root), "gone", Path.cwd())
    assert info.value.message == "CAS node not found: 0000000000001"


# -- check -------------------------------------------------------------------------------


def test_check_runs_every_check_of_put_and_writes_nothing(
    cli_proc: Any, root: Path, tmp_path: Path, snapshot: Any
) -> None:
    (tmp_path / "bad").mkdir()
    broken = tmp_path / "bad" / "solve-issue.yaml"
    broken.write_text(SOLVE.read_text().replace("role: developer", "role: develper", 1))
    listdoc = tmp_path / "listdoc.yaml"
    listdoc.write_text("- a\n")
    before = snapshot(root)
    result = cli_proc("workflow", "check", SOLVE, broken, listdoc, tmp_path / "none.yaml")
    assert snapshot(root) == before
    assert result.code == 1
    out = result.json()
    assert [(r["file"], r["name"], r["problems"] == []) for r in out] == [
        (str(SOLVE), "solve-issue", True),
        (str(broken), None, False),
        (str(listdoc), None, False),
        (str(tmp_path / "none.yaml"), None, False),
    ]
    assert out[1]["problems"][0].startswith('graph.planner._: routes to unknown role "develper"')
    assert result.err.splitlines() == [
        f"error: {broken}: {out[1]['problems'][0]}",
        f"error: {listdoc}: invalid workflow YAML in {listdoc}: expected a mapping with name, "
        "description, roles and graph",
        f"error: {tmp_path / 'none.yaml'}: file not found: {tmp_path / 'none.yaml'}",
    ]
    # the hash check reports is the one put stores
    assert out[0]["hash"] == put(cli_proc, SOLVE)


def test_check_exits_0_with_warnings_on_stderr(cli: Any, tmp_path: Path) -> None:
    text = SOLVE.read_text(encoding="utf-8")
    path = tmp_path / "solve-issue.yaml"
    path.write_text(text.replace("{{", "{{nots}} {{", 1), encoding="utf-8")
    result = cli("workflow", "check", path)
    assert result.code == 0, result.err
    assert result.json()[0]["problems"] == []
    assert result.err.startswith(f"warning: {path}: graph.")
    assert "{{nots}} is not a field of roles." in result.err
    put_result = cli("workflow", "put", path)
    assert put_result.code == 0
    assert put_result.err.startswith("warning: graph.")


def test_put_warns_about_a_status_without_enum(cli: Any, tmp_path: Path) -> None:
    text = SOLVE.read_text(encoding="utf-8")
    assert "status: { type: string, enum: [approved, rejected] }" in text
    path = tmp_path / "solve-issue.yaml"
    path.write_text(
        text.replace(
            "status: { type: string, enum: [approved, rejected] }", "status: { type: string }"
        ),
        encoding="utf-8",
    )
    result = cli("workflow", "put", path)
    assert result.code == 0, result.err
    assert result.err == (
        "warning: roles.reviewer.meta: properties.status has no enum, so its edges cannot be "
        "checked: a step whose status has no edge fails at run time (list the statuses in "
        "status.enum)\n"
    )


# -- one discovery rule for list and start ------------------------------------------------


def test_list_shows_what_thread_start_finds_up_the_tree(cli: Any, root: Path) -> None:
    top = Path.cwd()
    (top / ".workflow").mkdir()
    (top / ".workflows").mkdir()
    deep = top / "a" / "b"
    (deep / ".workflows").mkdir(parents=True)
    variant(top / ".workflow", "top .workflow")
    variant(top / ".workflows", "top .workflows", name="debate")
    variant(deep / ".workflows", "closest", name="debate", ext=".yml")
    variant(top / ".workflows", "only up", name="planner")
    registered = put(cli, EXAMPLES / "analyze-topic.yaml")
    listed = FsBackend(root)
    from uwf.engine.workflows import stored as workflows

    assert workflows.list_workflows(listed, deep) == [
        {"name": "debate", "hash": "(local)", "origin": "local"},
        {"name": "planner", "hash": "(local)", "origin": "local"},
        {"name": "solve-issue", "hash": "(local)", "origin": "local"},
        {"name": "analyze-topic", "hash": registered, "origin": "global"},
    ]
    for name, description in (
        ("debate", "closest"),
        ("planner", "only up"),
        ("solve-issue", "top .workflow"),
    ):
        h = resolve_for_start(listed, name, deep)
        assert description_of(root, h) == description
