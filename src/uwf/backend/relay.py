"""An agent's store through the step that spawned it (docs/architecture.md, "The relay").

When the store is a database (``Backend.relayed``), ``uwf thread step`` and ``uwf worker``
hand the agent they spawn one end of a socket pair (its number in ``$UWF_STORE_RELAY``) and
serve the agent's reads and writes on the other end with their own backend
(``engine.step.relay``): the agent imports no database driver and opens no connection, which
cost it more than everything else it does, and uwf answers from the nodes it has just read
(the head, its start, the workflow) without asking the database again.

The agent kit takes the relay when it is offered (``open_for_agent``): the variable is
removed and the descriptor made non-inheritable, so commands the agent runs never see it
(they open the store from ``$UWF_STORE`` as before). Only what an agent does is relayed:
reading nodes and the thread's head, writing nodes (validated by uwf, as any put; a step's
nodes in one ``put_many`` message), the type
index, and pausing a configured provider that answered 429 (``agent_kit.backoff``). Anything
else is refused — a fan-out's children among it: uwf starts them after the step, and the
agent of a join only reads their nodes and writes its StepNode (join).

The protocol: each message is a 4-byte big-endian length and that many bytes of JSON; a
request is ``{"op", "args"}``, its answer ``{"ok": value}`` or ``{"error", "kind"}``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from uwf.backend.base import (
    ActiveThread,
    Backend,
    Failure,
    HistoryEntry,
    Limits,
    Locks,
    Registry,
    RetryPolicy,
    ThreadInfo,
    ThreadTable,
    Waiting,
)
from uwf.backend.tree import FanOutLimits
from uwf.backend.workers import WorkerRecord, Workers
from uwf.cas.store import Node, NodeInfo, Store
from uwf.util import errors
from uwf.util.base32 import NodeHash, check_hash
from uwf.util.errors import UwfError
from uwf.util.ulid import ThreadId

MAX_MESSAGE = 1 << 28  # 256 MiB: the largest node an agent may write (an artifact)
# the errors that cross the relay as themselves (anything else is a plain UwfError)
KINDS = {
    cls.__name__: cls
    for cls in (
        errors.InvalidInput,
        errors.NotFound,
        errors.CorruptNode,
        errors.Collision,
        errors.SchemaViolation,
        errors.NotActive,
    )
}


def encode(value: Any) -> bytes:
    data = json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return len(data).to_bytes(4, "big") + data


def read_exactly(fd: int, size: int) -> bytes | None:
    """``size`` bytes from ``fd``; None at end of file."""
    out = bytearray()
    while len(out) < size:
        chunk = os.read(fd, size - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class Closed(UwfError):
    """The relay ended (the step that spawned the agent is gone)."""


class RelayClient:
    def __init__(self, fd: int) -> None:
        self.fd = fd

    def call(self, op: str, *args: Any) -> Any:
        try:
            write_all(self.fd, encode({"op": op, "args": list(args)}))
            head = read_exactly(self.fd, 4)
            body = read_exactly(self.fd, int.from_bytes(head, "big")) if head else None
        except OSError as exc:
            raise Closed(f"the step's store relay failed: {exc.strerror or exc}") from None
        if body is None:
            raise Closed("the step's store relay closed (its uwf process is gone)")
        answer = json.loads(body)
        if "error" in answer:
            raise KINDS.get(answer.get("kind", ""), UwfError)(str(answer["error"]))
        return answer.get("ok")


def _refused(what: str) -> UwfError:
    return UwfError(f"{what} is not available to an agent through the step's store relay")


class RelayStore(Store):
    """The node store through the relay: reads cached (nodes never change), every put sent
    to uwf, which validates and stores it as any put."""

    def __init__(self, client: RelayClient) -> None:
        self.client = client
        self._seen: dict[str, Node] = {}

    def keep(self, h: str, node: Node) -> None:
        self._seen[h] = node

    def _load(self, h: str) -> Node | None:
        if h not in self._seen:
            found = self.client.call("get", h)
            if found is None:
                return None
            self._seen[h] = Node(found[0], found[1], found[2])
        return self._seen[h]

    def _exists(self, h: str) -> bool:
        return h in self._seen or not self.missing([h])

    def _known(self, h: str, type_hash: str) -> bool:
        """Seen by this agent; else ask only for a schema (validating one against the
        meta-schema takes jsonschema's import) and validate any other node again: cheaper
        than a round trip to uwf and uwf's to its store (``PgStore._known`` does the same)."""
        from uwf.cas.schema import meta_hash

        return h in self._seen or (type_hash == meta_hash() and self._exists(h))

    def missing(self, hashes: Sequence[str]) -> set[str]:
        unseen = [h for h in hashes if h not in self._seen]
        return set(self.client.call("missing", unseen)) if unseen else set()

    def put(self, type_hash: str, payload: Any) -> NodeHash:
        check_hash(type_hash, "type hash")
        return NodeHash(str(self.client.call("put", type_hash, payload)))

    def put_many(self, nodes: Sequence[tuple[str, Any]]) -> list[NodeHash]:
        """The nodes in one message; uwf validates and stores each as any put."""
        pairs = [[check_hash(type_hash, "type hash"), payload] for type_hash, payload in nodes]
        if not pairs:
            return []
        return [NodeHash(str(h)) for h in self.client.call("put_many", pairs)]

    def put_schema(self, schema_payload: dict[str, Any] | bool) -> NodeHash:
        return NodeHash(str(self.client.call("put_schema", schema_payload)))

    def ensure_meta(self) -> NodeHash:
        return NodeHash(str(self.client.call("ensure_meta")))

    def index(self, type_hash: str) -> list[NodeHash]:
        return [NodeHash(str(h)) for h in self.client.call("index", type_hash)]

    # -- what an agent has no business doing ---------------------------------------------
    def _create(self, h: str, node: Node) -> bool:
        raise _refused("writing a node by hash")

    def _refresh(self, h: str) -> bool:
        raise _refused("writing a node by hash")

    def _index_add(self, type_hash: str, h: str) -> None:
        raise _refused("writing the type index")

    def iter_hashes(self) -> Iterator[NodeHash]:
        raise _refused("listing the store")

    def delete(self, h: str) -> int:
        raise _refused("deleting a node")

    def write_index(self, index: Mapping[str, Sequence[NodeHash]]) -> None:
        raise _refused("writing the type index")

    def set_index(self, type_hash: str, hashes: Sequence[NodeHash]) -> None:
        raise _refused("writing the type index")

    def info(self, h: str) -> NodeInfo | None:
        raise _refused("cas gc")


class RelayThreads(ThreadTable):
    """The thread table through the relay: a thread's head, nothing else. For the step's own
    thread the answer brings the nodes an agent reads first (the head, its start, the
    workflow, the role's schema), kept by the store."""

    def __init__(self, client: RelayClient, store: RelayStore) -> None:
        self.client = client
        self.store = store

    def head(self, thread: ThreadId) -> NodeHash | None:
        found = self.client.call("head", thread)
        for h, (type_hash, payload, ts) in found["nodes"].items():
            self.store.keep(h, Node(type_hash, payload, ts))
        return NodeHash(found["head"]) if found["head"] is not None else None

    def get(self, thread: ThreadId) -> ActiveThread | None:
        raise _refused("reading the thread table")

    def active(self) -> list[ActiveThread]:
        raise _refused("reading the thread table")

    def create(self, thread: ThreadId, head: NodeHash, info: ThreadInfo) -> None:
        raise _refused("creating a thread")

    def keyed(self, scope: str, key: str) -> ThreadId | None:
        raise _refused("reading the start keys")

    def create_keyed(
        self, scope: str, key: str, thread: ThreadId, head: NodeHash, info: ThreadInfo
    ) -> tuple[ThreadId, bool]:
        raise _refused("creating a thread")

    def _move(
        self, thread: ThreadId, expected: NodeHash, new: NodeHash
    ) -> tuple[bool, NodeHash | None]:
        raise _refused("moving a head")

    def _wait(self, thread: ThreadId, waiting: Waiting) -> tuple[bool, NodeHash | None]:
        raise _refused("marking a thread as waiting")

    def _fan_out(
        self,
        thread: ThreadId,
        waiting: Waiting,
        children: list[ActiveThread],
        limits: FanOutLimits,
    ) -> tuple[bool, NodeHash | None]:
        raise _refused("starting child threads")  # uwf starts a fan-out, never its agent

    def _fail(
        self, thread: ThreadId, failure: Failure, policy: RetryPolicy
    ) -> tuple[Failure | None, NodeHash | None]:
        raise _refused("recording a failure")

    def _prioritize(self, thread: ThreadId, priority: int) -> int | None:
        raise _refused("setting a priority")

    def _retry(self, thread: ThreadId) -> tuple[Failure | None, NodeHash | None]:
        raise _refused("ending a failure")

    def _archive(
        self,
        thread: ThreadId,
        expected: NodeHash | None,
        workflow: NodeHash,
        status: str,
        at_ms: int,
    ) -> tuple[bool, NodeHash | None]:
        raise _refused("archiving a thread")

    def history(self) -> list[HistoryEntry]:
        raise _refused("reading the history")

    def history_entry(self, thread: ThreadId) -> HistoryEntry | None:
        raise _refused("reading the history")


class _NoRegistry(Registry):
    def read(self) -> dict[str, NodeHash]:
        raise _refused("reading the registry")

    def set(self, name: str, h: NodeHash) -> NodeHash | None:
        raise _refused("changing the registry")


class _NoLocks(Locks):
    def step(
        self,
        thread: ThreadId,
        *,
        wait: bool,
        log: str | None = None,
        worker: str | None = None,
        note: tuple[str, str] | None = None,
    ) -> Any:
        raise _refused("a step lock")

    def running(self) -> set[ThreadId]:
        raise _refused("the step locks")

    def holder(self, thread: ThreadId) -> Any:
        raise _refused("the step locks")

    def request_stop(self, thread: ThreadId) -> Any:
        raise _refused("the step locks")

    def clear_stale(self, thread: ThreadId) -> Any:
        raise _refused("the step locks")

    def gc(self, *, background: bool = False) -> Any:
        raise _refused("the gc lock")

    def sweep(self, archived: Collection[ThreadId], *, dry_run: bool = False) -> int:
        raise _refused("the step locks")


class RelayLimits(Limits):
    """The fleet limits through the relay: an agent only pauses a provider that answered 429
    (``agent_kit.backoff``); uwf checks the name and the length of the pause."""

    def __init__(self, client: RelayClient) -> None:
        self.client = client

    def hold(self, name: str, concurrency: int | None, per_minute: int | None) -> Any:
        raise _refused("holding a limit")

    def pause(self, name: str, until: int) -> int:
        return int(self.client.call("pause", name, until))

    def paused(self, name: str) -> int | None:
        raise _refused("reading the limits")


class _NoWorkers(Workers):
    def beat(self, record: WorkerRecord) -> None:
        raise _refused("the worker registry")

    def records(self) -> list[WorkerRecord]:
        raise _refused("the worker registry")

    def prune(self, before: int) -> int:
        raise _refused("the worker registry")


class RelayBackend(Backend):
    """What an agent sees of the store through the relay (``root``: this machine's)."""

    def __init__(self, fd: int, root: Path) -> None:
        client = RelayClient(fd)
        self.fd = fd
        self.root = root
        self.nodes = RelayStore(client)
        self.threads = RelayThreads(client, self.nodes)
        self.registry = _NoRegistry()
        self.locks = _NoLocks()
        self.limits = RelayLimits(client)
        self.workers = _NoWorkers()

    @property
    def name(self) -> str:
        return "the store of the step that spawned this agent"

    def env(self) -> dict[str, str]:
        return {}

    def close(self) -> None:
        os.close(self.fd)


def take(root: Path, offer: str) -> RelayBackend | None:
    """The relay uwf offered this process, ``offer`` the value of ``$UWF_STORE_RELAY``
    (``uwf.backend.open_for_agent`` removes the variable), taken: the descriptor kept from
    the commands this process runs. None when the offer is not a descriptor of this
    process."""
    if not offer.isdigit():
        return None
    fd = int(offer)
    try:
        os.set_inheritable(fd, False)
    except OSError:
        return None
    return RelayBackend(fd, root)
