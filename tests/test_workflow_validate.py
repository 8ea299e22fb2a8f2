"""Workflow files: every refusal of `load_file` (docs/errors.md, "Workflow files"),
materialisation and the examples."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from support import EXAMPLES
from uwf.agent_kit.fastpath import candidate, split
from uwf.agents.mock import load_scenario
from uwf.backend.memory import MemoryStore
from uwf.cas import codec
from uwf.cas.schema import meta_hash, validate
from uwf.engine.workflows.files import load_file, materialise, store_definition
from uwf.moderator.evaluate import END, START, evaluate
from uwf.moderator.validate import LEGACY
from uwf.protocol import schemas, workflow_schemas
from uwf.protocol.workflow import Graph
from uwf.util.base32 import describe, is_hash
from uwf.util.errors import InvalidInput, NotFound

NAME_RULE = "letters, digits, _ and -, starting with a letter or _, at most 64 characters"
WORKFLOW_RULE = (
    "letters, digits, _, - and ., starting with a letter, a digit or _, at most 64 characters"
)
NOT_MAPPING = "expected a mapping with name, description, roles and graph"


def role(statuses: list[str] | None = None, **fields: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"type": "object", "properties": {"text": {"type": "string"}}}
    if statuses is not None:
        meta["properties"]["status"] = {"type": "string", "enum": statuses}
        meta["required"] = ["status"]
    out = {
        "description": "d",
        "goal": "g",
        "capabilities": ["c"],
        "procedure": "p",
        "output": "o",
        "meta": meta,
    }
    out.update(fields)
    return out


def edge(to: str, prompt: str = "go on") -> dict[str, str]:
    return {"role": to, "prompt": prompt}


def base() -> dict[str, Any]:
    """A valid workflow: a (status _) -> b (ok | again)."""
    return {
        "name": "wf",
        "description": "a test workflow",
        "roles": {"a": role(["_"]), "b": role(["ok", "again"])},
        "graph": {
            START: {"_": edge("a", "begin")},
            "a": {"_": edge("b")},
            "b": {"ok": edge(END), "again": edge("a")},
        },
    }


def write(tmp_path: Path, doc: Any, name: str = "wf.yaml") -> Path:
    path = tmp_path / name
    text = doc if isinstance(doc, str) else yaml.safe_dump(doc, sort_keys=False)
    path.write_text(text, encoding="utf-8")
    return path


def problems(tmp_path: Path, doc: Any, name: str = "wf.yaml") -> list[str]:
    """The problem lines of a refused file (the header line is checked here)."""
    path = write(tmp_path, doc, name)
    with pytest.raises(InvalidInput) as info:
        load_file(path)
    lines = info.value.message.split("\n")
    n = len(lines) - 1
    assert lines[0] == f"invalid workflow {path}: {n} problem{'' if n == 1 else 's'}"
    assert all(line.startswith("  - ") for line in lines[1:])
    return [line[4:] for line in lines[1:]]


def test_the_base_workflow_is_valid(tmp_path: Path) -> None:
    definition = load_file(write(tmp_path, base()))
    assert definition["name"] == "wf"
    assert definition["warnings"] == []
    assert set(definition["roles"]) == {"a", "b"}
    assert definition["graph"]["b"]["again"] == edge("a")


# -- file level ------------------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.yaml"
    with pytest.raises(NotFound) as info:
        load_file(path)
    assert info.value.message == f"file not found: {path}"


def test_directory_instead_of_file(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(NotFound) as info:
        load_file(tmp_path / "dir.yaml")
    assert info.value.message == f"file not found: {tmp_path / 'dir.yaml'}"


def test_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "wf.yaml"
    path.write_bytes(b"name: \xff\n")
    with pytest.raises(InvalidInput) as info:
        load_file(path)
    assert info.value.message == (
        f"invalid workflow file {path}: not UTF-8 text (byte 0xff at offset 6)"
    )


def test_invalid_yaml(tmp_path: Path) -> None:
    path = write(tmp_path, "invalid: yaml: : :\n")
    with pytest.raises(InvalidInput) as info:
        load_file(path)
    message = info.value.message
    assert message.startswith(f"invalid YAML in {path}: ")
    assert "\n" not in message
    assert message.endswith(", line 1, column 14")


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n", ""])
def test_document_must_be_a_mapping(tmp_path: Path, text: str) -> None:
    with pytest.raises(InvalidInput) as info:
        load_file(write(tmp_path, text))
    assert info.value.message == f"invalid workflow YAML in {tmp_path / 'wf.yaml'}: {NOT_MAPPING}"


# -- top level ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "line"),
    [
        ("name", "name: missing (expected a string)"),
        ("description", "description: missing (expected a string)"),
        ("roles", "roles: missing (expected a mapping of role name -> role definition)"),
        (
            "graph",
            "graph: missing (expected a mapping of <role or $START> -> <status> -> {role, prompt})",
        ),
    ],
)
def test_missing_top_level_field(tmp_path: Path, key: str, line: str) -> None:
    doc = base()
    del doc[key]
    got = problems(tmp_path, doc)
    assert got[0] == line
    if key in ("name", "description", "graph"):
        assert got == [line]


@pytest.mark.parametrize(
    ("key", "value", "line"),
    [
        ("name", 3, "name: expected a string, got an integer"),
        ("description", ["x"], "description: expected a string, got a list"),
        ("roles", ["a"], "roles: expected a mapping of role name -> role definition, got a list"),
        (
            "graph",
            "x",
            "graph: expected a mapping of <role or $START> -> <status> -> {role, prompt}, "
            "got a string",
        ),
    ],
)
def test_wrong_top_level_type(tmp_path: Path, key: str, value: Any, line: str) -> None:
    doc = base()
    doc[key] = value
    assert problems(tmp_path, doc)[0] == line


def test_unknown_top_level_key(tmp_path: Path) -> None:
    doc = base()
    doc["versio"] = 1
    assert problems(tmp_path, doc) == [
        'versio: unknown key "versio" (known keys: name, description, roles, graph, compactAfter, '
        "retry)"
    ]


def test_unknown_version(tmp_path: Path) -> None:
    doc = base()
    doc["version"] = 2
    assert problems(tmp_path, doc) == [
        "version: uwf-py reads version 1 files (uwf 0.8's format) and files without a version "
        "(uwf 0.5's), got 2"
    ]


def test_name_mismatch(tmp_path: Path) -> None:
    assert problems(tmp_path, base(), "other.yaml") == [
        'workflow name mismatch: file "other.yaml" implies name "other" but YAML declares name "wf"'
    ]


def test_yml_extension_is_a_stem_too(tmp_path: Path) -> None:
    assert load_file(write(tmp_path, base(), "wf.yml"))["name"] == "wf"


@pytest.mark.parametrize("bad", ["-wf", ".wf", "w f", "w+f", "x" * 65])
def test_name_must_be_a_file_stem_safe_name(tmp_path: Path, bad: str) -> None:
    doc = base()
    doc["name"] = bad
    assert problems(tmp_path, doc, f"{bad}.yaml") == [
        f"name: {describe(bad)} is not a valid workflow name ({WORKFLOW_RULE})"
    ]


@pytest.mark.parametrize("good", ["2026-review", "w.f", "review.v2", "9", "_x", "x" * 64])
def test_a_name_may_be_any_file_stem_safe_name(tmp_path: Path, good: str) -> None:
    doc = base()
    doc["name"] = good
    assert load_file(write(tmp_path, doc, f"{good}.yaml"))["name"] == good


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (
            "0123456789ABC",
            "would be ambiguous with a hash (a valid 13-character hash is never a name)",
        ),
        ("a.yaml", "would be read as a file path (a name never ends in .yaml or .yml)"),
        ("a.yml", "would be read as a file path (a name never ends in .yaml or .yml)"),
    ],
)
def test_a_name_that_reads_as_a_hash_or_a_file_is_ambiguous(
    tmp_path: Path, bad: str, problem: str
) -> None:
    doc = base()
    doc["name"] = bad
    assert problems(tmp_path, doc, f"{bad}.yaml") == [f"name: {describe(bad)} {problem}"]


# -- roles -----------------------------------------------------------------------------


def test_role_name_must_be_an_identifier(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["-b"] = doc["roles"].pop("b")
    doc["graph"]["-b"] = doc["graph"].pop("b")
    doc["graph"]["a"]["_"] = edge("-b")
    assert problems(tmp_path, doc) == [
        f"roles.-b: role name is not a plain identifier ({NAME_RULE})"
    ]


def test_role_name_with_a_space_is_quoted_in_the_location(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["b c"] = doc["roles"].pop("b")
    doc["graph"]["b c"] = doc["graph"].pop("b")
    doc["graph"]["a"]["_"] = edge("b c")
    assert problems(tmp_path, doc) == [
        f'roles["b c"]: role name is not a plain identifier ({NAME_RULE})'
    ]


def test_role_name_must_be_a_string(tmp_path: Path) -> None:
    text = yaml.safe_dump(base(), sort_keys=False).replace("  b:\n", "  1:\n", 1)
    got = problems(tmp_path, text)
    assert got[0] == "roles: role name 1 is not a string"


@pytest.mark.parametrize(
    ("change", "line"),
    [
        ({"goal": None}, "roles.b.goal: expected a string, got null"),
        ({"procedure": 5}, "roles.b.procedure: expected a string, got an integer"),
        (
            {"capabilities": "shell"},
            "roles.b.capabilities: expected a list of strings, got a string",
        ),
        ({"capabilities": ["ok", 2]}, "roles.b.capabilities[1]: expected a string, got an integer"),
        ({"meta": "object"}, "roles.b.meta: expected a JSON Schema mapping, got a string"),
        ({"meta": {"type": "objekt"}}, None),
        (
            {"procedures": "x"},
            'roles.b.procedures: unknown key "procedures" (known keys: description, goal, '
            "capabilities, procedure, output, meta, frontmatter, retry)",
        ),
    ],
)
def test_role_field_problems(tmp_path: Path, change: dict[str, Any], line: str | None) -> None:
    doc = base()
    doc["roles"]["b"].update(change)
    got = problems(tmp_path, doc)
    if line is None:
        assert len(got) == 1
        assert got[0].startswith("roles.b.meta: invalid JSON Schema: ")
    else:
        assert got == [line]


@pytest.mark.parametrize(
    ("field", "line"),
    [
        ("goal", "roles.b.goal: missing (expected a string)"),
        ("capabilities", "roles.b.capabilities: missing (expected a list of strings)"),
        (
            "meta",
            'roles.b.meta: missing (expected a JSON Schema mapping; "frontmatter" is accepted '
            "as another name)",
        ),
    ],
)
def test_missing_role_field(tmp_path: Path, field: str, line: str) -> None:
    doc = base()
    del doc["roles"]["b"][field]
    assert problems(tmp_path, doc) == [line]


def test_role_must_be_a_mapping(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["b"] = "reviewer"
    assert problems(tmp_path, doc) == [
        "roles.b: expected a mapping (a role definition), got a string"
    ]


def test_frontmatter_is_another_name_for_meta(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["b"]["frontmatter"] = doc["roles"]["b"].pop("meta")
    definition = load_file(write(tmp_path, doc))
    assert definition["roles"]["b"]["meta"]["properties"]["status"]["enum"] == ["ok", "again"]
    assert "frontmatter" not in definition["roles"]["b"]


def test_meta_and_frontmatter_together(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["b"]["frontmatter"] = {"type": "object"}
    assert problems(tmp_path, doc) == [
        'roles.b: has both "meta" and "frontmatter" (one is another name for the other)'
    ]


def test_meta_must_be_json(tmp_path: Path) -> None:
    text = yaml.safe_dump(base(), sort_keys=False).replace(
        "        text:\n          type: string\n",
        "        text:\n          type: string\n          default: 2024-01-01\n",
        1,
    )
    assert problems(tmp_path, text) == ["roles.a.meta: not a JSON value: date"]


# -- graph -----------------------------------------------------------------------------


def test_no_start_edge(tmp_path: Path) -> None:
    doc = base()
    del doc["graph"][START]
    assert problems(tmp_path, doc) == [
        "graph: no $START edge (add graph.$START._ = {role: <first role>, prompt: <template>})"
    ]


def test_start_routes_only_on_the_unit_status(tmp_path: Path) -> None:
    doc = base()
    doc["graph"][START] = {"go": edge("a")}
    assert problems(tmp_path, doc) == [
        'graph.$START.go: $START routes only on the unit status "_"',
        'graph.$START: no edge for the unit status "_"',
    ]


def test_start_must_route_to_a_role(tmp_path: Path) -> None:
    doc = base()
    doc["graph"][START]["_"] = edge(END)
    assert problems(tmp_path, doc) == ["graph.$START._: $START must route to a role, not $END"]


def test_edge_to_unknown_role(tmp_path: Path) -> None:
    doc = base()
    doc["graph"]["a"]["_"] = edge("c")
    assert problems(tmp_path, doc) == ['graph.a._: routes to unknown role "c" (roles: a, b)']


def test_edge_to_start(tmp_path: Path) -> None:
    doc = base()
    doc["graph"]["b"]["again"] = edge(START)
    assert problems(tmp_path, doc) == [
        "graph.b.again: cannot route to $START (route to a role or $END)"
    ]


@pytest.mark.parametrize("edges", ["absent", None, {}])
def test_role_with_no_outgoing_edge(tmp_path: Path, edges: Any) -> None:
    doc = base()
    if edges == "absent":
        del doc["graph"]["b"]
    else:
        doc["graph"]["b"] = edges
    assert problems(tmp_path, doc) == [
        "roles.b: has no outgoing edge (add graph.b[<status>] = "
        "{role: <next role or $END>, prompt: <mustache template>})"
    ]


def test_graph_key_that_is_not_a_role(tmp_path: Path) -> None:
    doc = base()
    doc["graph"]["c"] = {"_": edge(END)}
    assert problems(tmp_path, doc) == [
        'graph.c: "c" is not a role (graph keys are $START and role names)'
    ]


def test_graph_key_end(tmp_path: Path) -> None:
    doc = base()
    doc["graph"][END] = {"_": edge("a")}
    assert problems(tmp_path, doc) == ["graph.$END: $END ends a thread and cannot have edges"]


@pytest.mark.parametrize(
    ("target", "line"),
    [
        ("b", "graph.a._: expected a mapping {role, prompt}, got a string"),
        ({"prompt": "x"}, "graph.a._.role: missing (expected a role name or $END)"),
        (
            {"role": 3, "prompt": "x"},
            "graph.a._.role: expected a role name or $END, got an integer",
        ),
        ({"role": "b"}, "graph.a._.prompt: missing (expected a non-blank Mustache template)"),
        (
            {"role": "b", "prompt": "  \n"},
            'graph.a._.prompt: expected a non-blank Mustache template, got "  \\n"',
        ),
        (
            {"role": "b", "prompt": "x", "when": "y"},
            'graph.a._.when: unknown key "when" (known keys: role, prompt, fanOut)',
        ),
    ],
)
def test_bad_target(tmp_path: Path, target: Any, line: str) -> None:
    doc = base()
    doc["graph"]["a"]["_"] = target
    assert problems(tmp_path, doc) == [line]


def test_prompt_template_must_parse(tmp_path: Path) -> None:
    doc = base()
    doc["graph"]["a"]["_"] = edge("b", "{{#items}}unclosed")
    got = problems(tmp_path, doc)
    assert len(got) == 1
    assert got[0].startswith("graph.a._.prompt: prompt template does not parse: ")
    assert "items" in got[0]


def test_yaml_boolean_status_key(tmp_path: Path) -> None:
    text = yaml.safe_dump(base(), sort_keys=False).replace("    ok:\n", "    yes:\n", 1)
    got = problems(tmp_path, text)
    assert got[0] == "graph.b: status true is a boolean, not a string; quote it in the YAML"


def test_legacy_list_graph(tmp_path: Path) -> None:
    doc = base()
    doc["graph"] = {START: [{"role": "a", "condition": None}], "a": [{"role": END}]}
    assert problems(tmp_path, doc) == [LEGACY]
    assert LEGACY == (
        "graph uses the legacy list/conditions form; use status-based routing: "
        "graph[<role>][<status>] = {role: <next role or $END>, prompt: <mustache template>}"
    )


def test_legacy_conditions_key(tmp_path: Path) -> None:
    doc = base()
    doc["conditions"] = {"notApproved": {"expression": "steps[-1].output.approved = false"}}
    assert problems(tmp_path, doc) == [LEGACY]


# -- statuses ---------------------------------------------------------------------------


def test_declared_status_without_edge(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["b"]["meta"]["properties"]["status"]["enum"].append("maybe")
    assert problems(tmp_path, doc) == [
        'graph.b: no edge for status "maybe" declared in roles.b.meta'
    ]


def test_edge_on_a_status_the_role_cannot_emit(tmp_path: Path) -> None:
    doc = base()
    doc["graph"]["b"]["maybe"] = edge(END)
    assert problems(tmp_path, doc) == [
        'graph.b.maybe: roles.b.meta cannot emit status "maybe" '
        '(its status values are ["ok","again"])'
    ]


def test_const_status(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["a"]["meta"]["properties"]["status"] = {"const": "_"}
    load_file(write(tmp_path, doc))
    doc["roles"]["a"]["meta"]["properties"]["status"] = {"const": "done"}
    assert problems(tmp_path, doc) == [
        'graph.a._: roles.a.meta cannot emit status "_" (its status values are ["done"])',
        'graph.a: no edge for status "done" declared in roles.a.meta',
    ]


def test_non_string_status_value(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["b"]["meta"]["properties"]["status"]["enum"].append(True)
    assert problems(tmp_path, doc) == [
        "roles.b.meta: status value true is not a string; quote it in the YAML"
    ]


def test_no_status_declared_routes_only_on_unit(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["a"] = role()  # fields, but no status
    load_file(write(tmp_path, doc))  # a's "_" edge is fine
    doc["graph"]["a"] = {"done": edge("b")}
    assert problems(tmp_path, doc) == [
        'graph.a.done: roles.a.meta declares no status property, so the role always routes on "_"; '
        'declare properties.status.enum to route on "done"',
        'graph.a: no edge for status "_" (roles.a.meta declares no status property, '
        'so the role always routes on "_")',
    ]


OPEN_STATUS = (
    "roles.b.meta: properties.status has no enum, so its edges cannot be checked: a step whose "
    "status has no edge fails at run time (list the statuses in status.enum)"
)


@pytest.mark.parametrize(
    ("meta", "warnings"),
    [
        ({"type": "object"}, []),  # no fields: the standard fields, any status
        ({"type": "object", "properties": {"status": {"type": "string"}}}, [OPEN_STATUS]),
        ({"anyOf": [{"properties": {"status": {"type": "string"}}}]}, [OPEN_STATUS]),
    ],
)
def test_open_statuses_are_not_checked_but_warned(
    tmp_path: Path, meta: dict[str, Any], warnings: list[str]
) -> None:
    doc = base()
    doc["roles"]["b"]["meta"] = meta
    doc["graph"]["b"] = {s: edge(t, "next") for s, t in (("ok", END), ("again", "a"))}
    doc["graph"]["b"]["anything"] = edge(END, "done")
    assert load_file(write(tmp_path, doc))["warnings"] == warnings


def test_statuses_through_any_of(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["b"]["meta"] = {
        "anyOf": [
            {"properties": {"status": {"const": "ok"}}, "required": ["status"]},
            {"properties": {"status": {"const": "again"}}, "required": ["status"]},
        ]
    }
    assert load_file(write(tmp_path, doc))["warnings"] == []
    doc["graph"]["b"]["other"] = edge(END)
    assert problems(tmp_path, doc) == [
        'graph.b.other: roles.b.meta cannot emit status "other" '
        '(its status values are ["ok","again"])'
    ]


def test_nullable_status_may_route_on_unit(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["b"]["meta"]["properties"]["status"] = {
        "anyOf": [{"enum": ["ok", "again"]}, {"type": "null"}]
    }
    doc["graph"]["b"]["_"] = edge(END)
    assert load_file(write(tmp_path, doc))["warnings"] == []


def test_optional_status_without_unit_edge_is_a_warning(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["b"]["meta"]["required"] = []
    assert load_file(write(tmp_path, doc))["warnings"] == [
        'roles.b.meta: an output without a string status routes on "_", which has no edge '
        'in graph.b (add status to required, or add a "_" edge)'
    ]


def test_unreachable_role_is_a_warning(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["c"] = role(["_"])
    doc["graph"]["c"] = {"_": edge("b")}
    definition = load_file(write(tmp_path, doc))
    assert definition["warnings"] == ["roles.c: not reachable from $START"]
    assert "c" in definition["roles"]


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    doc = base()
    doc["description"] = 1
    doc["roles"]["a"]["goal"] = 2
    doc["graph"]["a"]["_"] = edge("zz")
    doc["graph"]["b"]["maybe"] = edge(END)
    assert problems(tmp_path, doc, "x.yaml") == [  # the shape first, top to bottom
        "description: expected a string, got an integer",
        "roles.a.goal: expected a string, got an integer",
        'workflow name mismatch: file "x.yaml" implies name "x" but YAML declares name "wf"',
        'graph.a._: routes to unknown role "zz" (roles: a, b)',
        'graph.b.maybe: roles.b.meta cannot emit status "maybe" '
        '(its status values are ["ok","again"])',
    ]


# -- examples and materialisation ---------------------------------------------------------


@pytest.mark.parametrize("name", ["solve-issue", "debate", "analyze-topic"])
def test_examples_validate(name: str) -> None:
    definition = load_file(EXAMPLES / f"{name}.yaml")
    assert definition["name"] == name
    assert definition["warnings"] == []
    assert START in definition["graph"]


def test_solve_issue_shape() -> None:
    definition = load_file(EXAMPLES / "solve-issue.yaml")
    assert list(definition["roles"]) == ["planner", "developer", "reviewer"]
    reviewer = definition["roles"]["reviewer"]["meta"]
    assert reviewer["properties"]["status"]["enum"] == ["approved", "rejected"]
    graph = definition["graph"]
    assert graph[START]["_"]["role"] == "planner"
    assert graph["planner"]["_"]["role"] == "developer"
    assert graph["developer"]["_"]["role"] == "reviewer"
    assert graph["reviewer"]["approved"]["role"] == END
    assert graph["reviewer"]["rejected"]["role"] == "developer"
    rendered = evaluate(
        Graph(graph), "reviewer", {"status": "rejected", "comments": "add <tests> & docs"}
    )
    assert rendered.role == "developer"
    assert "add <tests> & docs" in rendered.prompt


def test_materialise_stores_schemas_and_rebuilds_roles() -> None:
    store = MemoryStore()
    doc = base()
    doc["roles"]["b"]["meta"]["title"] = "Custom"
    definition = load_file(write(Path.cwd(), doc))
    payload = materialise(store, definition)
    assert set(payload) == {"name", "description", "roles", "graph"}
    for name, stored in payload["roles"].items():
        assert list(stored) == list(workflow_schemas.ROLE_DEFINITION["required"])
        schema_node = store.get(stored["meta"])
        assert schema_node is not None and schema_node.type == meta_hash()
        expected_title = "Custom" if name == "b" else f"wf.{name}"
        assert schema_node.payload["title"] == expected_title
    assert payload["graph"] == definition["graph"]
    h = store_definition(store, definition)
    assert is_hash(h)
    node = store.get(h)
    assert node is not None and node.type == schemas.hashes().workflow
    assert h == codec.node_hash(schemas.hashes().workflow, payload)
    assert validate(workflow_schemas.WORKFLOW, node.payload) == []


# -- the mock scenario of solve-issue ---------------------------------------------------


def test_solve_issue_mock_scenario_routes_with_one_rejection() -> None:
    definition = load_file(EXAMPLES / "solve-issue.yaml")
    scenario = load_scenario(str(EXAMPLES / "solve-issue.mock.yaml"))
    assert {r: len(e) for r, e in scenario.items()} == {"planner": 1, "developer": 2, "reviewer": 2}
    visits: dict[str, int] = {}
    path: list[str] = []
    role_name, output = START, {}
    while True:
        decision = evaluate(Graph(definition["graph"]), role_name, output)
        if decision.done:
            break
        role_name = decision.role
        n = visits.get(role_name, 0)
        visits[role_name] = n + 1
        entries = scenario[role_name]
        entry = entries[min(n, len(entries) - 1)]
        raw = entry if isinstance(entry, str) else entry["output"]
        block, body = split(raw)
        assert block is not None and body.strip()
        schema = copy.deepcopy(definition["roles"][role_name]["meta"])
        offer = candidate(block, schema)
        assert offer is not None
        assert validate(schema, offer) == [], (role_name, offer)
        output = offer
        path.append(f"{role_name}:{offer['status']}")
        assert len(path) < 20
    assert path == [
        "planner:_",
        "developer:_",
        "reviewer:rejected",
        "developer:_",
        "reviewer:approved",
    ]


def test_empty_capabilities_are_kept() -> None:
    doc = base()
    doc["roles"]["a"]["capabilities"] = []
    definition = load_file(write(Path.cwd(), doc))
    payload = materialise(MemoryStore(), definition)
    assert payload["roles"]["a"]["capabilities"] == []
    assert list(payload["roles"]["a"]) == list(workflow_schemas.ROLE_DEFINITION["required"])


# -- warnings about prompt variables ---------------------------------------------------------


def test_a_prompt_variable_the_source_role_cannot_emit_is_a_warning(tmp_path: Path) -> None:
    doc = base()
    doc["graph"][START]["_"]["prompt"] = "start on {{topic}}"
    doc["graph"]["a"]["_"]["prompt"] = (
        "{{text}} {{nots}} {{#text}}{{inner}}{{/text}} {{^gone}}x{{/gone}}"
    )
    doc["graph"]["b"]["ok"]["prompt"] = "{{status}}: {{text.length}} {{.}}"
    assert load_file(write(tmp_path, doc))["warnings"] == [
        "graph.$START._.prompt: {{topic}} renders empty: $START has no output",
        "graph.a._.prompt: {{nots}} is not a field of roles.a.meta, so it renders empty "
        "(its fields: status, text)",
        "graph.a._.prompt: {{gone}} is not a field of roles.a.meta, so it renders empty "
        "(its fields: status, text)",
    ]


def test_prompt_variables_of_a_schema_without_fields_are_not_checked(tmp_path: Path) -> None:
    doc = base()
    doc["roles"]["a"]["meta"] = {"type": "object"}
    doc["graph"]["a"]["_"]["prompt"] = "{{anything}}"
    assert load_file(write(tmp_path, doc))["warnings"] == []
