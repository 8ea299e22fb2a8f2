"""The store contract, shared by every backend.

A backend implements ten primitives (load, create, refresh, index append, read and rewrite
the type index, list, delete, node info; the abstract methods below); everything else —
hashing, idempotent put, schema validation, corruption checks — lives here once, so the
filesystem, memory and PostgreSQL stores behave the same (one contract test class,
``tests/backend_contract.py``, runs on all three).
"""

from __future__ import annotations

import abc
import contextlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from uwf.cas import codec
from uwf.cas.kept import Kept, SchemasPut, schema_key, size_of
from uwf.cas.node import Node, NodeInfo, decode_node
from uwf.util.base32 import NodeHash, check_hash, is_hash
from uwf.util.errors import Collision, InvalidInput, NotFound, SchemaViolation
from uwf.util.jsonfmt import canonical, dumps
from uwf.util.secrets import redact_payload

if TYPE_CHECKING:
    from uwf.util.outputs import PackDamage, Packed


# Node, NodeInfo and decode_node live in uwf.cas.node; named here too, where the store is.
__all__ = ["Node", "NodeInfo", "Store", "decode_node"]

_MADE = threading.Lock()  # a store's memories are made once, whichever thread asks first


class Store(abc.ABC):
    """A content-addressed store of JSON nodes typed by JSON Schemas."""

    #: How many nodes, and about how many bytes of them, a process keeps (``Kept``).
    KEEP_NODES = 4096
    KEEP_BYTES = 32 * 2**20

    # -- backend primitives -------------------------------------------------------------
    @abc.abstractmethod
    def _load(self, h: str) -> Node | None:
        """The node stored under a valid hash, None if absent; CorruptNode if damaged."""

    @abc.abstractmethod
    def _create(self, h: NodeHash, node: Node) -> bool:
        """Store a node unless present; True if this call stored it."""

    @abc.abstractmethod
    def _refresh(self, h: str) -> bool:
        """Record a put of an existing node (its "last put" time); False if it is absent.

        ``cas gc`` collects an unreachable node only when its last put is older than the grace
        period, so a writer that re-puts a node it is about to link (content addressing makes
        the put a no-op) keeps it alive.
        """

    @abc.abstractmethod
    def _index_add(self, type_hash: str, h: NodeHash) -> None:
        """Record ``h`` in the index of its type."""

    @abc.abstractmethod
    def index(self, type_hash: str) -> list[NodeHash]:
        """Hashes of the nodes of one type, oldest first, without duplicates."""

    @abc.abstractmethod
    def iter_hashes(self) -> Iterator[NodeHash]:
        """Every node hash in the store (for reindex, verify and gc only)."""

    @abc.abstractmethod
    def delete(self, h: str) -> int:
        """Remove a node (gc only); returns the bytes freed.

        A store that keeps nodes in packs may only drop a packed copy: this store no longer
        sees it, and ``pack(everything=True)`` leaves it out for everyone.
        """

    @abc.abstractmethod
    def write_index(self, index: Mapping[str, Sequence[NodeHash]]) -> None:
        """Replace the whole type index (reindex only)."""

    @abc.abstractmethod
    def set_index(self, type_hash: str, hashes: Sequence[NodeHash]) -> None:
        """Replace the index of one type (gc only; an empty list removes it)."""

    @abc.abstractmethod
    def info(self, h: str) -> NodeInfo | None:
        """Type, last put time and size of a node (gc only); None if absent, CorruptNode."""

    # -- bulk storage (the filesystem store's packs; nothing to do elsewhere) -------------
    def pack(self, *, everything: bool = False) -> Packed:
        """Move loose nodes into packed storage; with ``everything``, rewrite all of it as one
        pack and leave out what ``delete`` dropped (gc). The caller holds the gc lock.

        Returns ``{"packed","loose","packs","bytes"}``: nodes moved, loose nodes left, packs
        now and their bytes. A store without packs has nothing to do.
        """
        return {"packed": 0, "loose": 0, "packs": 0, "bytes": 0}

    def pack_due(self) -> bool:
        """Whether enough small packs or loose nodes piled up to pack them (asked after each
        step, cheaply: docs/architecture.md, "Automatic packing"). Never on a store without
        packs."""
        return False

    def pack_in_background(self, *, process: bool = False) -> str | None:
        """Start packing beside the caller unless a ``cas gc`` or ``cas pack`` runs: in a
        process of its own (``process``: the caller exits soon), else in a thread; what was
        started (``pid <n>``, ``thread``), or None."""
        return None

    def scan_order(self, hashes: set[NodeHash]) -> list[NodeHash]:
        """``hashes`` in the order that reads them all cheapest (``cas verify``): by hash,
        unless the backend stores nodes together (the filesystem's packs)."""
        return sorted(hashes)

    def verified(self, h: str) -> Node | None:
        """The node at ``h`` re-hashed, whatever holds it (``cas verify``; ``get`` may trust
        a record that a checksum ties to a node that was hashed when it was stored), read
        from the storage whatever this process keeps."""
        return self.stored(h)

    def stored(self, h: str) -> Node | None:
        """The node at ``h`` read from the storage, whatever this process keeps, and not kept
        either: what whole-store operations (gc, reindex) read, so that they judge the
        storage and leave the nodes a step keeps in place."""
        check_hash(h)
        return self._load(h)

    def check_storage(self) -> list[PackDamage]:
        """Damage of the storage itself rather than of a node (a pack's checksum):
        ``[{"pack","problem"}]`` for ``cas verify``."""
        return []

    # -- coordination with gc (no-ops for single-process backends) ----------------------
    def _writing(self) -> contextlib.AbstractContextManager[None]:
        """Held around every write: a sweep never runs in the middle of one."""
        return contextlib.nullcontext()

    def sweeping(self) -> contextlib.AbstractContextManager[None]:
        """Held by gc while it deletes nodes and rewrites the index: no write runs meanwhile.

        A write that finished before sees its node judged by the fresh last-put time; a write
        that starts after finds the node gone and stores it again.
        """
        return contextlib.nullcontext()

    def prefetch_step(self, head: str, workflow: str | None) -> None:  # noqa: B027 - a hook
        """Read ahead, in one round trip, what a step at ``head`` of a thread running
        ``workflow`` reads first (its head, start, workflow, schemas): a store where each
        read is a round trip may (PostgreSQL); by default nothing is read ahead."""

    def staging(self) -> contextlib.AbstractContextManager[None]:
        """Around a step: this process's puts may be held (validated, readable here, written
        nowhere) until the step's head moves, and then be stored in the same transaction as
        the compare-and-swap (``ThreadTable.move``: PostgreSQL's one commit per step,
        docs/format.md, "The PostgreSQL backend"); puts after the move are written at once.
        When the step ends without a move, what was held is dropped: nothing referenced it.
        By default puts are written at once."""
        return contextlib.nullcontext()

    # -- what this process keeps (docs/architecture.md, "What a process keeps") -----------
    def kept(self) -> Kept[Node]:
        """The nodes this process keeps of this store, read or written (made on first use)."""
        found: Kept[Node] | None = self.__dict__.get("_kept_nodes")
        if found is None:
            with _MADE:
                found = self.__dict__.setdefault(
                    "_kept_nodes", Kept[Node](self.KEEP_NODES, self.KEEP_BYTES)
                )
        return found

    def _schemas_put(self) -> SchemasPut:
        """The schemas this process put into this store (made on first use)."""
        found: SchemasPut | None = self.__dict__.get("_schemas_put_here")
        if found is None:
            with _MADE:
                found = self.__dict__.setdefault("_schemas_put_here", SchemasPut())
        return found

    # -- shared behaviour ---------------------------------------------------------------
    def has(self, h: str) -> bool:
        if not is_hash(h):
            return False
        return self._exists(h)

    def _exists(self, h: str) -> bool:
        return self._load(h) is not None

    def _known(self, h: str, type_hash: str) -> bool:
        """Whether ``put`` may skip validating ``h`` (stored, so validated when first put). A
        backend where asking costs a round trip may answer from what it has seen, and
        validate a node of type ``type_hash`` again rather than ask."""
        return self._exists(h)

    def missing(self, hashes: Sequence[str]) -> set[str]:
        """The hashes of ``hashes`` that are not stored (a backend may ask in one query)."""
        return {h for h in hashes if not self._exists(h)}

    def get(self, h: str, *, keep: bool = True) -> Node | None:
        """The node at ``h`` (a checked hash), None if absent; CorruptNode if damaged.

        Read and decoded once per process (``kept``): a node kept is served again once the
        storage says it still holds it (``_exists``: a file's ``stat``, not its reading and
        re-hashing), so a node gc deleted is never served from memory. ``keep=False``: read
        from the storage, and not kept (a walk that reads each node once, a full history,
        neither looks its nodes up nor pushes out what the process keeps:
        docs/performance.md, "Full history")."""
        check_hash(h)
        if not keep:
            return self._load_sized(h)[0]
        kept = self.kept()
        node = kept.get(h)
        if node is not None:
            if self._exists(h):
                return node
            kept.drop(h)
        node, size = self._load_sized(h)
        if node is not None:
            kept.keep(h, node, size)
        return node

    def _load_sized(self, h: str) -> tuple[Node | None, int]:
        """``_load``, and about how many bytes the node's JSON takes (``Kept``'s bound): a
        backend that read the bytes says how many, rather than encode the node again."""
        node = self._load(h)
        return node, size_of(node.payload) if node is not None else 0

    def require(self, h: str, what: str = "CAS node") -> Node:
        node = self.get(h)
        if node is None:
            raise NotFound(f"{what} not found: {h}{self.missing_hint(h)}")
        return node

    def missing_hint(self, h: str) -> str:
        """What a backend knows about why ``h`` is missing (damage it can name), or ""."""
        return ""

    def storage_doubts(self) -> list[PackDamage]:
        """Damage that hides nodes from ``iter_hashes`` and reads (``{"pack"|…, "problem"}``):
        ``cas gc`` refuses to run while there is any."""
        return []

    def repair_storage(self) -> int:
        """Repair what the backend can rebuild from what it still holds (``cas reindex``);
        how many pieces were rebuilt."""
        return 0

    def _store(
        self, h: NodeHash, type_hash: NodeHash, payload: Any, *, typed: bool = True
    ) -> Node | None:
        """Write a node unless present; either way record the put of it and of its type.
        Returns the node as stored (its first writer's timestamp), when this store knows it.

        Under the writers' lock (see ``sweeping``), so that gc sees a node and its type as
        freshly put, or finds both gone and the writer stores them again. A new typed node
        whose schema vanished since it was validated is refused rather than stored untyped.
        A node already stored under ``h`` with other content is a hash collision: refused.
        """
        with self._writing():
            type_ok = type_hash == h or self._refresh(type_hash)
            if self._refresh(h):
                return self._same(h, type_hash, payload)
            if typed and not type_ok:
                raise NotFound(f"unknown type: {type_hash} (no schema node with that hash)")
            node = Node(type_hash, payload, time.time_ns() // 1_000_000)
            if self._create(h, node):
                self._index_add(type_hash, h)
                return node
            return self._same(h, type_hash, payload)  # another writer stored it first

    def _same(self, h: str, type_hash: str, payload: Any) -> Node | None:
        """Raise Collision unless the node stored at ``h`` has this type and payload; the
        node as stored (None if it is gone).

        XXH64 is not collision-resistant: two different nodes may share a hash. The hashed
        bytes (type, then the payload's deterministic CBOR) are compared, so the same payload
        written with its keys in another order is the same node.
        """
        stored = self._load(h)  # the storage's, whatever this process keeps
        if stored is None:
            return None
        if stored.type == type_hash and (
            dumps(stored.payload) == dumps(payload)
            or codec.dcbor(stored.payload) == codec.dcbor(payload)
        ):
            return stored
        raise Collision(
            f"hash collision: node {h} is stored with other content; nothing was written "
            "(XXH64 is not collision-resistant: change the payload, e.g. add a field)"
        )

    def get_many(self, hashes: list[str]) -> dict[str, Node]:
        """The stored nodes among ``hashes`` (checked hashes; CorruptNode if one is damaged).
        A backend may read them in one query (``store copy``)."""
        out = {}
        for h in hashes:
            node = self.get(h)
            if node is not None:
                out[h] = node
        return out

    def import_nodes(self, nodes: list[tuple[str, Node]]) -> int:
        """``import_node`` for many nodes, in order; how many were stored. A backend may
        write them in one transaction."""
        return sum(self.import_node(h, node) for h, node in nodes)

    def import_node(self, h: str, node: Node) -> bool:
        """Store a node read from another store, keeping its timestamp (``store copy``).

        The node is checked to hash to ``h`` first (CorruptNode). True if it was stored;
        False if it was there already (with the same content, else Collision).
        """
        h = check_hash(h)
        decode_node(h, node.as_json())
        with self._writing():
            if self._refresh(h):
                self._same(h, node.type, node.payload)
                return False
            if self._create(h, node):
                self._index_add(node.type, h)
                return True
            self._same(h, node.type, node.payload)
            return False

    def put(self, type_hash: str, payload: Any) -> NodeHash:
        """Validate ``payload`` against the schema at ``type_hash``, then store it.

        Idempotent: an existing (type, payload) returns the same hash and keeps its first
        timestamp. An unknown type or an invalid payload raises and stores nothing. Every
        known secret in the payload's strings is stored as ``***`` (``uwf.util.secrets``).
        """
        type_hash, h, payload, size = self._prepare(type_hash, payload)
        node = self._store_typed(h, type_hash, payload)
        if node is not None:  # this process keeps what it wrote (nodes never change)
            self.kept().keep(h, node, size)
        return h

    def _prepare(self, type_hash: str, payload: Any) -> tuple[NodeHash, NodeHash, Any, int]:
        """What ``put`` does before it writes: the checked type hash, the node's hash, its
        payload as stored (redacted, canonical; validated against its schema unless stored
        already) and the size of its encoding."""
        type_hash = check_hash(type_hash, "type hash")
        payload = canonical(redact_payload(payload))
        h, size = codec.hashed(type_hash, payload)
        if not self._known(h, type_hash):  # else validated when first stored
            self._validate(type_hash, payload)
        return type_hash, h, payload, size

    def _validate(self, type_hash: NodeHash, payload: Any) -> None:
        from uwf.cas import schema

        schema_node = self.get(type_hash)
        if schema_node is None and self._put_again(type_hash):
            schema_node = self.get(type_hash)
        if schema_node is None:
            raise NotFound(f"unknown type: {type_hash} (no schema node with that hash)")
        meta = schema.meta_hash()
        if type_hash == meta:
            schema.check_schema(payload)
        elif schema_node.type != meta:
            raise InvalidInput(f"type {type_hash} is not a schema (its type is {schema_node.type})")
        else:
            problems = schema.validate(schema_node.payload, payload, type_hash)
            if problems:
                raise SchemaViolation(f"payload does not match schema {type_hash}: {problems[0]}")

    def _store_typed(self, h: NodeHash, type_hash: NodeHash, payload: Any) -> Node | None:
        """``_store``; when the type is a schema this process put (``put_schema``) and gc has
        collected it since, it is put again first, as a put of it would have."""
        try:
            return self._store(h, type_hash, payload)
        except NotFound:
            if not self._put_again(type_hash):
                raise
        return self._store(h, type_hash, payload)

    def _put_again(self, type_hash: str) -> bool:
        """Store again a schema this process put that is no longer stored; False when this
        process never put it."""
        from uwf.cas import schema

        stored = self._schemas_put().payloads.get(type_hash)
        if stored is None:
            return False
        meta = schema.meta_hash()
        self._store(NodeHash(type_hash), meta, stored, typed=False)
        return True

    def put_many(self, nodes: Sequence[tuple[str, Any]]) -> list[NodeHash]:
        """``put`` each of ``nodes`` (type hash, payload), in order; their hashes.

        What one step writes (its output, detail and StepNode) goes through here, so that a
        backend can make the nodes durable together — one file and one fsync, one transaction,
        or the step's own commit — instead of one by one (docs/performance.md). Each node is
        validated and redacted as ``put`` does it; when one is refused, the batch may be stored
        in part or not at all (a node matters only once a head references it)."""
        return [self.put(type_hash, payload) for type_hash, payload in nodes]

    def put_checked(self, nodes: Mapping[NodeHash, Node]) -> None:
        """Store ``nodes``, which a ``cas.batch.Batch`` of this process over this store has
        already redacted, hashed and validated (its ``put``), in order. A backend whose
        writes happen here may skip those checks — a node is validated once, when it is
        put (docs/architecture.md, "What a process keeps"); the others, and a store whose
        writes happen elsewhere (the relay: uwf validates what an agent sends), put them
        again as ``put_many`` does, checks included."""
        self.put_many([(node.type, node.payload) for node in nodes.values()])

    def put_schema(self, schema_payload: dict[str, Any] | bool) -> NodeHash:
        """Store a JSON Schema (typed by the meta-schema) and return its hash: the type of the
        nodes the caller puts next. Put once per process (docs/architecture.md, "What a process
        keeps"): every put of a node refreshes its type's last put under the writers' lock, and
        puts the type again should gc have collected it, so a schema is never taken from under
        the nodes it types. A schema referred to by ``cas_ref`` instead (a Workflow node's
        role schemas) is put with ``put(ensure_meta(), schema)``, which refreshes it."""
        key = schema_key(schema_payload)
        memo = self._schemas_put()
        found = memo.hashes.get(key) if key is not None else None
        if found is not None:
            return found
        meta = self.ensure_meta()
        type_hash, h, payload, size = self._prepare(meta, schema_payload)
        node = self._store(h, type_hash, payload)
        if node is not None:
            self.kept().keep(h, node, size)
        if key is not None:
            memo.remember(key, h, payload)
        return h

    def schema_put_here(self, schema_payload: dict[str, Any] | bool) -> NodeHash | None:
        """The hash of ``schema_payload`` if this process put it into this store already."""
        key = schema_key(schema_payload)
        return self._schemas_put().hashes.get(key) if key is not None else None

    def remember_schemas(self, other: SchemasPut) -> None:
        """Remember the schemas ``other`` records as put here too (a batch, once written)."""
        memo = self._schemas_put()
        for key, h in other.hashes.items():
            memo.remember(key, h, other.payloads[h])

    def ensure_meta(self) -> NodeHash:
        """Write the self-typed meta-schema if it is missing; return its hash. Asked once per
        process: gc never collects the meta-schema (docs/architecture.md, "Garbage
        collection")."""
        from uwf.cas import schema

        h = schema.meta_hash()
        memo = self._schemas_put()
        if not memo.meta and not self._exists(h):
            payload = canonical(schema.META_SCHEMA)
            self._store(h, h, payload)
        memo.meta = True
        return h
