"""The store contract (one test class, run on every backend) and the filesystem specifics.

``StoreContract`` is not collected itself; ``TestFsStore`` and ``TestMemoryStore`` run all of
its tests against their own ``store`` fixture, so both backends are held to the same rules.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from uwf.backend.fs.nodes import FsStore
from uwf.backend.memory import MemoryStore
from uwf.cas import codec, ops
from uwf.cas.schema import META_SCHEMA, meta_hash
from uwf.cas.store import Node, Store
from uwf.util.errors import CorruptNode, InvalidInput, NotFound, SchemaViolation
from uwf.util.jsonfmt import canonical
from uwf.util.ulid import now_ms

ITEM: dict[str, Any] = {
    "title": "Item",
    "type": "object",
    "additionalProperties": False,
    "required": ["n"],
    "properties": {"n": {"type": "number"}, "tag": {"type": "string"}},
}
LINK: dict[str, Any] = {
    "title": "Link",
    "type": "object",
    "required": ["to"],
    "properties": {"to": {"type": "string", "format": "cas_ref"}},
}
MALFORMED = ["", "abc", "0123456789abc", "0123456789ABCD", "../../etc/pas", "ZZZZZZZZZZZZZ", None]


def missing_hash(store: Store, payload: Any = "nothing here") -> str:
    """A well-formed hash that no node in ``store`` has."""
    h = codec.node_hash("0000000000000", payload)
    assert not store.has(h)
    return h


def contents(store: Store) -> dict[str, Node | None]:
    """Everything the store holds (every node and its index entries) for "unchanged" checks."""
    out: dict[str, Any] = {h: store.get(h) for h in store.iter_hashes()}
    types = {node.type for node in out.values() if node is not None}
    out.update({f"index:{t}": store.index(t) for t in types})
    return out


class StoreContract:
    """Behaviour every backend must share (PORT §3)."""

    @pytest.fixture
    def store(self) -> Store:
        raise NotImplementedError

    # -- the meta-schema --------------------------------------------------------------------
    def test_meta_schema_is_self_typed(self, store: Store) -> None:
        h = store.ensure_meta()
        assert h == meta_hash() == codec.self_typed_hash(META_SCHEMA)
        node = store.get(h)
        assert node is not None
        assert node.type == h
        assert node.payload == canonical(META_SCHEMA)
        assert store.index(h) == [h]

    def test_ensure_meta_is_idempotent(self, store: Store) -> None:
        h = store.ensure_meta()
        first = store.require(h)
        time.sleep(0.005)
        assert store.ensure_meta() == h
        assert store.require(h).timestamp == first.timestamp
        assert list(store.iter_hashes()) == [h]

    # -- put / get ----------------------------------------------------------------------------
    def test_put_schema_then_round_trip(self, store: Store) -> None:
        s = store.put_schema(ITEM)
        assert s == codec.node_hash(meta_hash(), ITEM)
        schema_node = store.require(s)
        assert schema_node.type == meta_hash()
        assert schema_node.payload == ITEM

        before = now_ms()
        h = store.put(s, {"tag": "x", "n": 2.5})
        after = now_ms()
        assert h == codec.node_hash(s, {"n": 2.5, "tag": "x"})
        node = store.get(h)
        assert node is not None
        assert node.type == s
        assert node.payload == {"tag": "x", "n": 2.5}
        assert before <= node.timestamp <= after
        assert node.as_dict() == {"type": s, "payload": node.payload, "timestamp": node.timestamp}
        assert node.as_dict(timestamp=False) == {"type": s, "payload": node.payload}
        assert store.has(h)

    def test_put_is_idempotent_and_keeps_the_first_timestamp(self, store: Store) -> None:
        s = store.put_schema(ITEM)
        h1 = store.put(s, {"n": 1})
        t1 = store.require(h1).timestamp
        time.sleep(0.005)
        h2 = store.put(s, {"n": 1.0})
        assert h2 == h1
        assert store.require(h1).timestamp == t1
        assert store.index(s) == [h1]
        time.sleep(0.005)
        assert store.put_schema(ITEM) == s
        assert store.index(meta_hash()) == [meta_hash(), s]

    def test_canonical_form_is_stored(self, store: Store) -> None:
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 1.0})
        assert h == codec.node_hash(s, {"n": 1})
        payload = store.require(h).payload
        assert payload == {"n": 1}
        assert type(payload["n"]) is int

    def test_put_with_unknown_type(self, store: Store) -> None:
        store.ensure_meta()
        before = contents(store)
        unknown = missing_hash(store)
        with pytest.raises(NotFound) as info:
            store.put(unknown, {"n": 1})
        assert str(info.value) == f"unknown type: {unknown} (no schema node with that hash)"
        assert contents(store) == before

    def test_put_with_a_type_that_is_not_a_schema(self, store: Store) -> None:
        s = store.put_schema(ITEM)
        data = store.put(s, {"n": 1})
        before = contents(store)
        with pytest.raises(InvalidInput) as info:
            store.put(data, {"n": 1})
        assert str(info.value) == f"type {data} is not a schema (its type is {s})"
        assert contents(store) == before

    @pytest.mark.parametrize(
        ("payload", "problem"),
        [
            ({}, "'n' is a required property"),
            ({"n": "one"}, "at /n: 'one' is not of type 'number'"),
            ({"n": 1, "extra": True}, "Additional properties are not allowed"),
            ("just text", "'just text' is not of type 'object'"),
        ],
    )
    def test_invalid_payload_is_never_stored(
        self, store: Store, payload: Any, problem: str
    ) -> None:
        s = store.put_schema(ITEM)
        before = contents(store)
        with pytest.raises(SchemaViolation) as info:
            store.put(s, payload)
        assert str(info.value).startswith(f"payload does not match schema {s}: {problem}")
        assert "\n" not in str(info.value)
        assert contents(store) == before
        assert not store.has(codec.node_hash(s, payload))

    def test_invalid_schema_is_never_stored(self, store: Store) -> None:
        meta = store.ensure_meta()
        before = contents(store)
        with pytest.raises(InvalidInput) as info:
            store.put_schema({"type": "no-such-type"})
        assert str(info.value).startswith("invalid JSON Schema: ")
        with pytest.raises(InvalidInput) as info:
            store.put(meta, "a string is not a schema")
        assert str(info.value) == "a schema must be a JSON object or a boolean"
        assert contents(store) == before

    def test_cas_ref_format_is_enforced(self, store: Store) -> None:
        s = store.put_schema(LINK)
        before = contents(store)
        for bad in ["abc", "0123456789abc", "I123456789ABC", "G000000000000"]:
            with pytest.raises(SchemaViolation) as info:
                store.put(s, {"to": bad})
            assert "is not a 'cas_ref'" in str(info.value)
        assert contents(store) == before
        target = missing_hash(store)  # the format checks the spelling, not existence
        h = store.put(s, {"to": target})
        assert store.require(h).payload == {"to": target}

    def test_nan_is_refused(self, store: Store) -> None:
        s = store.put_schema(ITEM)
        with pytest.raises(InvalidInput) as info:
            store.put(s, {"n": float("nan")})
        assert str(info.value) == "NaN and Infinity are not valid JSON values"
        assert store.index(s) == []

    def test_malformed_type_hash_is_refused(self, store: Store) -> None:
        with pytest.raises(InvalidInput) as info:
            store.put("../x", {"n": 1})
        assert str(info.value) == (
            'invalid type hash: "../x" (expected 13 upper-case Crockford Base32 characters)'
        )

    # -- index and listing --------------------------------------------------------------------
    def test_index_lists_a_type_without_duplicates(self, store: Store) -> None:
        s = store.put_schema(ITEM)
        other = store.put_schema(LINK)
        a = store.put(s, {"n": 1})
        b = store.put(s, {"n": 2})
        assert store.put(s, {"n": 1}) == a
        link = store.put(other, {"to": a})
        assert store.index(s) == [a, b]
        assert store.index(other) == [link]
        assert store.index(meta_hash()) == [meta_hash(), s, other]
        assert store.index(missing_hash(store)) == []

    def test_iter_hashes_lists_every_node_once(self, store: Store) -> None:
        assert list(store.iter_hashes()) == []
        s = store.put_schema(ITEM)
        stored = {meta_hash(), s} | {store.put(s, {"n": i}) for i in range(5)}
        store.put(s, {"n": 0})
        listed = list(store.iter_hashes())
        assert sorted(listed) == sorted(stored)

    # -- malformed and missing hashes ---------------------------------------------------------
    @pytest.mark.parametrize("bad", MALFORMED)
    def test_has_is_false_for_malformed_input(self, store: Store, bad: Any) -> None:
        store.ensure_meta()
        assert store.has(bad) is False

    @pytest.mark.parametrize("bad", [b for b in MALFORMED if b is not None])
    def test_get_of_a_malformed_hash_raises(self, store: Store, bad: str) -> None:
        with pytest.raises(InvalidInput) as info:
            store.get(bad)
        assert str(info.value).startswith("invalid hash: ")
        assert str(info.value).endswith("(expected 13 upper-case Crockford Base32 characters)")

    def test_get_of_a_missing_hash(self, store: Store) -> None:
        h = missing_hash(store)
        assert store.get(h) is None
        assert store.has(h) is False
        with pytest.raises(NotFound) as info:
            store.require(h)
        assert str(info.value) == f"CAS node not found: {h}"
        with pytest.raises(NotFound) as info:
            store.require(h, "Node")
        assert str(info.value) == f"Node not found: {h}"

    # -- whole-store operations ---------------------------------------------------------------
    def test_verify_clean_store(self, store: Store) -> None:
        assert ops.verify(store) == {"scanned": 0, "ok": True, "damaged": []}
        s = store.put_schema(LINK)
        a = store.put(s, {"to": s})
        store.put(s, {"to": a})
        assert ops.verify(store) == {"scanned": 4, "ok": True, "damaged": []}

    def test_verify_reports_a_missing_type_and_a_dangling_ref(self, store: Store) -> None:
        s = store.put_schema(LINK)
        item = store.put_schema(ITEM)
        dangling_target = missing_hash(store)
        dangling = store.put(s, {"to": dangling_target})
        orphan = store.put(item, {"n": 1})
        store.delete(item)
        report = ops.verify(store)
        assert report["ok"] is False
        assert report["scanned"] == 4
        assert sorted(report["damaged"], key=lambda d: d["hash"]) == sorted(
            [
                {"hash": dangling, "problem": f"it refers to missing node {dangling_target}"},
                {"hash": orphan, "problem": f"its type {item} is missing"},
            ],
            key=lambda d: d["hash"],
        )

    def test_reindex_rebuilds_in_time_order(self, store: Store) -> None:
        store.ensure_meta()
        time.sleep(0.002)  # reindex orders by first-put time (ties by hash)
        s = store.put_schema(ITEM)
        time.sleep(0.002)
        hashes = []
        for i in range(4):
            hashes.append(store.put(s, {"n": i}))
            time.sleep(0.002)
        store.write_index({})
        assert store.index(s) == []
        assert ops.reindex(store) == {"nodes": 6, "types": 2}
        assert store.index(s) == hashes
        assert store.index(meta_hash()) == [meta_hash(), s]

    def test_delete(self, store: Store) -> None:
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 1})
        assert store.delete(h) > 0
        assert not store.has(h)
        assert store.get(h) is None
        assert store.delete(h) == 0


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def store(self) -> Store:
        return MemoryStore()

    def test_a_changed_node_is_corrupt(self, store: MemoryStore) -> None:
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 1})
        store.nodes[h] = Node(s, {"n": 2}, store.nodes[h].timestamp)
        with pytest.raises(CorruptNode) as info:
            store.get(h)
        assert str(info.value) == (
            f"corrupt node {h}: content hashes to {codec.node_hash(s, {'n': 2})}"
        )


class TestFsStore(StoreContract):
    @pytest.fixture
    def cas_dir(self, tmp_path: Path) -> Path:
        return tmp_path / "store" / "cas"

    @pytest.fixture
    def store(self, cas_dir: Path) -> Store:
        return FsStore(cas_dir)

    def _tamper(self, path: Path, text: str) -> None:
        path.chmod(0o644)
        path.write_text(text)
        path.chmod(0o444)

    def test_opening_reads_and_creates_nothing(self, cas_dir: Path, store: FsStore) -> None:
        h = missing_hash(store)
        assert store.get(h) is None
        assert store.index(h) == []
        assert list(store.iter_hashes()) == []
        assert ops.verify(store)["scanned"] == 0
        assert not cas_dir.exists()
        assert not cas_dir.parent.exists()

    def test_path_fan_out(self, cas_dir: Path, store: FsStore) -> None:
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 1})
        path = cas_dir / "objects" / h[:2] / h
        assert store.path(h) == path
        assert path.is_file()
        node = store.require(h)
        assert json.loads(path.read_text()) == node.as_dict()
        assert (cas_dir / "index" / s).read_text() == f"{h}\n"

    def test_node_files_are_read_only(self, cas_dir: Path, store: FsStore) -> None:
        s = store.put_schema(ITEM)
        store.put(s, {"n": 1})
        files = list((cas_dir / "objects").rglob("*"))
        nodes = [p for p in files if p.is_file()]
        assert len(nodes) == 3
        for p in nodes:
            assert stat.S_IMODE(p.stat().st_mode) == 0o444

    def test_no_temp_files_left(self, cas_dir: Path, store: FsStore) -> None:
        s = store.put_schema(ITEM)
        for i in range(3):
            store.put(s, {"n": i})
            store.put(s, {"n": i})
        expected = {f"objects/{h[:2]}/{h}" for h in store.iter_hashes()}
        expected |= {f"index/{meta_hash()}", f"index/{s}"}
        found = {p.relative_to(cas_dir).as_posix() for p in cas_dir.rglob("*") if p.is_file()}
        assert found == expected

    def test_tampered_payload_is_corrupt(self, store: FsStore) -> None:
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 1})
        record = store.require(h).as_dict()
        record["payload"] = {"n": 2}
        self._tamper(store.path(h), json.dumps(record))
        with pytest.raises(CorruptNode) as info:
            store.get(h)
        message = str(info.value)
        assert message.startswith(f"corrupt node {h}")
        assert message == f"corrupt node {h}: content hashes to {codec.node_hash(s, {'n': 2})}"
        assert store.has(h)  # present, but never used

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("{not json", "not valid JSON"),
            ("", "not valid JSON"),
            ('{"type": "X"}', "not a {type, payload, timestamp} record"),
            ("[1, 2]", "not a {type, payload, timestamp} record"),
        ],
    )
    def test_unreadable_node_file_is_corrupt(self, store: FsStore, text: str, reason: str) -> None:
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 1})
        self._tamper(store.path(h), text)
        with pytest.raises(CorruptNode) as info:
            store.get(h)
        assert str(info.value) == f"corrupt node {h}: {reason}"

    def test_torn_last_index_line_is_ignored(self, cas_dir: Path, store: FsStore) -> None:
        s = store.put_schema(ITEM)
        a = store.put(s, {"n": 1})
        index_file = cas_dir / "index" / s
        with open(index_file, "a") as fh:
            fh.write(a[:5])  # a crash in the middle of an append
        assert store.index(s) == [a]
        b = store.put(s, {"n": 2})  # the next append starts a line of its own
        assert store.index(s) == [a, b]
        assert index_file.read_text() == f"{a}\n{a[:5]}\n{b}\n"

    def test_reindex_rebuilds_a_deleted_index_dir(self, cas_dir: Path, store: FsStore) -> None:
        s = store.put_schema(ITEM)
        hashes = []
        for i in range(3):
            hashes.append(store.put(s, {"n": i}))
            time.sleep(0.002)
        shutil.rmtree(cas_dir / "index")
        stale = missing_hash(store)
        assert store.index(s) == []
        assert ops.reindex(store) == {"nodes": 5, "types": 2}
        assert store.index(s) == hashes
        assert sorted(os.listdir(cas_dir / "index")) == sorted([meta_hash(), s])
        (cas_dir / "index" / stale).write_text(f"{s}\n")  # an index of a type with no nodes
        ops.reindex(store)
        assert sorted(os.listdir(cas_dir / "index")) == sorted([meta_hash(), s])

    def test_reindex_skips_corrupt_nodes(self, store: FsStore) -> None:
        s = store.put_schema(ITEM)
        good = store.put(s, {"n": 1})
        bad = store.put(s, {"n": 2})
        self._tamper(store.path(bad), "garbage")
        assert ops.reindex(store) == {"nodes": 3, "types": 2}
        assert store.index(s) == [good]

    def test_verify_reports_a_tampered_node(self, store: FsStore) -> None:
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 1})
        store.put(s, {"n": 2})
        self._tamper(store.path(h), "{}")
        report = ops.verify(store)
        assert report["ok"] is False
        assert report["scanned"] == 4
        assert report["damaged"] == [
            {"hash": h, "problem": f"corrupt node {h}: not a {{type, payload, timestamp}} record"}
        ]

    def test_iter_hashes_ignores_foreign_files(self, cas_dir: Path, store: FsStore) -> None:
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 1})
        (cas_dir / "objects" / "notes.txt").write_text("x")
        (cas_dir / "objects" / h[:2] / f".tmp-{h}.1.2").write_text("x")
        (cas_dir / "objects" / h[:2] / "lowercase").write_text("x")
        wrong_fan = cas_dir / "objects" / "ZZ"
        wrong_fan.mkdir()
        (wrong_fan / h).write_text("x")
        assert sorted(store.iter_hashes()) == sorted([meta_hash(), s, h])
