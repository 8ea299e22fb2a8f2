"""`uwf cas …` end to end: outputs, exit codes, one-line errors, and nothing written on error."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rootfiles import open_store
from uwf.backend.fs.nodes import FsStore
from uwf.cas import codec
from uwf.cas.schema import meta_hash
from uwf.protocol import schemas

ITEM: dict[str, Any] = {
    "title": "Item",
    "type": "object",
    "additionalProperties": False,
    "required": ["n"],
    "properties": {"n": {"type": "integer"}},
}
HASH_HELP = "(expected 13 upper-case Crockford Base32 characters)"


def absent() -> str:
    """A well-formed hash of a node that is never stored in these tests."""
    return codec.node_hash("0000000000000", "absent")


def store_with_item(root: Path) -> tuple[FsStore, str]:
    store = open_store(root)
    schemas.ensure(store)
    return store, store.put_schema(ITEM)


def tamper(store: FsStore, h: str, text: str) -> None:
    path = store.path(h)
    path.chmod(0o644)
    path.write_text(text)
    path.chmod(0o444)


# -- has ------------------------------------------------------------------------------------


def test_has_existing(cli: Any) -> None:
    h = cli("cas", "put-text", "hello").json()["hash"]
    r = cli("cas", "has", h)
    assert (r.code, r.out, r.err) == (0, '{"exists":true}\n', "")


def test_has_missing(cli: Any) -> None:
    cli("cas", "put-text", "hello")
    r = cli("cas", "has", absent())
    assert (r.code, r.out, r.err) == (1, '{"exists":false}\n', "")


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "abc",
        "0123456789abc",
        "0123456789AB",
        "0123456789ABCD",
        "ZZZZZZZZZZZZZ",
        "../../../etc/passwd",
        "../0123456789A",
        "0123456789AB/",
        "$(touch x)",
        "*",
        "a b c",
        "日本語のハッシュ",
        "0123456789AB\n",
    ],
)
def test_has_malformed_is_false_without_error(
    cli: Any, root: Path, snapshot: Any, bad: str
) -> None:
    store_with_item(root)
    before = snapshot(root)
    r = cli("cas", "has", bad)
    assert (r.code, r.out, r.err) == (1, '{"exists":false}\n', "")
    assert snapshot(root) == before


def test_has_on_an_empty_root_creates_nothing(cli: Any, root: Path) -> None:
    r = cli("cas", "has", absent())
    assert (r.code, r.out) == (1, '{"exists":false}\n')
    assert not root.exists()


@pytest.mark.parametrize("where", ["global", "command"])
def test_has_yaml(cli: Any, where: str) -> None:
    h = cli("cas", "put-text", "hello").json()["hash"]

    def has(target: str) -> Any:
        if where == "global":
            return cli("--format", "yaml", "cas", "has", target)
        return cli("cas", "has", target, "--format", "yaml")

    r = has(h)
    assert (r.code, r.out, r.err) == (0, "exists: true\n", "")
    r = has(absent())
    assert (r.code, r.out, r.err) == (1, "exists: false\n", "")


def test_has_exit_codes_in_a_real_process(cli_proc: Any) -> None:
    r = cli_proc("cas", "put-text", "hello")
    assert r.code == 0, r.err
    h = r.json()["hash"]
    r = cli_proc("cas", "has", h)
    assert (r.code, r.out, r.err) == (0, '{"exists":true}\n', "")
    r = cli_proc("cas", "has", absent())
    assert (r.code, r.out, r.err) == (1, '{"exists":false}\n', "")
    r = cli_proc("cas", "has", "")
    assert (r.code, r.out, r.err) == (1, '{"exists":false}\n', "")
    r = cli_proc("--format", "yaml", "cas", "has", h)
    assert (r.code, r.out) == (0, "exists: true\n")
    r = cli_proc("--format", "yaml", "cas", "has", "nope")
    assert (r.code, r.out) == (1, "exists: false\n")


# -- get --------------------------------------------------------------------------------------


def test_get(cli: Any, root: Path) -> None:
    store, item = store_with_item(root)
    h = store.put(item, {"n": 7})
    node = store.require(h)
    r = cli("cas", "get", h)
    assert r.code == 0
    assert r.out == json.dumps({"type": item, "payload": {"n": 7}}, separators=(",", ":")) + "\n"
    r = cli("cas", "get", h, "--timestamp")
    assert r.code == 0
    assert r.json() == {"type": item, "payload": {"n": 7}, "timestamp": node.timestamp}
    assert list(r.json()) == ["type", "payload", "timestamp"]


def test_get_yaml_quotes_hashes(cli: Any, root: Path) -> None:
    store, item = store_with_item(root)
    h = store.put(item, {"n": 7})
    r = cli("--format", "yaml", "cas", "get", h)
    assert (r.code, r.out) == (0, f'type: "{item}"\npayload:\n  n: 7\n')


def test_get_missing(cli: Any, root: Path) -> None:
    store_with_item(root)
    h = absent()
    r = cli("cas", "get", h)
    assert (r.code, r.out, r.err) == (1, "", f"error: Node not found: {h}\n")


def test_get_missing_in_a_real_process(cli_proc: Any) -> None:
    h = absent()
    r = cli_proc("cas", "get", h)
    assert (r.code, r.out, r.err) == (1, "", f"error: Node not found: {h}\n")


@pytest.mark.parametrize(
    ("bad", "shown"),
    [
        ("abc", '"abc"'),
        ("../../etc/passwd", '"../../etc/passwd"'),
        ("0123456789abc", '"0123456789abc"'),
        ("", "''"),
        ("a\nb", "'a\\nb'"),
    ],
)
def test_get_malformed(cli: Any, root: Path, snapshot: Any, bad: str, shown: str) -> None:
    store_with_item(root)
    before = snapshot(root)
    r = cli("cas", "get", bad)
    assert (r.code, r.out, r.err) == (1, "", f"error: invalid hash: {shown} {HASH_HELP}\n")
    assert snapshot(root) == before


def test_get_malformed_on_an_empty_root_creates_nothing(cli: Any, root: Path) -> None:
    r = cli("cas", "get", "nope")
    assert r.code == 1
    assert r.err == f'error: invalid hash: "nope" {HASH_HELP}\n'
    assert not root.exists()


def test_get_corrupt_node(cli: Any, root: Path) -> None:
    store, item = store_with_item(root)
    h = store.put(item, {"n": 1})
    tamper(store, h, json.dumps({"type": item, "payload": {"n": 2}, "timestamp": 1}))
    r = cli("cas", "get", h)
    assert r.code == 1
    assert r.out == ""
    assert (
        r.err == f"error: corrupt node {h}: content hashes to {codec.node_hash(item, {'n': 2})}\n"
    )


# -- put-text and put -------------------------------------------------------------------------


def test_put_text(cli: Any, root: Path) -> None:
    r = cli("cas", "put-text", "hello")
    assert (r.code, r.err) == (0, "")
    out = r.json()
    assert list(out) == ["hash"]
    assert len(out["hash"]) == 13
    text_type = schemas.hashes().text
    assert out["hash"] == codec.node_hash(text_type, "hello")
    assert cli("cas", "get", out["hash"]).json() == {"type": text_type, "payload": "hello"}
    assert cli("cas", "put-text", "hello").json() == out


def test_put_text_in_a_real_process(cli_proc: Any) -> None:
    r = cli_proc("cas", "put-text", "hello")
    expected = codec.node_hash(schemas.hashes().text, "hello")
    assert (r.code, r.out, r.err) == (0, f'{{"hash":"{expected}"}}\n', "")


def test_put(cli: Any, root: Path) -> None:
    store, item = store_with_item(root)
    r = cli("cas", "put", item, '{"n": 3.0}')
    assert (r.code, r.err) == (0, "")
    h = r.json()["hash"]
    assert h == codec.node_hash(item, {"n": 3})
    assert store.require(h).payload == {"n": 3}
    assert cli("cas", "put", item, '{"n":3}').json() == {"hash": h}


def test_put_from_a_file(cli: Any, root: Path) -> None:
    _, item = store_with_item(root)
    Path("item.json").write_text('{\n  "n": 42\n}\n')
    r = cli("cas", "put", item, "item.json")
    assert r.code == 0, r.err
    h = r.json()["hash"]
    assert h == codec.node_hash(item, {"n": 42})
    assert cli("cas", "get", h).json()["payload"] == {"n": 42}
    absolute = Path("item.json").resolve()
    assert cli("cas", "put", item, str(absolute)).json() == {"hash": h}


def test_put_a_schema_into_an_empty_store(cli: Any, root: Path) -> None:
    meta = meta_hash()
    r = cli("cas", "put", meta, '{"title": "Name", "type": "string"}')
    assert r.code == 0, r.err
    s = r.json()["hash"]
    assert s == codec.node_hash(meta, {"title": "Name", "type": "string"})
    r = cli("cas", "put", s, '"Ada"')
    assert r.json() == {"hash": codec.node_hash(s, "Ada")}
    assert cli("cas", "schema", "list").json()[1] == {"hash": s, "title": "Name"}


def _one_line_error(r: Any) -> str:
    assert r.code == 1
    assert r.out == ""
    assert r.err.endswith("\n")
    assert r.err.count("\n") == 1, r.err
    assert r.err.startswith("error: ")
    return str(r.err[len("error: ") : -1])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            "{oops",
            'Cannot parse JSON from "{oops": Expecting property name enclosed in double quotes: '
            "line 1 column 2 (char 1) (and no such file)",
        ),
        (
            "hello",
            'Cannot parse JSON from "hello": Expecting value: line 1 column 1 (char 0) '
            "(and no such file)",
        ),
        (
            "NaN",
            'Cannot parse JSON from "NaN": NaN is not a valid JSON value (and no such file)',
        ),
        (
            '{"n": 1}\n{"n": 2}',
            'Cannot parse JSON from \'{"n": 1}\\n{"n": 2}\': Extra data: line 2 column 1 '
            "(char 9) (and no such file)",
        ),
    ],
)
def test_put_invalid_json(cli: Any, root: Path, snapshot: Any, data: str, message: str) -> None:
    _, item = store_with_item(root)
    before = snapshot(root)
    r = cli("cas", "put", item, data)
    assert _one_line_error(r) == message
    assert snapshot(root) == before


def test_put_invalid_json_file(cli: Any, root: Path, snapshot: Any) -> None:
    _, item = store_with_item(root)
    Path("bad.json").write_text('{"n": 1,}')
    Path("dir.json").mkdir()
    before = snapshot(root)
    r = cli("cas", "put", item, "bad.json")
    assert _one_line_error(r) == (
        'Cannot parse JSON from "bad.json": Expecting property name enclosed in double quotes: '
        "line 1 column 9 (char 8)"
    )
    r = cli("cas", "put", item, "dir.json")
    assert _one_line_error(r) == 'Cannot parse JSON from "dir.json": Is a directory'
    Path("latin1.json").write_bytes(b'"\xe9"')
    r = cli("cas", "put", item, "latin1.json")
    assert _one_line_error(r).startswith(
        "Cannot parse JSON from \"latin1.json\": 'utf-8' codec can't decode byte 0xe9"
    )
    r = cli("cas", "put", item, "x" * 5000)
    assert _one_line_error(r) == (
        f'Cannot parse JSON from "{"x" * 200}…": Expecting value: line 1 column 1 (char 0) '
        "(and no such file)"
    )
    assert snapshot(root) == before


def test_put_unknown_type(cli: Any, root: Path, snapshot: Any) -> None:
    store_with_item(root)
    before = snapshot(root)
    unknown = absent()
    r = cli("cas", "put", unknown, '{"n": 1}')
    assert _one_line_error(r) == f"unknown type: {unknown} (no schema node with that hash)"
    assert snapshot(root) == before


def test_put_unknown_type_on_an_empty_root_creates_nothing(cli: Any, root: Path) -> None:
    r = cli("cas", "put", absent(), '{"n": 1}')
    assert r.code == 1
    assert not root.exists()


def test_put_type_that_is_not_a_schema(cli: Any, root: Path, snapshot: Any) -> None:
    store, item = store_with_item(root)
    data = store.put(item, {"n": 1})
    before = snapshot(root)
    r = cli("cas", "put", data, '{"n": 2}')
    assert _one_line_error(r) == f"type {data} is not a schema (its type is {item})"
    assert snapshot(root) == before


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ('{"n": "one"}', "at /n: expected an integer, got a string"),
        ('{"n": 1, "extra": true}', 'at /extra: unknown key "extra" (known keys: n)'),
        ("{}", "at /n: missing (expected an integer)"),
        ("[1, 2]", "expected a mapping, got a list"),
    ],
)
def test_put_payload_failing_its_schema(
    cli: Any, root: Path, snapshot: Any, data: str, problem: str
) -> None:
    _, item = store_with_item(root)
    before = snapshot(root)
    r = cli("cas", "put", item, data)
    assert _one_line_error(r) == f"payload does not match schema {item}: {problem}"
    assert snapshot(root) == before


def test_put_invalid_schema(cli: Any, root: Path) -> None:
    r = cli("cas", "put", meta_hash(), '{"type": 12}')
    assert _one_line_error(r).startswith("invalid JSON Schema: ")
    assert not root.exists()


def test_put_malformed_type_hash(cli: Any, root: Path) -> None:
    r = cli("cas", "put", "../../x", '{"n": 1}')
    assert _one_line_error(r) == f'invalid type hash: "../../x" {HASH_HELP}'
    assert not root.exists()


# -- refs and walk ----------------------------------------------------------------------------


@dataclass
class Chain:
    workflow: str
    start: str
    out1: str
    det1: str
    step1: str
    out2: str
    det2: str
    step2: str


@pytest.fixture
def chain(root: Path) -> Chain:
    """A StartNode and two StepNodes, built with the store API."""
    store = open_store(root)
    h = schemas.ensure(store)
    workflow = store.put(
        h.workflow, {"name": "empty", "description": "no roles", "roles": {}, "graph": {}}
    )
    start = store.put(h.start, {"workflow": workflow, "prompt": "do it"})
    out1, det1 = store.put(h.text, "output 1"), store.put(h.text, "detail 1")
    step = {"start": start, "role": "r", "agent": "uwf-mock"}
    step1 = store.put(h.step, {**step, "prev": None, "output": out1, "detail": det1})
    out2, det2 = store.put(h.text, "output 2"), store.put(h.text, "detail 2")
    step2 = store.put(h.step, {**step, "prev": step1, "output": out2, "detail": det2})
    return Chain(workflow, start, out1, det1, step1, out2, det2, step2)


def test_refs(cli: Any, chain: Chain) -> None:
    r = cli("cas", "refs", chain.step2)
    assert (r.code, r.err) == (0, "")
    assert r.json() == {"refs": [chain.start, chain.step1, chain.out2, chain.det2]}
    assert cli("cas", "refs", chain.step1).json() == {"refs": [chain.start, chain.out1, chain.det1]}
    assert cli("cas", "refs", chain.start).json() == {"refs": [chain.workflow]}
    assert cli("cas", "refs", chain.out1).json() == {"refs": []}


def test_refs_missing_and_malformed(cli: Any, chain: Chain) -> None:
    h = absent()
    r = cli("cas", "refs", h)
    assert (r.code, r.out, r.err) == (1, "", f"error: Node not found: {h}\n")
    r = cli("cas", "refs", "x")
    assert (r.code, r.err) == (1, f'error: invalid hash: "x" {HASH_HELP}\n')


def test_walk(cli: Any, chain: Chain) -> None:
    r = cli("cas", "walk", chain.step2)
    assert (r.code, r.err) == (0, "")
    assert r.json() == {
        "hashes": [
            chain.step2,
            chain.start,
            chain.step1,
            chain.out2,
            chain.det2,
            chain.workflow,
            chain.out1,
            chain.det1,
        ]
    }
    assert cli("cas", "walk", chain.start).json() == {"hashes": [chain.start, chain.workflow]}


def test_walk_missing_root_and_malformed(cli: Any, chain: Chain) -> None:
    r = cli("cas", "walk", absent())
    assert (r.code, r.out) == (0, '{"hashes":[]}\n')
    r = cli("cas", "walk", "..")
    assert (r.code, r.err) == (1, f'error: invalid hash: ".." {HASH_HELP}\n')


# -- reindex and verify -----------------------------------------------------------------------


def test_reindex(cli: Any, root: Path, chain: Chain) -> None:
    store = open_store(root)
    text_index = store.index(schemas.hashes().text)
    shutil.rmtree(root / "cas" / "index")
    assert store.index(schemas.hashes().text) == []
    r = cli("cas", "reindex")
    assert (r.code, r.err) == (0, "")
    nodes = len(list(store.iter_hashes()))
    assert r.json() == {"status": "reindexed", "nodes": nodes, "types": 5}
    assert sorted(store.index(schemas.hashes().text)) == sorted(text_index)
    assert store.index(schemas.hashes().step) == [chain.step1, chain.step2]


def test_reindex_on_an_empty_root_creates_nothing(cli: Any, root: Path) -> None:
    r = cli("cas", "reindex")
    assert (r.code, r.out) == (0, '{"status":"reindexed","nodes":0,"types":0}\n')
    assert not root.exists()


def test_verify_clean(cli: Any, root: Path, chain: Chain) -> None:
    r = cli("cas", "verify")
    assert (r.code, r.err) == (0, "")
    nodes = len(list(open_store(root).iter_hashes()))
    assert r.json() == {"scanned": nodes, "ok": True, "damaged": []}


def test_verify_empty_root(cli: Any, root: Path) -> None:
    r = cli("cas", "verify")
    assert (r.code, r.out) == (0, '{"scanned":0,"ok":true,"damaged":[]}\n')
    assert not root.exists()


def test_verify_tampered_node(cli: Any, root: Path, chain: Chain) -> None:
    store = open_store(root)
    tamper(store, chain.out2, json.dumps({"type": "nope", "payload": 1, "timestamp": 1}))
    r = cli("cas", "verify")
    assert r.code == 1
    assert r.err == ""
    report = r.json()
    assert report["ok"] is False
    assert report["damaged"] == [
        {
            "hash": chain.out2,
            "problem": f"corrupt node {chain.out2}: not a {{type, payload, timestamp}} record",
        }
    ]


def test_verify_exit_code_in_a_real_process(cli_proc: Any, root: Path, chain: Chain) -> None:
    store = open_store(root)
    store.delete(chain.det1)
    r = cli_proc("cas", "verify")
    assert r.code == 1
    assert r.json()["damaged"] == [
        {"hash": chain.step1, "problem": f"it refers to missing node {chain.det1}"}
    ]


# -- schema list / get ------------------------------------------------------------------------


def test_schema_list_on_an_empty_root(cli: Any, root: Path) -> None:
    r = cli("cas", "schema", "list")
    assert (r.code, r.err) == (0, "")
    assert r.json() == [{"hash": meta_hash(), "title": "(meta-schema)"}]
    assert not root.exists()


def test_schema_list(cli: Any, root: Path) -> None:
    store = open_store(root)
    h = schemas.ensure(store)
    described = store.put_schema({"description": "only a description", "type": "number"})
    unnamed = store.put_schema({"type": "boolean"})
    r = cli("cas", "schema", "list")
    assert r.code == 0
    assert r.json() == [
        {"hash": meta_hash(), "title": "(meta-schema)"},
        {"hash": h.workflow, "title": "Workflow"},
        {"hash": h.start, "title": "StartNode"},
        {"hash": h.step, "title": "StepNode"},
        {"hash": h.text, "title": "Text"},
        {"hash": h.step_compact, "title": "StepNode (compact)"},
        {"hash": h.workflow_compact, "title": "Workflow (compactAfter)"},
        {"hash": h.blob, "title": "Blob"},
        {"hash": h.compact_request, "title": "CompactRequest"},
        {"hash": h.workflow_v1, "title": "Workflow (version 1)"},
        {"hash": h.start_resume, "title": "StartNode (resume)"},
        {"hash": h.step_join, "title": "StepNode (join)"},
        {"hash": h.workflow_fan_out, "title": "Workflow (fanOut)"},
        {"hash": h.workflow_retry, "title": "Workflow (retry)"},
        {"hash": h.workflow_v1_retry, "title": "Workflow (version 1, retry)"},
        {"hash": h.eval_run, "title": "EvalRun"},
        {"hash": described, "title": "only a description"},
        {"hash": unnamed, "title": "(unnamed)"},
    ]


def test_schema_get(cli: Any, root: Path) -> None:
    store = open_store(root)
    h = schemas.ensure(store)
    r = cli("cas", "schema", "get", h.start)
    assert (r.code, r.err) == (0, "")
    assert r.json() == schemas.START_NODE
    r = cli("--format", "yaml", "cas", "schema", "get", h.text)
    assert (r.code, r.out) == (0, "title: Text\ntype: string\n")


def test_schema_get_errors(cli: Any, root: Path) -> None:
    store = open_store(root)
    h = schemas.ensure(store)
    text = store.put(h.text, "not a schema")
    missing = absent()
    r = cli("cas", "schema", "get", missing)
    assert (r.code, r.out, r.err) == (1, "", f"error: Schema not found: {missing}\n")
    r = cli("cas", "schema", "get", text)
    assert (r.code, r.err) == (1, f"error: node {text} is not a schema (its type is {h.text})\n")
    r = cli("cas", "schema", "get", "abc")
    assert (r.code, r.err) == (1, f'error: invalid hash: "abc" {HASH_HELP}\n')


# -- storage root, help and usage -------------------------------------------------------------


def test_workflow_storage_root_in_process(
    cli: Any, tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "other-root"
    monkeypatch.delenv("UNCAGED_WORKFLOW_STORAGE_ROOT")
    monkeypatch.setenv("WORKFLOW_STORAGE_ROOT", str(other))
    h = cli("cas", "put-text", "hello").json()["hash"]
    assert open_store(other).has(h)
    assert not root.exists()
    assert cli("cas", "has", h).code == 0


def test_workflow_storage_root_in_a_real_process(cli_proc: Any, tmp_path: Path, root: Path) -> None:
    other = tmp_path / "other-root"
    env = {"UNCAGED_WORKFLOW_STORAGE_ROOT": "", "WORKFLOW_STORAGE_ROOT": str(other)}
    r = cli_proc("cas", "put-text", "hello", env=env)
    assert r.code == 0, r.err
    h = r.json()["hash"]
    assert open_store(other).has(h)
    assert not root.exists()
    assert cli_proc("cas", "has", h, env=env).code == 0
    # The uncaged variable wins when it is set.
    assert cli_proc("cas", "has", h, env={"WORKFLOW_STORAGE_ROOT": str(other)}).code == 1


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["get"],
        ["put"],
        ["put-text"],
        ["has"],
        ["refs"],
        ["walk"],
        ["reindex"],
        ["verify"],
        ["schema"],
        ["schema", "list"],
        ["schema", "get"],
    ],
)
def test_help(cli: Any, command: list[str]) -> None:
    r = cli("cas", *command, "--help")
    assert r.code == 0
    assert r.out.startswith(f"Usage: uwf cas {' '.join(command)}".rstrip())


def test_group_help_lists_every_command(cli: Any) -> None:
    out = cli("cas", "--help").out
    for name in ["get", "put", "put-text", "has", "refs", "walk", "reindex", "verify", "schema"]:
        assert f"\n  {name} " in out
    assert "list" in cli("cas", "schema", "--help").out


def test_usage_errors(cli: Any) -> None:
    r = cli("cas", "get")
    assert r.code == 2
    assert r.err.startswith("error: Missing argument")
    assert cli("cas").code == 2
    r = cli("cas", "nope")
    assert r.code == 2
    assert r.err.startswith("error: No such command")
