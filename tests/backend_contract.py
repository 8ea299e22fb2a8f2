"""The conformance classes every storage backend must pass (docs/architecture.md).

``StoreContract`` holds a backend's node store (the CAS) to the rules of docs/format.md;
``BackendContract`` its thread table, registry and locks; ``SharedBackendContract`` adds what
only a backend shared by several processes can show: two processes racing for a head or a
lock, and a lock holder killed with SIGKILL. None is collected itself: each backend's test
module subclasses them with its own fixtures (``tests/test_cas_store.py``,
``tests/test_backend.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import xxhash

from rootfiles import put_unchecked
from support import reap
from uwf.backend.base import (
    ActiveThread,
    Backend,
    Failure,
    HistoryEntry,
    RetryPolicy,
    ThreadInfo,
    Waiting,
)
from uwf.backend.tree import FanOutLimits, FanOutRefused
from uwf.backend.workers import WorkerRecord
from uwf.cas import codec, ops
from uwf.cas.schema import META_SCHEMA, meta_hash
from uwf.cas.store import Node, Store
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash
from uwf.util.errors import (
    Busy,
    Collision,
    Conflict,
    CorruptNode,
    HeldBack,
    InvalidInput,
    NotActive,
    NotFound,
    SchemaViolation,
)
from uwf.util.jsonfmt import canonical
from uwf.util.ulid import ThreadId, new_thread_id, now_ms

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
    """Behaviour every backend must share (docs/format.md, "Nodes")."""

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
        assert node.as_json() == {"type": s, "payload": node.payload, "timestamp": node.timestamp}
        assert node.as_json(timestamp=False) == {"type": s, "payload": node.payload}
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
            ({}, "at /n: missing (expected a number)"),
            ({"n": "one"}, "at /n: expected a number, got a string"),
            ({"n": 1, "extra": True}, 'at /extra: unknown key "extra" (known keys: n, tag)'),
            ("just text", "expected a mapping, got a string"),
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
            assert str(info.value) == (
                f"payload does not match schema {s}: "
                f'at /to: expected a 13-character node hash, got "{bad}"'
            )
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

    @pytest.mark.parametrize("bad", [b for b in MALFORMED if b is not None])
    def test_a_walks_read_of_a_malformed_hash_raises(self, store: Store, bad: str) -> None:
        with pytest.raises(InvalidInput) as info:
            store.get(bad, keep=False)
        assert str(info.value).startswith("invalid hash: ")

    def test_a_walks_read_is_the_node_and_keeps_nothing(self, store: Store) -> None:
        """``get(h, keep=False)`` (a full history's reads): the stored node, read from the
        storage, and the process's kept nodes left as they were."""
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 7, "tag": "walked"})
        written = store.require(h)
        store.kept().clear()  # another process, which read nothing yet
        node = store.get(h, keep=False)
        assert node == written
        assert node is not None and node.payload == {"n": 7, "tag": "walked"}
        assert store.kept().get(h) is None and len(store.kept()) == 0
        assert store.get(missing_hash(store), keep=False) is None
        assert store.get(h) == written  # a plain read keeps it, as before
        assert store.kept().get(h) == written

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

    # -- hash collisions and copies ----------------------------------------------------------
    def test_a_hash_collision_fails_loudly(
        self, store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """XXH64 is not collision-resistant: a second node with a stored node's hash but
        other content is refused, never silently taken for the first. Collisions are made
        here by cutting the hash down to 2 bits (pigeonhole: 5 payloads share one)."""
        from uwf.util.base32 import encode64

        monkeypatch.setattr(
            codec, "hash_bytes", lambda data: encode64(xxhash.xxh64_intdigest(data) % 4)
        )
        kind = "0000000000000"
        seen: dict[str, int] = {}
        for n in range(5):
            h = codec.node_hash(kind, {"n": n})
            if h in seen:
                break
            seen[h] = n
            assert put_unchecked(store, kind, {"n": n}) == h
        else:
            raise AssertionError("no collision among 5 payloads in 4 hashes")
        before = contents(store)
        with pytest.raises(Collision) as err:
            put_unchecked(store, kind, {"n": n})
        assert err.value.message == (
            f"hash collision: node {h} is stored with other content; nothing was written "
            "(XXH64 is not collision-resistant: change the payload, e.g. add a field)"
        )
        with pytest.raises(Collision):
            store.import_node(h, Node(kind, {"n": n}, 1))
        assert contents(store) == before
        assert store.require(h).payload == {"n": seen[h]}
        assert put_unchecked(store, kind, {"n": seen[h]}) == h  # the same node again is fine

    def test_the_same_payload_in_another_key_order_is_the_same_node(self, store: Store) -> None:
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 1, "tag": "a"})
        assert store.put(s, {"tag": "a", "n": 1}) == h
        assert store.require(h).payload == {"n": 1, "tag": "a"}

    def test_import_node_keeps_the_timestamp_and_checks_the_hash(self, store: Store) -> None:
        s = store.put_schema(ITEM)
        h = codec.node_hash(s, {"n": 7})
        assert store.missing([h, s]) == {h}
        assert store.import_node(h, Node(s, {"n": 7}, 1234)) is True
        assert store.require(h).timestamp == 1234 and store.index(s) == [h]
        assert store.import_node(h, Node(s, {"n": 7}, 99)) is False
        assert store.require(h).timestamp == 1234 and store.missing([h, s]) == set()
        with pytest.raises(CorruptNode):
            store.import_node(h, Node(s, {"n": 8}, 1))

    def test_import_many_and_get_many(self, store: Store) -> None:
        s = store.put_schema(ITEM)
        kept = store.put(s, {"n": 0})
        nodes = [(codec.node_hash(s, {"n": i}), Node(s, {"n": i}, 1000 + i)) for i in range(4)]
        assert store.import_nodes(nodes) == 3  # {"n": 0} was there already
        assert store.index(s) == [kept] + [h for h, _ in nodes[1:]]
        got = store.get_many([h for h, _ in nodes] + [missing_hash(store)])
        assert {h: n.timestamp for h, n in got.items()} == {
            h: (n.timestamp if h != kept else store.require(kept).timestamp) for h, n in nodes
        }
        assert store.import_nodes(nodes) == 0
        with pytest.raises(CorruptNode):
            store.import_nodes([(nodes[0][0], Node(s, {"n": 9}, 1))])

    def test_delete(self, store: Store) -> None:
        s = store.put_schema(ITEM)
        h = store.put(s, {"n": 1})
        assert store.delete(h) > 0
        assert not store.has(h)
        assert store.get(h) is None
        assert store.delete(h) == 0


