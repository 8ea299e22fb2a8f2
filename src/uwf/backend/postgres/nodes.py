"""The PostgreSQL node store: ``uwf_nodes`` keyed by hash, and the type index.

Each row holds the node's type, its payload as the canonical compact JSON the filesystem
stores (``text``: never ``jsonb``, which would reorder keys and renumber floats), its
timestamp and its last put (gc's grace). A read re-hashes the row like the filesystem store
re-hashes a file. Every write runs in one transaction holding the shared sweep lock (an
advisory lock ``cas gc`` takes exclusively while it deletes), so a node is never deleted
between a writer finding it and the writer linking to it; a put is one statement, the
``uwf_put`` function (``schema``, version 5).

A node never changes once stored, so a process keeps the nodes it read or wrote
(``CACHE`` of them), and the hashes it found stored: a worker's later steps read their
workflow, start and schemas, and the step its agent just wrote, without asking the database
again.

Around a step (``staging``), puts are held in the process, validated as any put and read
back from there, and ``PgThreads`` writes them in the transaction of the head's
compare-and-swap (``uwf_land``): one durable commit per step, and nothing of a step that
failed is ever written (docs/format.md, "The PostgreSQL backend"). ``put_many`` outside a
step is one statement (``uwf_put_many``).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from uwf.backend.postgres.db import Db
from uwf.backend.postgres.schema import SWEEP_KEY
from uwf.cas import codec
from uwf.cas.store import Node, NodeInfo, Store, decode_node
from uwf.util.base32 import NodeHash, check_hash
from uwf.util.errors import Collision, CorruptNode, NotFound, UwfError
from uwf.util.jsonfmt import dumps

CACHE = 4096  # nodes a process keeps (content addressing: a node never changes)
# What a step may hold for its commit: beyond it, what is held is written at once (an agent
# writing without end fills the database, as before, not this process; a step writes a few KB)
STAGE_BYTES = 32 * 1024 * 1024


def _now() -> int:
    return time.time_ns() // 1_000_000


# What a step reads first (``PgStore.prefetch_step``): %s the head, %s the workflow recorded
# with the thread (else the start's), %s the meta-schema; and, %s, the hashes of uwf's own
# schemas, of which only the stored ones' hashes are returned (a row whose type is NULL): an
# agent writing its StepNode asks which are missing (``protocol.schemas.ensure``), and this
# process answers from what it found. JSON is read only where it is an object; a payload
# that is not JSON makes the query fail, and the step reads one by one.
_STEP_NODES = """
WITH given AS (SELECT %s::text AS head, %s::text AS workflow, %s::text AS meta),
h AS (SELECT n.payload::json AS p FROM uwf_nodes n, given WHERE n.hash = given.head),
ho AS (SELECT p FROM h WHERE json_typeof(p) = 'object'),
s AS (SELECT n.payload::json AS p FROM uwf_nodes n, ho
      WHERE n.hash = ho.p->>'start' OR n.hash = ho.p->>'workflow'),
wf AS (SELECT coalesce(given.workflow,
                       (SELECT s.p->>'workflow' FROM s WHERE json_typeof(s.p) = 'object'
                        LIMIT 1)) AS hash FROM given),
w AS (SELECT n.payload::json AS p FROM uwf_nodes n, wf WHERE n.hash = wf.hash),
d AS (SELECT n.payload::json AS p FROM uwf_nodes n, ho WHERE n.hash = ho.p->>'detail'
      AND n.payload LIKE '{%%'),
