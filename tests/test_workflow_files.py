"""Version-1 workflow files, ``!include`` and folder workflows: every refusal with its exact
message (docs/errors.md, "Workflow files"), what a version-1 file may leave out, and where
``thread start`` finds a folder workflow (docs/format.md, "Workflow files: uwf 0.5 and
version 1")."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from uwf.engine.workflows import discovery
from uwf.engine.workflows.files import load_file
from uwf.util.errors import InvalidInput


def v1_doc(**extra: Any) -> dict[str, Any]:
    """A valid version-1 workflow: a ($status ok | $SUSPEND) -> $END."""
    doc: dict[str, Any] = {
        "version": 1,
        "roles": {
            "a": {
                "frontmatter": {
                    "oneOf": [
                        {
                            "type": "object",
                            "properties": {"$status": {"const": "ok"}, "x": {"type": "string"}},
                            "required": ["$status"],
                        },
                        {
                            "type": "object",
                            "properties": {
                                "$status": {"const": "$SUSPEND"},
                                "reason": {"type": "string"},
                            },
                            "required": ["$status", "reason"],
                        },
                    ]
                }
            }
        },
        "graph": {
            "$START": {"new": {"role": "a", "prompt": "Do {{ _body }}"}},
            "a": {"ok": {"role": "$END"}},
        },
    }
    doc.update(extra)
    return doc


def write(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    text = doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(InvalidInput) as info:
        load_file(path)
    lines = info.value.message.split("\n")
    return [line[4:] for line in lines[1:]]


def refusal(path: Path) -> str:
    with pytest.raises(InvalidInput) as info:
        load_file(path)
    return info.value.message


# -- version 1 ---------------------------------------------------------------------------


def test_a_version_1_file_may_leave_out_what_uwf_05_requires(tmp_path: Path) -> None:
    definition = load_file(write(tmp_path / "wf.yaml", v1_doc()))
    assert definition["version"] == 1
    assert definition["name"] == "wf"  # the stem
    assert definition["description"] == ""
    role = definition["roles"]["a"]
    assert [role[k] for k in ("description", "goal", "capabilities", "procedure", "output")] == [
        "",
        "",
        [],
        "",
        "",
    ]
    assert definition["graph"]["a"]["ok"] == {"role": "$END", "prompt": ""}
    assert definition["warnings"] == []


def test_version_1_problems_are_named_precisely(tmp_path: Path) -> None:
    doc = v1_doc(name="other", model="gpt-5")
    doc["roles"]["a"]["temperature"] = 0.2
    doc["graph"]["$START"]["_"] = {"role": "a", "prompt": "x"}
    doc["graph"]["a"]["ok"]["location"] = "{{ x }}"
    doc["graph"]["a"]["$SUSPEND"] = {"role": "a"}
    doc["graph"]["a"]["other"] = {"role": "a", "retries": 3}
    assert problems(write(tmp_path / "wf.yaml", doc)) == [  # the schema's, top to bottom
        'roles.a.temperature: unknown key "temperature" (known keys: description, goal, '
        "capabilities, procedure, output, meta, frontmatter, retry)",
        'graph.a.other.retries: unknown key "retries" (known keys: role, prompt, location)',
        'model: unknown key "model" (known keys: version, name, description, roles, graph, '
        "compactAfter, retry)",
        'workflow name mismatch: file "wf.yaml" implies name "wf" but YAML declares name "other" '
        "(name the file other.yaml or other.workflow.yaml)",
        "graph.a.ok.location: is a template; uwf-py takes location as a literal directory (what "
        "an agent wrote never chooses where the next agent works)",
        "graph.a.$SUSPEND: $SUSPEND is never routed: an output with it suspends the thread "
        "until `uwf thread resume` (remove this edge)",
        'graph.a.other.prompt: missing: "a" would run without an instruction (only an edge to '
        "$END may leave its prompt out)",
        'graph.$START._: $START routes only on "new" (a new thread) and "resume" (a thread '
        "resuming an ended one)",
        'graph.a.other: roles.a.frontmatter cannot emit status "other" (its status values are '
        '["ok","$SUSPEND"])',
    ]


def test_start_needs_new_and_prompts_are_liquid(tmp_path: Path) -> None:
    doc = v1_doc()
    doc["graph"]["$START"] = {"resume": {"role": "a", "prompt": "{{ x | nosuch }}"}}
    doc["graph"]["a"]["ok"]["location"] = ""
    assert problems(write(tmp_path / "wf.yaml", doc)) == [
        'graph.a.ok.location: expected a directory path, got ""',
        "graph.$START.resume.prompt: prompt template does not parse: unknown filter 'nosuch'",
        'graph.$START: no edge for "new" (the edge a new thread takes)',
    ]


def test_a_role_without_status_routes_on_unit_and_warnings_name_frontmatter(
    tmp_path: Path,
) -> None:
    doc = v1_doc()
    doc["roles"]["b"] = {"frontmatter": {"type": "object", "properties": {"y": {"type": "string"}}}}
    doc["graph"]["a"]["ok"] = {"role": "b", "prompt": "{{ x }} {{ nope }} {{ _body }}"}
    doc["graph"]["b"] = {"done": {"role": "$END"}}
    assert problems(write(tmp_path / "wf.yaml", doc)) == [
        "graph.b.done: roles.b.frontmatter declares no $status property, so the role always "
        'routes on "_"; declare $status with const (oneOf branches, one per status) to route '
        'on "done"',
        'graph.b: no edge for status "_" (roles.b.frontmatter declares no $status property, so '
        'the role always routes on "_")',
    ]
    doc["graph"]["b"] = {"_": {"role": "$END"}}
    assert problems(write(tmp_path / "wf.yaml", doc)) == [  # as uwf 0.8 had it: refused
        "graph.a.ok.prompt: {{ nope }} is not a field of the output of roles.a.frontmatter "
        'whose $status is "ok" (its fields: $status, x)'
    ]
    doc["graph"]["a"]["ok"]["prompt"] = "{{ x }} {{ _body }}"
    assert load_file(write(tmp_path / "wf.yaml", doc))["warnings"] == []


def test_a_version_other_than_1_is_refused_in_one_line(tmp_path: Path) -> None:
    assert problems(write(tmp_path / "wf.yaml", {**v1_doc(), "version": "1"}))[0] == (
        "version: uwf-py reads version 1 files (uwf 0.8's format) and files without a version "
        '(uwf 0.5\'s), got "1"'
    )


def test_a_missing_name_must_be_implied_by_a_workflow_name(tmp_path: Path) -> None:
    assert problems(write(tmp_path / "-wf.yaml", v1_doc())) == [
        'name: missing, and the name the file implies, "-wf", is not a valid workflow name '
        "(letters, digits, _, - and ., starting with a letter, a digit or _, at most 64 "
        "characters)"
    ]


# -- !include --------------------------------------------------------------------------------


def test_include_reads_yaml_json_and_text_relative_to_the_including_file(tmp_path: Path) -> None:
    folder = tmp_path / "wf"
    write(folder / "parts" / "roles.yaml", "a: !include a.yaml\n")
    write(folder / "parts" / "a.yaml", "goal: !include ../goal.md\nfrontmatter: !include s.json\n")
    write(
        folder / "parts" / "s.json", '{"type": "object", "properties": {"x": {"type": "string"}}}'
    )
    write(folder / "goal.md", "Do it well.\n")
    write(
        folder / "index.yaml",
        "version: 1\nroles: !include parts/roles.yaml\ngraph:\n"
        "  $START: {new: {role: a, prompt: go}}\n  a: {_: {role: $END}}\n",
    )
    definition = load_file(folder)
    assert definition["name"] == "wf"
    assert definition["roles"]["a"]["goal"] == "Do it well.\n"
    assert definition["roles"]["a"]["meta"]["properties"] == {"x": {"type": "string"}}
    assert [s.path for s in definition["sources"]] == [
        "index.yaml",
        "parts/roles.yaml",
        "parts/a.yaml",
        "goal.md",
        "parts/s.json",
    ]


@pytest.mark.parametrize(
    ("ref", "problem"),
    [
        ("missing.yaml", "not found"),
        ("/etc/hostname", "must be a path relative to the file that includes it"),
        ("../outside.yaml", "is outside the workflow's directory {root}"),
        ("link.yaml", "is outside the workflow's directory {root}"),
        ("sub", "is not a regular file"),
        ("bad.json", "invalid JSON: Expecting value: line 1 column 1 (char 0)"),
        ("latin1.md", "is not UTF-8 text"),
        ("wf.yaml", "includes itself"),
    ],
)
def test_include_refusals(tmp_path: Path, ref: str, problem: str) -> None:
    root = tmp_path / "flows"
    write(tmp_path / "outside.yaml", "secret: 1\n")
    (root / "sub").mkdir(parents=True)
    os.symlink(tmp_path / "outside.yaml", root / "link.yaml")
    write(root / "bad.json", "not json")
    (root / "latin1.md").write_bytes(b"caf\xe9")
    path = write(root / "wf.yaml", f"version: 1\nroles: !include {ref}\ngraph: {{}}\n")
    assert refusal(path) == (
        f"invalid workflow file {path}: !include {ref} (wf.yaml, line 2): "
        + problem.format(root=root)
    )


def test_an_include_cycle_and_a_missing_name_are_refused(tmp_path: Path) -> None:
    write(tmp_path / "a.yaml", "b: !include b.yaml\n")
    write(tmp_path / "b.yaml", "a: !include a.yaml\n")
    path = write(tmp_path / "wf.yaml", "version: 1\nroles: !include a.yaml\ngraph: {}\n")
    assert refusal(path) == (
        f"invalid workflow file {path}: !include a.yaml (b.yaml, line 1): includes itself"
    )
    path = write(tmp_path / "wf.yaml", "version: 1\nroles: !include [a]\ngraph: {}\n")
    assert refusal(path) == (
        f"invalid workflow file {path}: !include needs a file name (wf.yaml, line 2)"
    )


def test_an_included_yaml_file_that_does_not_parse_is_named(tmp_path: Path) -> None:
    write(tmp_path / "bad.yaml", "a: [\n")
    path = write(tmp_path / "wf.yaml", "version: 1\nroles: !include bad.yaml\ngraph: {}\n")
    message = refusal(path)
    assert message.startswith(f"invalid YAML in {path}: ")
    assert f'in "{tmp_path / "bad.yaml"}", line 2' in message


def test_include_works_in_a_uwf_05_file_without_changing_its_node(tmp_path: Path) -> None:
    text = (EXAMPLE := Path(__file__).parent.parent / "examples" / "solve-issue.yaml").read_text()
    (tmp_path / "solve-issue.yaml").write_text(text)
    whole = load_file(tmp_path / "solve-issue.yaml")
    doc = yaml.safe_load(EXAMPLE.read_text())
    write(tmp_path / "roles.yaml", doc.pop("roles"))
    split = yaml.safe_dump(doc, sort_keys=False) + "roles: !include roles.yaml\n"
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "solve-issue.yaml").write_text(
        split.replace("roles.yaml", "../roles.yaml")
    )
    assert "is outside the workflow's directory" in refusal(tmp_path / "parts" / "solve-issue.yaml")
    (tmp_path / "solve-issue.yaml").write_text(split)
    included = load_file(tmp_path / "solve-issue.yaml")
    assert "sources" not in included and "version" not in included
    assert {k: v for k, v in included.items() if k != "warnings"} == {
        k: v for k, v in whole.items() if k != "warnings"
    }


# -- folder workflows ------------------------------------------------------------------------


def test_project_folders_are_found_and_listed_after_files(tmp_path: Path) -> None:
    project = tmp_path / "p"
    write(project / ".workflows" / "alpha" / "index.yml", v1_doc())
    write(project / ".workflows" / "beta" / "index.yaml", v1_doc())
    write(project / ".workflows" / "beta.yaml", v1_doc())  # a file before a folder
    write(project / ".workflows" / "index.yaml", v1_doc())  # the workflow "index"
    (project / ".workflows" / "empty").mkdir()
    deeper = project / "src" / "deep"
    deeper.mkdir(parents=True)
    assert discovery.find("alpha", deeper) == project / ".workflows" / "alpha" / "index.yml"
    assert discovery.find("beta", deeper) == project / ".workflows" / "beta.yaml"
    assert discovery.find("empty", deeper) is None
    assert discovery.project_workflows(deeper) == {
        "alpha": project / ".workflows" / "alpha" / "index.yml",
        "beta": project / ".workflows" / "beta.yaml",
        "index": project / ".workflows" / "index.yaml",
    }
    assert load_file(project / ".workflows" / "index.yaml")["name"] == "index"
    assert load_file(project / ".workflows" / "alpha")["name"] == "alpha"


def test_a_folder_without_index_is_no_workflow_file(tmp_path: Path) -> None:
    (tmp_path / "wf").mkdir()
    from uwf.util.errors import NotFound

    with pytest.raises(NotFound) as info:
        load_file(tmp_path / "wf")
    assert info.value.message == f"file not found: {tmp_path / 'wf'}"


# -- what a uwf 0.8 file may hold that uwf-py refuses (docs/format.md, the table) ----------------

SCHEMA = "{type: object, properties: {$status: {const: done}}, required: [$status]}"
UWF08 = f"""\
name: relay
description: A uwf 0.8 file as its users write them.
x-common: &common {SCHEMA}
roles:
  worker:
    description: Works.
    goal: Do it.
    capabilities: []
    procedure: Do it well.
    output: What was done.
    frontmatter: *common
    model: gpt-5