# -- the thread table, the registry and the locks -------------------------------------------


_THREADS = [new_thread_id(now_ms=1_700_000_000_000 + n) for n in range(16)]


def _thread(n: int) -> ThreadId:
    """The n-th of a fixed set of thread ids, oldest first."""
    return _THREADS[n]


def _chain_node(backend: Backend, text: str) -> NodeHash:
    """A node to use as a head (the table does not look inside it)."""
    return NodeHash(backend.nodes.put(schemas.ensure(backend.nodes).text, text))


class BackendContract:
    """Thread table, registry and locks: what every backend must do alike."""

    # Whether a released step lock leaves something for ``Locks.sweep`` (a lock file, a lock
    # object). On PostgreSQL it does not: a holder deletes its row as it releases the lock,
    # and only a holder that died leaves one.
    released_lock_leaves_something = True

    @pytest.fixture
    def backend(self) -> Backend:
        raise NotImplementedError

    # -- threads ------------------------------------------------------------------------
    def test_a_created_thread_is_active_with_its_info(self, backend: Backend) -> None:
        head, wf = _chain_node(backend, "start"), _chain_node(backend, "workflow")
        t = _thread(1)
        assert backend.threads.head(t) is None and backend.threads.get(t) is None
        backend.threads.create(t, head, ThreadInfo(wf, "Fix the bug"))
        assert backend.threads.head(t) == head
        assert backend.threads.get(t) == ActiveThread(t, head, ThreadInfo(wf, "Fix the bug"))
        assert backend.threads.active() == [ActiveThread(t, head, ThreadInfo(wf, "Fix the bug"))]

    def test_a_thread_id_is_created_once(self, backend: Backend) -> None:
        head = _chain_node(backend, "start")
        backend.threads.create(_thread(1), head, ThreadInfo())
        with pytest.raises(Conflict):
            backend.threads.create(_thread(1), head, ThreadInfo())
        assert len(backend.threads.active()) == 1

    def test_move_is_a_compare_and_swap(self, backend: Backend) -> None:
        a, b, c = (_chain_node(backend, x) for x in "abc")
        t = _thread(1)
        backend.threads.create(t, a, ThreadInfo(task="kept"))
        backend.threads.move(t, a, b)
        assert backend.threads.head(t) == b
        with pytest.raises(Conflict) as err:
            backend.threads.move(t, a, c)  # a stale expected head
        assert err.value.message == (
            f"thread {t} changed while the step ran (head is {b}, expected {a}); "
            "the step was not recorded"
        )
        assert backend.threads.head(t) == b
        record = backend.threads.get(t)
        assert record is not None and record.info.task == "kept"  # a move keeps the info

    def test_move_of_a_thread_that_is_not_active(self, backend: Backend) -> None:
        a, b = _chain_node(backend, "a"), _chain_node(backend, "b")
        with pytest.raises(NotActive) as err:
            backend.threads.move(_thread(9), a, b)
        assert err.value.message == f"thread not active: {_thread(9)}"
        backend.threads.create(_thread(1), a, ThreadInfo())
        backend.threads.archive(_thread(1), a, "killed", 5)
        with pytest.raises(NotActive) as err:
            backend.threads.move(_thread(1), a, b)
        assert err.value.message == f"thread not active: {_thread(1)} (status: killed)"

    def test_move_to_a_node_that_is_not_stored_is_refused(self, backend: Backend) -> None:
        """A head always names a stored node (docs/format.md, "Thread state"); the thread's
        own state is reported first: not active, then a stale expected head."""
        a, b = _chain_node(backend, "a"), _chain_node(backend, "b")
        ghost = NodeHash(missing_hash(backend.nodes))
        t = _thread(1)
        backend.threads.create(t, a, ThreadInfo(task="kept"))
        backend.threads.wait(t, Waiting("reviewer", 1, a))
        with pytest.raises(NotFound) as err:
            backend.threads.move(t, a, ghost)
        assert err.value.message == f"CAS node not found: {ghost}"
        assert backend.threads.get(t) == ActiveThread(
            t, a, ThreadInfo(task="kept"), Waiting("reviewer", 1, a)
        )  # nothing changed, the wait included
        with pytest.raises(Conflict):
            backend.threads.move(t, b, ghost)
        with pytest.raises(NotActive):
            backend.threads.move(_thread(9), a, ghost)
        backend.threads.move(t, a, b)
        assert backend.threads.head(t) == b

    def test_archive_moves_a_thread_to_the_history(self, backend: Backend) -> None:
        a, wf = _chain_node(backend, "a"), _chain_node(backend, "wf")
        t, u = _thread(1), _thread(2)
        backend.threads.create(t, a, ThreadInfo())
        backend.threads.create(u, a, ThreadInfo())
        assert backend.threads.archive(t, wf, "completed", 1000) == a
        assert backend.threads.head(t) is None and [r.thread for r in backend.threads.active()] == [
            u
        ]
        assert backend.threads.history() == [HistoryEntry(t, wf, a, 1000, "completed")]
        assert backend.threads.history_entry(t) == HistoryEntry(t, wf, a, 1000, "completed")
        assert backend.threads.history_entry(u) is None
        with pytest.raises(NotActive):
            backend.threads.archive(t, wf, "killed", 2000)
        assert len(backend.threads.history()) == 1

    def test_archive_keeps_the_task_line(self, backend: Backend) -> None:
        a, wf = _chain_node(backend, "a"), _chain_node(backend, "wf")
        backend.threads.create(_thread(1), a, ThreadInfo(wf, "Fix the bug"))
        backend.threads.archive(_thread(1), wf, "killed", 7)
        entry = HistoryEntry(_thread(1), wf, a, 7, "killed", "Fix the bug")
        assert backend.threads.history() == [entry]
        assert backend.threads.history_entry(_thread(1)) == entry
        assert entry.as_json()["task"] == "Fix the bug"

    def test_a_working_directory_is_kept_through_moves_waits_and_the_archive(
        self, backend: Backend
    ) -> None:
        """``thread start --cwd`` (docs/format.md, "Working directories"): the thread's
        directory is part of its info, kept by every change and by its history entry."""
        a, b, wf = (_chain_node(backend, x) for x in ("a", "b", "wf"))
        t = _thread(1)
        odd = '/srv/a "quoted" dir/ü: #x'  # JSON- and YAML-significant characters
        info = ThreadInfo(wf, "Fix the bug", odd)
        backend.threads.create(t, a, info)
        backend.threads.wait(t, Waiting("reviewer", 1, a))
        backend.threads.move(t, a, b)
        assert backend.threads.get(t) == ActiveThread(t, b, info)
        assert backend.threads.active() == [ActiveThread(t, b, info)]
        backend.threads.archive(t, wf, "completed", 9)
        entry = HistoryEntry(t, wf, b, 9, "completed", "Fix the bug", odd)
        assert backend.threads.history_entry(t) == entry
        assert backend.threads.history() == [entry]
        assert entry.as_json()["cwd"] == odd

    def test_archive_with_an_expected_head(self, backend: Backend) -> None:
        a, b = _chain_node(backend, "a"), _chain_node(backend, "b")
        t = _thread(1)
        backend.threads.create(t, b, ThreadInfo())
        with pytest.raises(Conflict) as err:
            backend.threads.archive(t, a, "completed", 1, expected=a)
        assert err.value.message == f"thread {t} moved to {b} while archiving"
        assert backend.threads.head(t) == b and backend.threads.history() == []
        backend.threads.archive(t, a, "max_rounds", 1, expected=b)
        assert backend.threads.history_entry(t) == HistoryEntry(t, a, b, 1, "max_rounds")

    def test_history_keeps_order(self, backend: Backend) -> None:
        a = _chain_node(backend, "a")
        for n in range(5):
            backend.threads.create(_thread(n), a, ThreadInfo())
        for n in (3, 1, 4, 0, 2):
            backend.threads.archive(_thread(n), a, "completed", n)
        assert [e.thread for e in backend.threads.history()] == [
            _thread(n) for n in (3, 1, 4, 0, 2)
        ]

    def test_unknown_history_status_is_refused(self, backend: Backend) -> None:
        a = _chain_node(backend, "a")
        backend.threads.create(_thread(1), a, ThreadInfo())
        with pytest.raises(ValueError):
            backend.threads.archive(_thread(1), a, "paused", 1)
        assert backend.threads.head(_thread(1)) == a

    def test_a_wait_lasts_until_the_head_moves(self, backend: Backend) -> None:
        a, b = _chain_node(backend, "a"), _chain_node(backend, "b")
        t = _thread(1)
        backend.threads.create(t, a, ThreadInfo(task="x"))
        waiting = Waiting("reviewer", 1234, a, "no terminal: a person answers later")
        backend.threads.wait(t, waiting)
        record = backend.threads.get(t)
        assert record is not None and record.waiting == waiting and record.info.task == "x"
        assert [r.waiting for r in backend.threads.active()] == [waiting]
        with pytest.raises(Conflict):
            backend.threads.wait(t, Waiting("reviewer", 1, b))  # not at its head
        backend.threads.move(t, a, b)
        record = backend.threads.get(t)
        assert record is not None and record.waiting is None
        with pytest.raises(NotActive):
            backend.threads.wait(_thread(7), Waiting("reviewer", 1, a))

    def test_a_fan_out_creates_the_children_and_the_wait_at_once(self, backend: Backend) -> None:
        """docs/format.md, "Fan-out and join": children and the parent's mark in one change;
        the parent is runnable again once no child is active."""
        a, b, c = (_chain_node(backend, x) for x in "abc")
        parent, kids = _thread(1), (_thread(2), _thread(3))
        backend.threads.create(parent, a, ThreadInfo(task="p", cwd="/srv/p"))
        # a child's task is rendered from an agent's output: the NUL rule applies to it
        info = ThreadInfo(task="k\0", cwd="/srv/p", parent=parent)
        children = [ActiveThread(k, c, info) for k in kids]
        waiting = Waiting("reviewer", 5, a, "children", kids)
        with pytest.raises(Conflict):  # not at its head: nothing is recorded
            backend.threads.fan_out(parent, waiting._replace(head=b), children)
        assert [r.thread for r in backend.threads.active()] == [parent]
        backend.threads.fan_out(parent, waiting, children)
        record = backend.threads.get(parent)
        assert record is not None and record.waiting == waiting
        stored = children[0]._replace(info=info._replace(task="k\ufffd"))
        assert backend.threads.get(kids[0]) == stored
        assert [r.thread for r in backend.threads.runnable(now_ms())] == list(kids)
        backend.threads.archive(kids[0], a, "completed", 10)
        assert [r.thread for r in backend.threads.runnable(now_ms())] == [kids[1]]
        backend.threads.archive(kids[1], a, "killed", 11)
        assert [r.thread for r in backend.threads.runnable(now_ms())] == [parent]  # the join is due
        assert backend.threads.history_entry(kids[1]) == HistoryEntry(
            kids[1], a, c, 11, "killed", "k\ufffd", cwd="/srv/p", parent=parent
        )
        assert [x.thread for x in backend.threads.children(parent)] == list(kids)
        with pytest.raises(NotActive):
            backend.threads.fan_out(_thread(9), waiting, [])

    def test_a_fan_out_tree_is_bounded_in_depth_and_threads(self, backend: Backend) -> None:
        """docs/format.md, "Fan-out and join": the root counts the threads its tree started;
        a fan-out past ``maxDepth`` or ``maxThreads`` is refused and records nothing."""
        a, c = _chain_node(backend, "a"), _chain_node(backend, "c")
        limits = FanOutLimits(depth=2, threads=5)
        root, kids, grand = _thread(1), (_thread(2), _thread(3)), (_thread(4), _thread(5))

        def fan(parent: ThreadId, ids: tuple[ThreadId, ...]) -> None:
            children = [ActiveThread(k, c, ThreadInfo(parent=parent)) for k in ids]
            head = backend.threads.head(parent)
            assert head is not None
            waiting = Waiting("reviewer", 5, head, "children", ids)
            backend.threads.fan_out(parent, waiting, children, limits)

        backend.threads.create(root, a, ThreadInfo(task="r"))
        fan(root, kids)
        fan(kids[0], grand)  # 4 of 5
        with pytest.raises(FanOutRefused) as err:
            fan(kids[1], (_thread(6), _thread(7)))
        assert err.value.message == (
            f"fan-out refused: the tree of thread {root} has started 4 thread(s), and 2 more "
            'would pass fanOut.maxThreads (5) of config.yaml (docs/format.md, "Fan-out and '
            'join")'
        )
        with pytest.raises(FanOutRefused) as err:
            fan(grand[0], (_thread(8),))
        assert err.value.message.startswith(
            f"fan-out refused: thread {grand[0]} is 2 level(s) below its root {root}, and its "
            "children would pass fanOut.maxDepth (2) of config.yaml"
        )
        record = backend.threads.get(kids[1])
        assert record is not None and record.waiting is None  # nothing recorded
        assert len(backend.threads.active()) == 5
        found = backend.threads.get(root)
        assert found is not None and found.info.descendants == 4
        fan(kids[1], ())  # an empty list starts nothing: never refused

    def test_a_failure_counts_attempts_until_a_step_lands(self, backend: Backend) -> None:
        """docs/format.md, "Thread state": the last failure, its attempts at this head."""
        a, b = _chain_node(backend, "a"), _chain_node(backend, "b")
        t = _thread(1)
        backend.threads.create(t, a, ThreadInfo(task="x"))
        first = Failure(a, "error: agent failed", 5, 1000, role="dev", agent="uwf-cmd", host="h1")
        stored = backend.threads.fail(t, first)
        assert stored == first._replace(attempts=1, since=1000, retry_at=2000)  # back-off 1 s
        record = backend.threads.get(t)
        assert record is not None and record.failure == stored and record.info.task == "x"
        again = backend.threads.fail(t, Failure(a, "error: again", 1, 2000, host="h2"))
        assert again == Failure(a, "error: again", 1, 2000, 2, 1000, None, None, "h2", None, 4000)
        assert [r.failure for r in backend.threads.active()] == [again]
        waiting = Waiting("dev", 3000, a)
        backend.threads.wait(t, waiting)  # a deferral keeps the count
        record = backend.threads.get(t)
        assert record is not None and (record.waiting, record.failure) == (waiting, again)
        assert again.as_json() == {
            "head": a, "error": "error: again", "code": 1, "at": 2000, "attempts": 2,
            "since": 1000, "host": "h2", "retryAt": 4000,
        }  # fmt: skip
        with pytest.raises(Conflict):
            backend.threads.fail(t, Failure(b, "error: elsewhere", 1, 1))  # not at its head
        backend.threads.move(t, a, b)  # a step landed
        record = backend.threads.get(t)
        assert record is not None and record.failure is None and record.waiting is None
        assert backend.threads.fail(t, Failure(b, "e", 5, 4000)).attempts == 1
        with pytest.raises(NotActive):
            backend.threads.fail(_thread(7), Failure(a, "e", 5, 1))
        backend.threads.archive(t, a, "killed", 5000)
        with pytest.raises(NotActive):
            backend.threads.fail(t, Failure(b, "e", 5, 6000))

    def test_a_retry_policy_backs_off_then_marks_the_thread_failed(self, backend: Backend) -> None:
        """docs/format.md, "Retries": the next allowed attempt, the dead-letter mark, and
        ``retry`` that ends both; ``runnable`` leaves out what may not be tried now."""
        a, b = _chain_node(backend, "a"), _chain_node(backend, "b")
        t, other = _thread(1), _thread(2)
        backend.threads.create(t, a, ThreadInfo())
        backend.threads.create(other, b, ThreadInfo())
        policy = RetryPolicy(attempts=3, backoff=10, max_backoff=15)
        one = backend.threads.fail(t, Failure(a, "e", 5, 1000), policy)
        assert (one.attempts, one.limit, one.retry_at, one.exhausted) == (1, 3, 11_000, False)
        assert [r.thread for r in backend.threads.runnable(10_999)] == [other]
        assert [r.thread for r in backend.threads.runnable(11_000)] == [t, other]
        two = backend.threads.fail(t, Failure(a, "e", 5, 12_000), policy)
        assert (two.attempts, two.retry_at, two.exhausted) == (2, 27_000, False)  # capped: 15 s
        three = backend.threads.fail(t, Failure(a, "e", 5, 30_000), policy)
        assert (three.attempts, three.retry_at, three.exhausted) == (3, None, True)
        assert three.as_json()["exhausted"] is True and three.as_json()["limit"] == 3
        record = backend.threads.get(t)
        assert record is not None and record.failure == three
        assert [r.thread for r in backend.threads.runnable(10**15)] == [other]  # never again
        assert backend.threads.retry(t) == three
        record = backend.threads.get(t)
        assert record is not None and record.failure is None and record.head == a
        assert [r.thread for r in backend.threads.runnable(0)] == [t, other]
        assert backend.threads.retry(t) is None  # nothing left to end
        assert backend.threads.fail(t, Failure(a, "e", 5, 40_000), policy).attempts == 1
        backend.threads.archive(t, a, "killed", 50_000)
        with pytest.raises(NotActive):
            backend.threads.retry(t)

    def test_a_priority_is_kept_and_changed(self, backend: Backend) -> None:
        """docs/format.md, "Priorities": set at creation, changed by ``prioritize``, kept by
        a head move."""
        a, b = _chain_node(backend, "a"), _chain_node(backend, "b")
        t = _thread(1)
        backend.threads.create(t, a, ThreadInfo(task="x", priority=3))
        assert backend.threads.prioritize(t, -2) == 3
        backend.threads.move(t, a, b)
        record = backend.threads.get(t)
        assert record is not None and record.info == ThreadInfo(task="x", priority=-2)
        assert [r.info.priority for r in backend.threads.runnable(0)] == [-2]
        with pytest.raises(NotActive):
            backend.threads.prioritize(_thread(9), 1)

    def test_a_start_key_names_one_thread_per_scope(self, backend: Backend) -> None:
        """docs/format.md, "Start keys"."""
        a = _chain_node(backend, "a")
        t1, t2, t3 = _thread(1), _thread(2), _thread(3)
        assert backend.threads.keyed("wf", "k") is None
        assert backend.threads.create_keyed("wf", "k", t1, a, ThreadInfo(task="x")) == (t1, True)
        assert backend.threads.create_keyed("wf", "k", t2, a, ThreadInfo()) == (t1, False)
        assert backend.threads.keyed("wf", "k") == t1
        assert backend.threads.create_keyed("other", "k", t3, a, ThreadInfo()) == (t3, True)
        assert sorted(r.thread for r in backend.threads.active()) == [t1, t3]
        backend.threads.archive(t1, a, "completed", 1)
        assert backend.threads.create_keyed("wf", "k", t2, a, ThreadInfo()) == (t1, False)
        assert backend.threads.get(t2) is None

    def test_limits_cap_holders_at_once_and_holds_a_minute(self, backend: Backend) -> None:
        """docs/format.md, "Limits"."""

        def refused(name: str, concurrency: int | None, per_minute: int | None) -> str:
            try:
                with backend.limits.hold(name, concurrency, per_minute):
                    return "held"
            except HeldBack as exc:
                return exc.message

        with backend.limits.hold("agents/a", 2, None), backend.limits.hold("agents/a", 2, None):
            assert refused("agents/a", 2, None) == "concurrency"
            assert refused("agents/b", 2, None) == "held"  # another name, other slots
        assert refused("agents/a", 1, None) == "held"  # released: room again
        assert [refused("providers/p", None, 2) for _ in range(3)] == [
            "held", "held", "perMinute",
        ]  # fmt: skip
        assert refused("providers/p", 5, 2) == "perMinute"  # a refused hold counts nothing
        assert refused("providers/p", 1, None) == "held"  # ... and left no slot taken
        soon, later = now_ms() + 60_000, now_ms() + 120_000
        assert backend.limits.paused("providers/p") is None
        assert backend.limits.pause("providers/p", later) == later
        assert backend.limits.pause("providers/p", soon) == later  # never shortened
        assert backend.limits.paused("providers/p") == later
        assert backend.limits.paused("providers/q") is None
        backend.limits.pause("providers/q", now_ms() - 1)  # already over
        assert backend.limits.paused("providers/q") is None

    # -- registry -----------------------------------------------------------------------
    def test_registry_set_returns_the_previous_hash(self, backend: Backend) -> None:
        a, b = _chain_node(backend, "a"), _chain_node(backend, "b")
        assert backend.registry.read() == {} and backend.registry.get("review") is None
        assert backend.registry.set("review", a) is None
        assert backend.registry.set("plan.v2", b) is None
        assert backend.registry.set("review", b) == a
        assert backend.registry.set("review", b) == b
        assert backend.registry.read() == {"review": b, "plan.v2": b}
        assert backend.registry.get("review") == b

    # -- locks --------------------------------------------------------------------------
    def test_a_step_lock_is_exclusive_and_seen_without_taking_it(self, backend: Backend) -> None:
        t, u = _thread(1), _thread(2)
        assert backend.locks.running() == set() and backend.locks.holder(t) is None
        with backend.locks.step(t, wait=False) as lock:
            assert backend.locks.running() == {t}
            assert backend.locks.is_running(t) and not backend.locks.is_running(u)
            holder = backend.locks.holder(t)
            assert holder is not None and holder.pid == os.getpid() and holder.role is None
            lock.note(role="reviewer", agent="uwf-mock")
            holder = backend.locks.holder(t)
            assert holder is not None and (holder.role, holder.agent) == ("reviewer", "uwf-mock")
            with pytest.raises(Busy) as err, backend.locks.step(t, wait=False):
                pass
            assert err.value.message == f"thread {t} is busy"
            with backend.locks.step(u, wait=False):  # other threads step freely
                assert backend.locks.running() == {t, u}
        assert backend.locks.running() == set() and backend.locks.holder(t) is None

    def test_a_step_lock_is_released_by_an_exception(self, backend: Backend) -> None:
        with pytest.raises(RuntimeError), backend.locks.step(_thread(1), wait=False):
            raise RuntimeError("agent crashed")
        with backend.locks.step(_thread(1), wait=False):
            pass

    def test_wait_queues_behind_the_holder(self, backend: Backend) -> None:
        t = _thread(1)
        order: list[str] = []
        release = threading.Event()

        def second() -> None:
            with backend.locks.step(t, wait=True):
                order.append("second")

        with backend.locks.step(t, wait=False):
            waiter = threading.Thread(target=second)
            waiter.start()
            release.wait(0.2)
            order.append("first")
        waiter.join(10)
        assert order == ["first", "second"]

    def test_sweep_removes_the_locks_of_archived_threads_but_never_a_held_one(
        self, backend: Backend
    ) -> None:
        t, u, v = _thread(1), _thread(2), _thread(3)
        left = int(self.released_lock_leaves_something)
        for x in (t, u, v):
            with backend.locks.step(x, wait=False):
                pass  # each leaves what a released step lock leaves (a lock file…), if anything
        with backend.locks.step(v, wait=False):  # v: a step that a kill is stopping
            assert backend.locks.sweep({t, v}, dry_run=True) == left
            assert backend.locks.sweep({t, v}) == left  # t's
            assert backend.locks.sweep({t, v}) == 0
            assert backend.locks.running() == {v}
            with pytest.raises(Busy), backend.locks.step(v, wait=False):
                pass  # still held
        assert backend.locks.sweep({t, v}) == left  # v's, once released
        assert backend.locks.sweep({t, u, v}, dry_run=True) == left  # u was never swept
        with backend.locks.step(t, wait=False):  # a late step still locks and sees it archived
            assert backend.locks.running() == {t}

    def test_a_background_holder_records_its_log(self, backend: Backend) -> None:
        t = _thread(1)
        with backend.locks.step(t, wait=False, log="/srv/uwf/runs/t.log") as lock:
            holder = backend.locks.holder(t)
            assert holder is not None and holder.background
            assert holder.log == "/srv/uwf/runs/t.log" and holder.pid == os.getpid()
            lock.note(role="reviewer", agent="uwf-mock")
            holder = backend.locks.holder(t)
            assert holder is not None and holder.log == "/srv/uwf/runs/t.log"
            assert (holder.role, holder.agent) == ("reviewer", "uwf-mock")
        assert backend.locks.holder(t) is None
        with backend.locks.step(t, wait=False):
            holder = backend.locks.holder(t)
            assert holder is not None and not holder.background and holder.log is None

    def test_a_worker_names_itself_in_its_holder_record(self, backend: Backend) -> None:
        t, u = _thread(1), _thread(2)
        worker = str(new_thread_id())
        with (
            backend.locks.step(t, wait=False, worker=worker) as lock,
            backend.locks.step(u, wait=False),
        ):
            lock.note(role="developer", agent="uwf-mock")
            holder = backend.locks.holder(t)
            assert holder is not None and holder.worker == worker and not holder.background
            assert holder.as_json()["worker"] == worker
            found = {h.thread: h for h in backend.locks.holders()}
            assert set(found) == {t, u}
            assert (found[t].worker, found[t].role, found[u].worker) == (worker, "developer", None)
        assert backend.locks.holders() == []

    def test_the_worker_registry_keeps_the_last_record_and_prunes_old_ones(
        self, backend: Backend
    ) -> None:
        now = now_ms()
        old = WorkerRecord(
            str(new_thread_id(now - 90_000)), "a", 11, now - 90_000, now - 90_000, 500
        )
        new = WorkerRecord(str(new_thread_id(now)), "b", 12, now, now, 10_000)
        assert backend.workers.records() == []
        backend.workers.beat(new)
        backend.workers.beat(old)
        assert backend.workers.records() == [old, new]  # oldest start first
        beat = new._replace(beat=now + 5, steps=3, failed=1)
        backend.workers.beat(beat)
        stopped = old._replace(stopped=now - 80_000, beat=now - 80_000)
        backend.workers.beat(stopped)
        assert backend.workers.records() == [stopped, beat]
        assert stopped.state(now, stepping=False) == "stopped"
        assert beat.state(now, stepping=True) == "running"
        assert beat.state(now + 30_005, stepping=False) == "idle"
        assert beat.state(now + 30_006, stepping=True) == "lost"  # 3 intervals without a beat
        assert backend.workers.prune(now - 60_000) == 1
        assert backend.workers.records() == [beat]
        assert backend.workers.prune(now - 60_000) == 0

    def test_a_stop_request_reaches_the_holding_it_was_made_for(self, backend: Backend) -> None:
        t, u = _thread(1), _thread(2)
        assert backend.locks.request_stop(t) is None  # nobody holds it: nothing recorded
        with (
            backend.locks.step(t, wait=False, log="run.log") as lock,
            backend.locks.step(u, wait=False) as other,
        ):
            assert not lock.stop_requested()
            asked = backend.locks.request_stop(t)
            assert asked is not None and asked.pid == os.getpid() and asked.log == "run.log"
            assert lock.stop_requested() and not other.stop_requested()
            assert backend.locks.running() == {t, u}  # a request releases nothing
        with backend.locks.step(t, wait=False) as later:
            assert not later.stop_requested()  # the request ended with its holding

    def test_clear_stale_leaves_live_and_released_locks_alone(self, backend: Backend) -> None:
        t = _thread(1)
        assert backend.locks.clear_stale(t) is None
        with backend.locks.step(t, wait=False, log="run.log"):
            assert backend.locks.clear_stale(t) is None
            holder = backend.locks.holder(t)
            assert holder is not None and holder.log == "run.log"
        assert backend.locks.clear_stale(t) is None
        with backend.locks.step(t, wait=False):
            pass

    def test_gc_lock_is_exclusive(self, backend: Backend) -> None:
        with backend.locks.gc():
            with pytest.raises(Busy) as err, backend.locks.gc():
                pass
            assert err.value.message == "cas gc or cas pack is already running"
        with backend.locks.gc():
            pass