wanted AS (
    SELECT head AS hash FROM given UNION SELECT meta FROM given UNION SELECT hash FROM wf
    UNION SELECT p->>k FROM ho, unnest(ARRAY['start', 'prev', 'output', 'detail',
                                             'workflow']) AS k
    UNION SELECT r.value->>'meta' FROM w, json_each(
        CASE WHEN json_typeof(w.p) = 'object' AND json_typeof(w.p->'roles') = 'object'
             THEN w.p->'roles' ELSE '{}'::json END) AS r
        WHERE json_typeof(r.value) = 'object'
    UNION SELECT n.type FROM uwf_nodes n, given WHERE n.hash = given.head
    UNION SELECT n.type FROM uwf_nodes n, ho WHERE n.hash = ho.p->>'detail'
    UNION SELECT n.type FROM uwf_nodes n, d WHERE n.hash = d.p->'turns'->>0
)
SELECT n.hash, n.type, n.payload, n.ts FROM uwf_nodes n WHERE n.hash IN (SELECT hash FROM wanted)
UNION ALL SELECT n.hash, NULL, NULL, NULL FROM uwf_nodes n WHERE n.hash = ANY(%s::text[])
"""


def collision(h: str) -> Collision:
    return Collision(
        f"hash collision: node {h} is stored with other content; nothing was written "
        "(XXH64 is not collision-resistant: change the payload, e.g. add a field)"
    )


class PgStore(Store):
    def __init__(self, db: Db) -> None:
        self.db = db
        self._seen: dict[str, Node] = {}
        self._present: set[str] = set()  # hashes found stored (``missing``)
        self._stage: dict[str, Node] | None = None  # a step's puts (``staging``)
        self._staged = 0  # their JSON's bytes

    def _keep(self, h: str, node: Node) -> Node:
        if len(self._seen) >= CACHE:
            self._seen.clear()
        self._seen[h] = node
        return node

    def _found(self, hashes: Sequence[str]) -> None:
        if len(self._present) >= CACHE * 4:
            self._present.clear()
        self._present.update(hashes)

    # -- a step's puts, held for its commit --------------------------------------------------
    @contextlib.contextmanager
    def staging(self) -> Iterator[None]:
        outer = self._stage
        if outer is None:
            self._stage, self._staged = {}, 0
        try:
            yield
        finally:
            if outer is None:
                self._stage = None

    def take_stage(self) -> list[tuple[str, Node]]:
        """The held puts, in order; puts from now on are written at once."""
        stage, self._stage = self._stage or {}, None
        return list(stage.items())

    def landed(self, nodes: list[tuple[str, Node]]) -> None:
        """``nodes`` were committed (with their step's head): keep them."""
        for h, node in nodes:
            self._keep(h, node)

    def prefetch_step(self, head: str, workflow: str | None) -> None:
        """Read, in one query, the nodes a step of a thread at ``head`` reads one after the
        other otherwise (``_STEP_NODES``): the head, its workflow, what the head names
        (start, previous step, output, detail), the meta-schema, the schemas of the
        workflow's roles, and the types of the head, of its detail and of the detail's first
        turn (the schemas the step puts again); and which of uwf's own schemas are stored
        (``missing`` then answers the agent's question without a round trip). Kept as any
        read; a row that is not JSON is left for the reads to report. A head this process
        has kept already (a worker's last step) needs nothing."""
        from uwf.cas.schema import meta_hash
        from uwf.protocol.schemas import hashes

        if head in self._seen:
            return
        ours = [h for h in hashes() if h not in self._present]
        with contextlib.suppress(UwfError):  # the step's own reads report what went wrong
            rows = self.db.all(_STEP_NODES, (head, workflow, meta_hash(), ours))
            self._found([h for h, type_hash, _, _ in rows if type_hash is None])
            for h, type_hash, payload, ts in rows:
                if type_hash is not None and h not in self._seen:
                    self._keep(h, self._decode(h, (type_hash, payload, ts)))

    def _decode(self, h: str, row: tuple[Any, ...]) -> Node:
        type_hash, payload, ts = row
        try:
            data = json.loads(payload)
        except ValueError:
            raise CorruptNode(f"corrupt node {h}: not valid JSON") from None
        return decode_node(h, {"type": type_hash, "payload": data, "timestamp": ts})

    def _held(self, h: str) -> Node | None:
        return self._stage.get(h) if self._stage is not None else None

    def _exists(self, h: str) -> bool:
        if h in self._seen or h in self._present or self._held(h) is not None:
            return True
        found = self.db.one("SELECT 1 FROM uwf_nodes WHERE hash = %s", (h,)) is not None
        if found:
            self._found([h])
        return found

    def _known(self, h: str, type_hash: str) -> bool:
        """Seen by this process (or held for its step); else ask only for a schema
        (validating one against the meta-schema takes jsonschema's import: a round trip is
        cheaper), and validate any other node again (cheaper than a round trip)."""
        from uwf.cas.schema import meta_hash

        return (
            h in self._seen
            or self._held(h) is not None
            or (type_hash == meta_hash() and self._exists(h))
        )

    def _load(self, h: str) -> Node | None:
        if h in self._seen:
            return self._seen[h]
        held = self._held(h)
        if held is not None:
            return held
        row = self.db.one("SELECT type, payload, ts FROM uwf_nodes WHERE hash = %s", (h,))
        return None if row is None else self._keep(h, self._decode(h, row))

    def _store(self, h: NodeHash, type_hash: NodeHash, payload: Any, *, typed: bool = True) -> None:
        """The base class's write, in one statement (``uwf_put``): refresh the type's last
        put and the node's, or insert the node and its index line, under the shared sweep
        lock; a node stored already is compared (Collision on other content). Around a
        step: held for its commit instead (``staging``)."""
        if self._stage is not None:
            if h not in self._stage:
                self._stage[h] = Node(type_hash, payload, _now())
                self._staged += len(dumps(payload))
                if self._staged > STAGE_BYTES:  # written now: a node before its head is inert
                    self._write_many(list(self._stage.items()))
                    self._stage.clear()
                    self._staged = 0
            return
        now = _now()
        row = self.db.one(
            "SELECT status, stored_type, stored_payload FROM uwf_put(%s, %s, %s, %s, %s, %s)",
            (h, type_hash, dumps(payload), now, now, typed),
        )
        status = row[0] if row is not None else ""
        if status == "no type":
            raise NotFound(f"unknown type: {type_hash} (no schema node with that hash)")
        if status == "stored":
            self._check_same(h, Node(type_hash, payload, now), row[1], row[2])  # type: ignore[index]
            return
        self._keep(h, Node(type_hash, payload, now))

    def same(self, h: str, node: Node, stored_type: str, stored_payload: str) -> bool:
        """Whether the stored row of ``h`` is ``node`` (the hashed bytes compared: the same
        payload with its keys in another order is the same node)."""
        stored = self._decode(h, (stored_type, stored_payload, 0))
        return stored.type == node.type and (
            dumps(stored.payload) == dumps(node.payload)
            or codec.dcbor(stored.payload) == codec.dcbor(node.payload)
        )

    def _check_same(self, h: str, node: Node, stored_type: str, stored_payload: str) -> None:
        if not self.same(h, node, stored_type, stored_payload):
            raise collision(h)

    def _create(self, h: NodeHash, node: Node) -> bool:
        row = self.db.one(
            "INSERT INTO uwf_nodes (hash, type, payload, ts, last_put) VALUES (%s, %s, %s, %s, %s)"
            " ON CONFLICT (hash) DO NOTHING RETURNING 1",
            (h, node.type, dumps(node.payload), node.timestamp, node.timestamp),
        )
        return row is not None

    def _refresh(self, h: str) -> bool:
        row = self.db.one(
            "UPDATE uwf_nodes SET last_put = greatest(last_put, %s) WHERE hash = %s RETURNING 1",
            (_now(), h),
        )
        return row is not None

    def _index_add(self, type_hash: str, h: NodeHash) -> None:
        self.db.execute(
            "INSERT INTO uwf_type_index (type, hash) VALUES (%s, %s) ON CONFLICT DO NOTHING",
            (type_hash, h),
        )

    def index(self, type_hash: str) -> list[NodeHash]:
        rows = self.db.all(
            "SELECT hash FROM uwf_type_index WHERE type = %s ORDER BY seq", (type_hash,)
        )
        return [NodeHash(r[0]) for r in rows]

    def iter_hashes(self) -> Iterator[NodeHash]:
        for (h,) in self.db.all("SELECT hash FROM uwf_nodes ORDER BY hash"):
            yield NodeHash(h)

    def get_many(self, hashes: list[str]) -> dict[str, Node]:
        out: dict[str, Node] = {}
        for h in hashes:
            check_hash(h)
            node = self._seen.get(h) or self._held(h)
            if node is not None:
                out[h] = node
        wanted = [h for h in hashes if h not in out]
        if wanted:
            rows = self.db.all(
                "SELECT hash, type, payload, ts FROM uwf_nodes WHERE hash = ANY(%s)", (wanted,)
            )
            out.update({row[0]: self._decode(row[0], row[1:]) for row in rows})
        return out

    def put_many(self, nodes: Sequence[tuple[str, Any]]) -> list[NodeHash]:
        """Each node validated as ``put`` does it; then, outside a step, all of them written
        in one statement (``uwf_put_many``: each put as ``uwf_put`` makes it), and around a
        step held for its commit."""
        with self._together():
            hashes = super().put_many(nodes)
        return hashes

    def put_checked(self, nodes: Mapping[NodeHash, Node]) -> None:
        """A batch's nodes, checked by it: held or written as ``put_many`` does it, without
        validating them again."""
        with self._together():
            for h, node in nodes.items():
                self._store_typed(h, node.type, node.payload)

    @contextlib.contextmanager
    def _together(self) -> Iterator[None]:
        """The block's puts held for the step's commit around a step (``staging``); outside
        one, held for the block, then written in one statement (``_write_many``). A block
        that raises writes nothing."""
        if self._stage is not None:
            yield
            return
        with self.staging():
            yield
            held = self.take_stage()
        if held:
            self._write_many(held)

    def _write_many(self, held: list[tuple[str, Node]]) -> None:
        now = _now()
        rows = self.db.all(
            "SELECT hash, status, stored_type, stored_payload FROM uwf_put_many("
            "%s::text[], %s::text[], %s::text[], %s, %s, %s::boolean[])",
            (
                [h for h, _ in held],
                [n.type for _, n in held],
                [dumps(n.payload) for _, n in held],
                now,
                now,
                [True] * len(held),
            ),
        )
        nodes = dict(held)
        for h, status, stored_type, stored_payload in rows:
            node = nodes[h]
            if status == "no type":
                raise NotFound(f"unknown type: {node.type} (no schema node with that hash)")
            if status == "stored":
                self._check_same(h, node, stored_type, stored_payload)
            else:
                self._keep(h, Node(node.type, node.payload, now))

    def import_nodes(self, nodes: list[tuple[str, Node]]) -> int:
        """One transaction per call: the nodes, then their index entries in the given order;
        a node already stored is compared like any put (Collision on other content)."""
        for h, node in nodes:
            check_hash(h)
            decode_node(h, node.as_json())
        if not nodes:
            return 0
        columns = [
            [h for h, _ in nodes],
            [n.type for _, n in nodes],
            [dumps(n.payload) for _, n in nodes],
            [n.timestamp for _, n in nodes],
        ]
        with self._writing():
            rows = self.db.all(
                "INSERT INTO uwf_nodes (hash, type, payload, ts, last_put)"
                " SELECT h, t, p, ts, ts FROM unnest(%s::text[], %s::text[], %s::text[],"
                " %s::bigint[]) AS x(h, t, p, ts) ON CONFLICT (hash) DO NOTHING RETURNING hash",
                columns,
            )
            stored = {r[0] for r in rows}
            for h, node in nodes:
                if h not in stored:
                    self._same(h, node.type, node.payload)
            fresh = [(node.type, h) for h, node in nodes if h in stored]
            if fresh:
                self.db.execute(
                    "INSERT INTO uwf_type_index (type, hash) SELECT t, h"
                    " FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS x(t, h, n)"
                    " ORDER BY n ON CONFLICT DO NOTHING",
                    [[t for t, _ in fresh], [h for _, h in fresh]],
                )
        return len(stored)

    def missing(self, hashes: Sequence[str]) -> set[str]:
        unseen = [
            h
            for h in hashes
            if h not in self._seen and h not in self._present and self._held(h) is None
        ]
        if not unseen:
            return set()
        rows = self.db.all("SELECT hash FROM uwf_nodes WHERE hash = ANY(%s)", (unseen,))
        found = [r[0] for r in rows]
        self._found(found)
        return set(unseen) - set(found)

    def verified(self, h: str) -> Node | None:
        """Read from the database and re-hashed, whatever this process has seen."""
        check_hash(h)
        self._seen.pop(h, None)
        return self._load(h)

    def delete(self, h: str) -> int:
        self._seen.pop(h, None)
        self._present.discard(h)
        row = self.db.one(
            "DELETE FROM uwf_nodes WHERE hash = %s RETURNING octet_length(payload)", (h,)
        )
        return int(row[0]) if row is not None else 0

    def write_index(self, index: Mapping[str, Sequence[NodeHash]]) -> None:
        with self.db.transaction():
            self.db.execute("DELETE FROM uwf_type_index")
            for type_hash, hashes in index.items():
                self._insert_index(type_hash, hashes)

    def _insert_index(self, type_hash: str, hashes: Sequence[NodeHash]) -> None:
        if hashes:
            self.db.execute(
                "INSERT INTO uwf_type_index (type, hash) SELECT %s, h"
                " FROM unnest(%s::text[]) WITH ORDINALITY AS t(h, n) ORDER BY n"
                " ON CONFLICT DO NOTHING",
                (type_hash, hashes),
            )

    def set_index(self, type_hash: str, hashes: Sequence[NodeHash]) -> None:
        with self.db.transaction():
            self.db.execute("DELETE FROM uwf_type_index WHERE type = %s", (type_hash,))
            self._insert_index(type_hash, hashes)

    def info(self, h: str) -> NodeInfo | None:
        row = self.db.one("SELECT type, payload, ts, last_put FROM uwf_nodes WHERE hash = %s", (h,))
        if row is None:
            return None
        node = self._decode(h, row[:3])
        return NodeInfo(node.type, max(node.timestamp, int(row[3])), len(row[1].encode()))

    @contextlib.contextmanager
    def _locked(self, shared: bool) -> Iterator[None]:
        fn = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
        with self.db.transaction():
            self.db.execute(f"SELECT {fn}(%s)", (SWEEP_KEY,))
            yield

    def _writing(self) -> contextlib.AbstractContextManager[None]:
        return self._locked(shared=True)

    def sweeping(self) -> contextlib.AbstractContextManager[None]:
        return self._locked(shared=False)