graph:
  $START:
    new: {{role: worker, prompt: "Do {{{{ _body }}}}"}}
    resume: {{role: worker, prompt: "Again: {{{{ _body }}}}"}}
  worker:
    done: {{role: $END, prompt: "{{{{ _body | slugify }}}}", location: null}}
"""
#: What docs/format.md says to write instead: no role keys uwf-py does not know, a standard
#: filter, no ``location`` for the thread's directory. The ``x-common`` extension field,
#: holding a YAML anchor, stays: uwf reads past it.
FIXES = [
    ("    model: gpt-5\n", ""),
    (" | slugify", " | downcase"),
    (", location: null", ""),
]


def test_what_a_uwf_08_file_may_hold_is_named_by_workflow_check(
    cli_proc: Any, tmp_path: Path
) -> None:
    """A uwf 0.8 file without ``version`` is told to add it; with it, each construct uwf 0.8
    reads and uwf-py does not is one line naming its place; written as the docs say, the file
    is stored."""
    path = tmp_path / "relay.yaml"
    path.write_text(UWF08)
    no_version = cli_proc("workflow", "check", path)
    assert no_version.code == 1
    hint = (
        '$START routes only on the unit status "_" in a file without a version; "{}" is an '
        "edge of version 1, uwf 0.8's format: add version: 1 at the top of the file"
    )
    errors = [line.removeprefix(f"error: {path}: ") for line in no_version.err.splitlines()]
    assert f"graph.$START.new: {hint.format('new')}" in errors
    assert f"graph.$START.resume: {hint.format('resume')}" in errors

    path.write_text("version: 1\n" + UWF08)
    checked = cli_proc("workflow", "check", path)
    assert checked.code == 1
    assert json.loads(checked.out)[0]["problems"] == [
        'roles.worker.model: unknown key "model" (known keys: description, goal, '
        "capabilities, procedure, output, meta, frontmatter, retry)",
        "graph.worker.done.location: expected a directory path, got null",
        "graph.worker.done.prompt: prompt template does not parse: unknown filter 'slugify'",
    ]
    fixed = UWF08
    for old, new in FIXES:
        fixed = fixed.replace(old, new)
    path.write_text("version: 1\n" + fixed)
    stored = cli_proc("workflow", "put", path)
    assert stored.code == 0, stored.err
    assert json.loads(stored.out)["name"] == "relay"
    shown = json.loads(cli_proc("workflow", "show", "relay").out)["payload"]
    assert "x-common" not in shown  # read past: not in the definition …
    meta = json.loads(cli_proc("cas", "get", shown["roles"]["worker"]["meta"]).out)
    assert meta["payload"]["properties"]["$status"] == {"const": "done"}  # the anchor's
    source = cli_proc("workflow", "show", "relay", "--source").out
    assert source == "version: 1\n" + fixed  # … but kept in the stored source