# -- several processes on one backend --------------------------------------------------------

RACER = """
import json, os, sys, time
from uwf.backend import open_backend
from uwf.util.base32 import NodeHash
from uwf.util.errors import Busy, Conflict, UwfError
from uwf.util.ulid import ThreadId
spec, op, thread, a, b, go = sys.argv[1:7]
backend = open_backend(spec)
while not os.path.exists(go):
    time.sleep(0.001)
try:
    if op == "move":
        backend.threads.move(ThreadId(thread), NodeHash(a), NodeHash(b))
    elif op == "hold":
        with backend.locks.step(ThreadId(thread), wait=False):
            print("held", flush=True)
            time.sleep(float(b))
    elif op == "background":  # a background run: hold with a log until asked to stop
        with backend.locks.step(ThreadId(thread), wait=False, log=a) as lock:
            print("held", flush=True)
            while not lock.stop_requested():
                time.sleep(0.02)
            print("stopped", flush=True)
    elif op == "create":
        from uwf.backend.base import ThreadInfo
        backend.threads.create(ThreadId(thread), NodeHash(a), ThreadInfo())
    elif op == "register":
        backend.registry.set(thread, NodeHash(a))
    elif op == "keyed":  # create thread at head a unless key b names one; print the winner
        from uwf.backend.base import ThreadInfo
        got = backend.threads.create_keyed("wf", b, ThreadId(thread), NodeHash(a), ThreadInfo())
        print(f"{got[0]}:{got[1]}", flush=True)
        sys.exit(0)
    elif op == "fail":  # b failed attempts at head a
        from uwf.backend.base import Failure
        for n in range(int(b)):
            backend.threads.fail(ThreadId(thread), Failure(NodeHash(a), f"{os.getpid()}", 5, n))
    elif op == "fanout":  # fan out b children at head a, in a tree of at most 12 threads
        from uwf.backend.base import ActiveThread, ThreadInfo, Waiting
        from uwf.backend.tree import FanOutLimits, FanOutRefused
        from uwf.util.ulid import new_thread_id
        kids = [new_thread_id() for _ in range(int(b))]
        children = [ActiveThread(k, NodeHash(a), ThreadInfo(parent=thread)) for k in kids]
        waiting = Waiting("r", 1, NodeHash(a), "children", tuple(kids))
        try:
            backend.threads.fan_out(ThreadId(thread), waiting, children, FanOutLimits(3, 12))
        except FanOutRefused:
            print("FanOutRefused", flush=True)
            sys.exit(0)
    elif op == "attempt":  # non-waiting step-lock attempts for b seconds; how many refused
        end, tries, busy = time.monotonic() + float(b), 0, 0
        while time.monotonic() < end:
            tries += 1
            try:
                with backend.locks.step(ThreadId(thread), wait=False):
                    pass
            except Busy:
                busy += 1
        print("tries", tries, flush=True)
        print("ok" if busy == 0 else f"busy={busy}", flush=True)
        sys.exit(0)
    elif op == "read":  # "is a step running" for b seconds, as listings ask it
        end, reads = time.monotonic() + float(b), 0
        while time.monotonic() < end:
            reads += 1
            backend.locks.running()
            backend.locks.is_running(ThreadId(thread))
            backend.locks.holder(ThreadId(thread))
        print("reads", reads, flush=True)
    print("ok", flush=True)
except (Busy, Conflict) as exc:
    print(type(exc).__name__, flush=True)
"""


