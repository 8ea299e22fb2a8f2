"""The node store contract run on the filesystem and memory stores, and filesystem specifics."""

from __future__ import annotations

import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from backend_contract import ITEM, LINK, StoreContract, contents, missing_hash  # noqa: F401
from uwf.backend.fs.nodes import FsStore
from uwf.backend.memory import MemoryStore
from uwf.cas import codec, ops
from uwf.cas.schema import meta_hash
from uwf.cas.store import Node, Store
from uwf.util.errors import CorruptNode


class TestMemoryStore(StoreContract):
    @pytest.fixture
    def store(self) -> Store:
        return MemoryStore()

    def test_a_changed_node_is_corrupt(self, store: MemoryStore) -> None:
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 1})
        written = store.nodes[h]
        store.nodes[h] = Node(s, {"n": 2}, written.timestamp)
        expected = f"corrupt node {h}: content hashes to {codec.node_hash(s, {'n': 2})}"
        # the process that wrote it keeps the node as written: never the changed one
        assert store.get(h) == written
        for read in (store.verified, store.stored):  # what cas verify and gc read: the storage
            with pytest.raises(CorruptNode) as info:
                read(h)
            assert str(info.value) == expected
        store.kept().clear()  # a process that never read it
        with pytest.raises(CorruptNode) as info:
            store.get(h)
        assert str(info.value) == expected


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

    def _reader(self, store: FsStore) -> FsStore:
        """The same store opened again: another process, which keeps no node yet."""
        return FsStore(store.dir, store.lock_dir)

    def test_opening_reads_and_creates_nothing(self, cas_dir: Path, store: FsStore) -> None:
        h = missing_hash(store)
        assert store.get(h) is None
        assert store.index(h) == []
        assert list(store.iter_hashes()) == []
        assert ops.verify(store)["scanned"] == 0
        assert not cas_dir.exists()
        assert not cas_dir.parent.exists()

    def test_a_loose_file_larger_than_one_read_is_read_whole(self, store: FsStore) -> None:
        """A loose file is read through its descriptor, 64 KiB a read: a larger node comes
        back whole, and checked."""
        s = store.put_schema(ITEM)
        tag = "".join(chr(0x41 + i % 26) for i in range(300_000))  # several reads' worth
        h = store.put(s, {"n": 1, "tag": tag})
        size = store.loose_bytes(h)
        assert size is not None and size > 4 * 65536
        node = self._reader(store).get(h, keep=False)
        assert node is not None and node.payload == {"n": 1, "tag": tag}
        self._tamper(store.path(h), store.path(h).read_text().replace("ABC", "ABD", 1))
        with pytest.raises(CorruptNode):
            self._reader(store).get(h)

    def test_path_fan_out(self, cas_dir: Path, store: FsStore) -> None:
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 1})
        path = cas_dir / "objects" / h[:2] / h
        assert store.path(h) == path
        assert path.is_file()
        node = store.require(h)
        assert json.loads(path.read_text()) == node.as_json()
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
        record = store.require(h).as_json()
        record["payload"] = {"n": 2}
        self._tamper(store.path(h), json.dumps(record))
        reader = self._reader(store)
        with pytest.raises(CorruptNode) as info:
            reader.get(h)
        message = str(info.value)
        assert message.startswith(f"corrupt node {h}")
        assert message == f"corrupt node {h}: content hashes to {codec.node_hash(s, {'n': 2})}"
        assert reader.has(h)  # present, but never used
        # the writer keeps the node it wrote, never the tampered bytes; cas verify reads them
        assert store.require(h).payload == {"n": 1}
        with pytest.raises(CorruptNode):
            store.verified(h)

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("{not json", "not valid JSON"),
            ("", "not valid JSON"),
            ('{"type": "X"}', "not a {type, payload, timestamp} record"),
            ("[1, 2]", "not a {type, payload, timestamp} record"),
            # the record's shape, checked without a set per read: a type that is no hash
            # (nor even hashable), a timestamp that is a bool, a key too many or missing
            (
                '{"type": ["X"], "payload": 1, "timestamp": 1}',
                "not a {type, payload, timestamp} record",
            ),
            (
                '{"type": {}, "payload": 1, "timestamp": 1}',
                "not a {type, payload, timestamp} record",
            ),
            (
                '{"type": "0123456789abc", "payload": 1, "timestamp": 1}',
                "not a {type, payload, timestamp} record",
            ),
            (
                '{"type": "0123456789ABC", "payload": 1, "timestamp": true}',
                "not a {type, payload, timestamp} record",
            ),
            (
                '{"type": "0123456789ABC", "payload": 1, "timestamp": 1, "x": 2}',
                "not a {type, payload, timestamp} record",
            ),
            (
                '{"type": "0123456789ABC", "payload": 1, "stamp": 1}',
                "not a {type, payload, timestamp} record",
            ),
        ],
    )
    def test_unreadable_node_file_is_corrupt(self, store: FsStore, text: str, reason: str) -> None:
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 1})
        self._tamper(store.path(h), text)
        with pytest.raises(CorruptNode) as info:
            self._reader(store).get(h)
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


class TestPostgresStore(StoreContract):
    @pytest.fixture
    def store(self, pg_url: str, tmp_path: Path) -> Any:
        from uwf.backend import open_backend

        backend = open_backend(pg_url)
        yield backend.nodes
        backend.close()


class PackingFsStore(FsStore):
    """An FsStore that packs after every write: every node a test reads lives in a pack, and
    a put of a node that is already stored finds it packed (so it writes a loose copy)."""

    def _store(self, h: str, type_hash: str, payload: Any, *, typed: bool = True) -> None:
        super()._store(h, type_hash, payload, typed=typed)
        self.pack()


class TestPackedFsStore(StoreContract):
    @pytest.fixture
    def store(self, tmp_path: Path) -> Store:
        return PackingFsStore(tmp_path / "store" / "cas")

    def test_every_node_is_in_a_pack(self, tmp_path: Path, store: PackingFsStore) -> None:
        s = store.put_schema(ITEM)
        hashes = [store.put(s, {"n": i}) for i in range(3)]
        assert not list((tmp_path / "store" / "cas" / "objects").rglob("*/*"))
        fresh = FsStore(tmp_path / "store" / "cas")  # another process's view
        assert [fresh.require(h).payload for h in hashes] == [{"n": 0}, {"n": 1}, {"n": 2}]
        assert sorted(fresh.iter_hashes()) == sorted([meta_hash(), s, *hashes])
