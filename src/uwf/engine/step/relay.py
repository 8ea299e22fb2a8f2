"""The step's side of the store relay: serving the agent's reads and writes while it runs.

When ``Backend.relayed`` says so (a database), ``run`` spawns the agent as
``run.process_runner`` does, plus one end of a socket pair (``$UWF_STORE_RELAY``), and
answers its requests on the other end with the step's own backend, between two looks at
whether the agent has exited (``adapters.process.run``'s ``serve``). The client and the
protocol are ``uwf.backend.relay``.

What is served is what an agent does: the head of the step's own thread (the plan's: the
step holds the thread's lock), nodes by hash, which of some hashes are missing, puts
(validated here, as any put: an agent's output is checked against its schema by uwf, not by
the agent; ``put_many``: a step's nodes in one message), schema puts, the type index, and
the pause of a provider of config.yaml that answered 429 (``agent_kit.backoff``: at most
``LONGEST_PAUSE``). A request that is malformed, too large or not finished within
``READ_TIMEOUT`` ends the relay (the agent then fails on its own); an error of the store is
answered as such.

The step holds the agent's puts until its head moves (``Store.staging``): on PostgreSQL they
are stored in the transaction of the head's compare-and-swap, and a relayed agent reads them
back through this relay meanwhile (docs/architecture.md, "The relay").
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from typing import Any

from uwf.adapters import process
from uwf.adapters.process import Finished
from uwf.backend import RELAY_ENV
from uwf.backend.base import LONGEST_PAUSE, Backend
from uwf.backend.relay import MAX_MESSAGE, encode
from uwf.engine.step.plan import StepPlan
from uwf.engine.step.run import process_runner
from uwf.util.base32 import NodeHash, check_hash, is_hash
from uwf.util.errors import InvalidInput, UwfError, oneline
from uwf.util.ulid import check_thread_id, now_ms

READ_TIMEOUT = 10.0  # seconds a request may take to arrive once it has begun
MAX_NODES = 10_000  # nodes of one put_many request (a step writes a handful)


class Server:
    """Answers one agent's requests with ``backend``; ``plan`` is the step it runs."""

    def __init__(self, backend: Backend, plan: StepPlan) -> None:
        self.backend = backend
        self.plan = plan
        self.ours, self.theirs = socket.socketpair()
        self.ours.settimeout(READ_TIMEOUT)

    def serve_one(self) -> bool:
        """Answer one request; False once the relay is over (closed, or broken)."""
        try:
            head = self._read(4)
            if head is None:
                return False
            size = int.from_bytes(head, "big")
            body = self._read(size) if size <= MAX_MESSAGE else None
            if body is None:
                return False
            request = json.loads(body)
            answer = self._answer(str(request["op"]), list(request.get("args") or []))
            self.ours.sendall(encode(answer))
        except (OSError, ValueError, KeyError, TypeError):
            return False
        return True

    def _read(self, size: int) -> bytes | None:
        out = bytearray()
        while len(out) < size:
            chunk = self.ours.recv(min(size - len(out), 1 << 20))
            if not chunk:
                return None
            out += chunk
        return bytes(out)

    def _answer(self, op: str, args: list[Any]) -> dict[str, Any]:
        handler = self._ops().get(op)
        if handler is None:
            return {"error": f"unknown request: {op[:40]}", "kind": "InvalidInput"}
        try:
            return {"ok": handler(*args)}
        except UwfError as exc:
            return {"error": exc.message, "kind": type(exc).__name__}

    def _ops(self) -> dict[str, Callable[..., Any]]:
        store = self.backend.nodes
        return {
            "head": self._head,
            "get": self._get,
            "missing": lambda hashes: sorted(store.missing([check_hash(str(h)) for h in hashes])),
            "put": lambda type_hash, payload: store.put(str(type_hash), payload),
            "put_many": lambda nodes: store.put_many(_pairs(nodes)),
            "put_schema": store.put_schema,
            "ensure_meta": store.ensure_meta,
            "index": lambda type_hash: store.index(check_hash(str(type_hash))),
            "pause": self._pause,
        }

    def _pause(self, name: str, until: int) -> int:
        """Pause a provider of config.yaml (``providers/<name>``) that answered the agent
        429, for at most ``LONGEST_PAUSE``: nothing else an agent may hold back."""
        from uwf.config.config import load_config

        name = str(name)
        providers = load_config(self.backend.root).providers
        if not name.startswith("providers/") or name.removeprefix("providers/") not in providers:
            raise InvalidInput(f"not a provider of config.yaml: {oneline(name)}")
        if not isinstance(until, int) or isinstance(until, bool):
            raise InvalidInput("a pause ends at a time in unix ms")
        latest = now_ms() + int(LONGEST_PAUSE * 1000)
        return self.backend.limits.pause(name, min(until, latest))

    def _head(self, thread: str) -> dict[str, Any]:
        """The thread's head; for the step's own thread (the step holds it: its head is the
        plan's) with the nodes every agent reads first — the head, its start, the workflow,
        the role's schema — which the step has just read: one round trip instead of five."""
        tid = check_thread_id(str(thread))
        if tid != self.plan.thread:
            return {"head": self.backend.threads.head(tid), "nodes": {}}
        store = self.backend.nodes
        wanted = [self.plan.head, self.plan.start, self.plan.workflow]
        workflow = store.get(self.plan.workflow)
        if workflow is not None and isinstance(workflow.payload, dict):
            role = (workflow.payload.get("roles") or {}).get(self.plan.role or "")
            meta = role.get("meta") if isinstance(role, dict) else None
            if isinstance(meta, str) and is_hash(meta):
                wanted.append(NodeHash(meta))
        nodes = {}
        for h in wanted:
            node = store.get(h)
            if node is not None:
                nodes[h] = [node.type, node.payload, node.timestamp]
        return {"head": self.plan.head, "nodes": nodes}

    def _get(self, h: str) -> list[Any] | None:
        node = self.backend.nodes.get(str(h))
        return None if node is None else [node.type, node.payload, node.timestamp]

    def close(self) -> None:
        for end in (self.ours, self.theirs):
            end.close()


def _pairs(nodes: Any) -> list[tuple[str, Any]]:
    """The ``[[type, payload], …]`` of a ``put_many`` request (at most ``MAX_NODES``)."""
    if not isinstance(nodes, list) or len(nodes) > MAX_NODES:
        raise InvalidInput(f"put_many takes a list of at most {MAX_NODES} [type, payload] pairs")
    pairs: list[tuple[str, Any]] = []
    for item in nodes:
        if not isinstance(item, list) or len(item) != 2:
            raise InvalidInput("put_many takes a list of [type, payload] pairs")
        pairs.append((check_hash(str(item[0]), "type hash"), item[1]))
    return pairs


def run(
    backend: Backend, plan: StepPlan, env: dict[str, str], should_stop: Callable[[], bool]
) -> Finished:
    """``run.process_runner``, with the store relayed to the agent (where ``run`` can serve
    a descriptor while it waits: else the agent opens the store itself, as always)."""
    if not process.can_serve():
        return process_runner(plan, env, should_stop)
    server = Server(backend, plan)
    try:
        fd = server.theirs.fileno()
        return process_runner(
            plan,
            {**env, RELAY_ENV: str(fd)},
            should_stop,
            serve=(server.ours.fileno(), server.serve_one),
            pass_fds=(fd,),
        )
    finally:
        server.close()