class SharedBackendContract(BackendContract):
    """What a backend shared by processes must guarantee (the filesystem, PostgreSQL)."""

    @pytest.fixture(autouse=True)
    def _reap_holders(self) -> Iterator[None]:
        """The lock holders a test started, ended and their pipes closed after it."""
        self.holders: list[subprocess.Popen[str]] = []
        yield
        for proc in self.holders:
            reap(proc)

    @pytest.fixture
    def spec(self) -> str:
        """What ``uwf.backend.open_backend`` takes to open this same backend elsewhere."""
        raise NotImplementedError

    def _race(self, tmp_path: Path, spec: str, jobs: list[tuple[str, ...]]) -> list[str]:
        go = tmp_path / "go"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", RACER, spec, *job, str(go)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for job in jobs
        ]
        time.sleep(0.3)  # every racer imported and waits at the line
        go.touch()
        outs = []
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            outs.append(out.split()[-1])
        return outs

    def test_two_processes_move_one_head_one_wins(
        self, backend: Backend, spec: str, tmp_path: Path
    ) -> None:
        a = _chain_node(backend, "a")
        others = [_chain_node(backend, f"next {n}") for n in range(6)]
        t = _thread(1)
        backend.threads.create(t, a, ThreadInfo())
        outs = self._race(tmp_path, spec, [("move", t, a, b) for b in others])
        assert sorted(outs) == ["Conflict"] * 5 + ["ok"]
        assert backend.threads.head(t) == others[outs.index("ok")]

    def test_processes_creating_threads_lose_none(
        self, backend: Backend, spec: str, tmp_path: Path
    ) -> None:
        a = _chain_node(backend, "a")
        jobs = [("create", _thread(n), a, "-") for n in range(8)]
        jobs += [("register", f"wf{n}", a, "-") for n in range(4)]
        assert self._race(tmp_path, spec, jobs) == ["ok"] * 12
        assert {r.thread for r in backend.threads.active()} == {_thread(n) for n in range(8)}
        assert set(backend.registry.read()) == {f"wf{n}" for n in range(4)}

    def test_processes_starting_with_one_key_create_one_thread(
        self, backend: Backend, spec: str, tmp_path: Path
    ) -> None:
        a = _chain_node(backend, "a")
        ops = [("keyed", _thread(n), a, "k") for n in range(1, 5)]
        outs = [out.split(":") for out in self._race(tmp_path, spec, ops)]
        winners = {thread for thread, _ in outs}
        assert len(winners) == 1
        assert sorted(created for _, created in outs) == ["False", "False", "False", "True"]
        assert [r.thread for r in backend.threads.active()] == list(winners)

    def test_failed_attempts_of_many_processes_are_all_counted(
        self, backend: Backend, spec: str, tmp_path: Path
    ) -> None:
        a = _chain_node(backend, "a")
        t = _thread(1)
        backend.threads.create(t, a, ThreadInfo())
        assert self._race(tmp_path, spec, [("fail", t, a, "25")] * 4) == ["ok"] * 4
        record = backend.threads.get(t)
        assert record is not None and record.failure is not None
        assert record.failure.attempts == 100

    def test_processes_fanning_out_in_one_tree_never_pass_its_limit(
        self, backend: Backend, spec: str, tmp_path: Path
    ) -> None:
        """Six children of one root fan out 3 each at once, in a tree of at most 12 threads:
        exactly two of them may (6 + 3 + 3), whichever they are."""
        a = _chain_node(backend, "a")
        root, kids = _thread(1), tuple(_thread(n) for n in range(2, 8))
        backend.threads.create(root, a, ThreadInfo())
        children = [ActiveThread(k, a, ThreadInfo(parent=root)) for k in kids]
        waiting = Waiting("r", 1, a, "children", kids)
        backend.threads.fan_out(root, waiting, children, FanOutLimits(3, 12))
        outs = self._race(tmp_path, spec, [("fanout", k, a, "3") for k in kids])
        assert sorted(outs) == ["FanOutRefused"] * 4 + ["ok"] * 2
        found = backend.threads.get(root)
        assert found is not None and found.info.descendants == 12
        assert len(backend.threads.active()) == 1 + 6 + 6

    def test_two_processes_race_for_a_step_lock(
        self, backend: Backend, spec: str, tmp_path: Path
    ) -> None:
        outs = self._race(tmp_path, spec, [("hold", _thread(1), "-", "1.0")] * 3)
        assert sorted(outs) == ["Busy", "Busy", "ok"]

    def test_readers_never_make_a_step_lock_attempt_fail(
        self, backend: Backend, spec: str, tmp_path: Path
    ) -> None:
        """Two processes ask "is a step running" in a tight loop while two others make
        non-waiting step-lock attempts on the same threads: no attempt is refused."""
        t, u = _thread(1), _thread(2)
        jobs = [("attempt", t, "-", "1.5"), ("attempt", u, "-", "1.5")]
        jobs += [("read", t, "-", "1.5"), ("read", u, "-", "1.5")]
        assert self._race(tmp_path, spec, jobs) == ["ok"] * 4

    def _holder(self, spec: str, tmp_path: Path, thread: ThreadId) -> subprocess.Popen[str]:
        """A process that holds the step lock of ``thread`` (for a minute, or until killed)."""
        (tmp_path / "go").touch()
        proc = subprocess.Popen(
            [sys.executable, "-c", RACER, spec, "hold", thread, "-", "60", str(tmp_path / "go")],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.holders.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    def test_a_lock_another_process_holds_is_never_swept(
        self, backend: Backend, spec: str, tmp_path: Path
    ) -> None:
        t = _thread(1)
        proc = self._holder(spec, tmp_path, t)
        try:
            assert backend.locks.sweep({t}, dry_run=True) == 0
            assert backend.locks.sweep({t}) == 0
            assert backend.locks.running() == {t}
            with pytest.raises(Busy), backend.locks.step(t, wait=False):
                pass
        finally:
            proc.kill()
            proc.wait(10)
        deadline = time.monotonic() + 10  # a server notices a dead session a moment later
        while backend.locks.is_running(t) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert backend.locks.sweep({t}) == 1

    def test_a_killed_holder_releases_its_lock(
        self, backend: Backend, spec: str, tmp_path: Path
    ) -> None:
        t = _thread(1)
        proc = self._holder(spec, tmp_path, t)
        assert backend.locks.running() == {t}
        holder = backend.locks.holder(t)
        assert holder is not None and holder.pid == proc.pid
        with pytest.raises(Busy), backend.locks.step(t, wait=False):
            pass
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 10
        while backend.locks.is_running(t) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert backend.locks.running() == set()
        with backend.locks.step(t, wait=False):
            pass

    def _background(self, spec: str, tmp_path: Path, thread: ThreadId) -> subprocess.Popen[str]:
        """A process holding ``thread``'s step lock as a background run (log ``run.log``)."""
        (tmp_path / "go").touch()
        go = str(tmp_path / "go")
        proc = subprocess.Popen(
            [sys.executable, "-c", RACER, spec, "background", thread, "run.log", "-", go],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.holders.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        return proc

    def test_a_stop_request_reaches_another_process(
        self, backend: Backend, spec: str, tmp_path: Path
    ) -> None:
        t = _thread(1)
        proc = self._background(spec, tmp_path, t)
        holder = backend.locks.holder(t)
        assert holder is not None and holder.pid == proc.pid and holder.log == "run.log"
        asked = backend.locks.request_stop(t)
        assert asked is not None and asked.pid == proc.pid
        out, _ = proc.communicate(timeout=30)
        assert (out.split(), proc.returncode) == (["stopped", "ok"], 0)
        assert backend.locks.holder(t) is None and backend.locks.clear_stale(t) is None

    def test_a_killed_background_run_leaves_a_stale_record(
        self, backend: Backend, spec: str, tmp_path: Path
    ) -> None:
        t = _thread(1)
        proc = self._background(spec, tmp_path, t)
        proc.kill()
        proc.wait(10)
        deadline = time.monotonic() + 10
        while backend.locks.is_running(t) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert backend.locks.holder(t) is None  # recognised as stale: not running
        assert backend.locks.request_stop(t) is None
        stale = backend.locks.clear_stale(t)
        assert stale is not None and stale.pid == proc.pid and stale.log == "run.log"
        assert backend.locks.clear_stale(t) is None  # cleaned up
        with backend.locks.step(t, wait=False) as lock:
            assert not lock.stop_requested()
