"""The store relay (docs/architecture.md, "The store relay"): on PostgreSQL an agent on the
kit reaches the store through the step that spawned it — no driver, no connection — and the
relay serves only what an agent does."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from support import EXAMPLES
from uwf.backend import RELAY_ENV, open_for_agent, relay
from uwf.backend.memory import MemoryBackend
from uwf.cas.batch import Batch
from uwf.engine.step import relay as server_side
from uwf.engine.step.plan import StepPlan
from uwf.engine.threads import lifecycle
from uwf.engine.workflows import stored as workflows
from uwf.model import chain
from uwf.protocol import schemas
from uwf.util.base32 import NodeHash
from uwf.util.errors import SchemaViolation, UwfError
from uwf.util.ulid import ThreadId

REPORT = """
import atexit
offered = os.environ.get("UWF_STORE_RELAY")
atexit.register(
    lambda: sys.stderr.write(
        f"offered={{offered}} after={{os.environ.get('UWF_STORE_RELAY')}} "
        f"psycopg={{'psycopg2' in sys.modules or 'psycopg' in sys.modules}}\\n"
    )
)
from uwf.agents.mock import main
sys.argv = [sys.argv[0], "--scenario", {scenario!r}, *sys.argv[1:]]
main()
"""


def test_an_agent_on_postgres_reaches_the_store_through_its_step(
    pg_url: str, monkeypatch: pytest.MonkeyPatch, cli_proc: Any, scenario: Any, agent_script: Any
) -> None:
    monkeypatch.setenv("UWF_STORE", pg_url)
    assert cli_proc("workflow", "put", str(EXAMPLES / "solve-issue.yaml")).code == 0
    thread = cli_proc("thread", "start", "solve-issue", "-p", "Fix it").json()["thread"]
    mock = scenario().split(" ", 2)[2]
    agent = agent_script(REPORT.format(scenario=mock))
    for role in ("planner", "developer"):
        out = cli_proc("thread", "step", thread, "--agent", agent)
        assert out.code == 0, out.err
        assert out.json()["role"] == role
        (line,) = [x for x in out.err.splitlines() if "offered=" in x]
        offered = line.split("offered=")[1].split()[0]
        # offered a descriptor, took it (the variable is gone), and imported no driver
        assert offered.isdigit() and line.endswith(" after=None psycopg=False")
    steps = cli_proc("thread", "steps", thread).json()["steps"]
    assert [s["role"] for s in steps[1:]] == ["planner", "developer"]
    assert cli_proc("cas", "verify").json()["ok"] is True


class Served:
    """A relay server on a memory backend, answering on a thread, and its client."""

    def __init__(self, root: Path) -> None:
        self.backend = MemoryBackend(root)
        wf = workflows.put_workflow(self.backend, EXAMPLES / "solve-issue.yaml").hash
        thread = lifecycle.start(self.backend, wf, "Fix it")["thread"]
        self.head = self.backend.threads.head(ThreadId(thread))
        assert self.head is not None
        start = chain.load_start(self.backend.nodes, self.head)
        self.plan = StepPlan(
            thread=ThreadId(thread),
            workflow=NodeHash(wf),
            workflow_name="solve-issue",
            start=start.hash,
            head=self.head,
            depth=0,
            limit=None,
            role="planner",
        )
        self.server = server_side.Server(self.backend, self.plan)
        self.loop = threading.Thread(target=self._serve, daemon=True)
        self.loop.start()
        self.agent = relay.RelayBackend(os.dup(self.server.theirs.fileno()), root)

    def _serve(self) -> None:
        while self.server.serve_one():
            pass

    def close(self) -> None:
        self.agent.close()
        self.server.theirs.close()
        self.loop.join(5)
        assert not self.loop.is_alive()  # the relay ended with its client
        self.server.ours.close()


@pytest.fixture
def served(root: Path) -> Any:
    s = Served(root)
    yield s
    s.close()


def test_the_relay_serves_what_an_agent_does(served: Served) -> None:
    agent, store = served.agent, served.backend.nodes
    assert agent.threads.head(served.plan.thread) == served.head
    h = schemas.hashes()
    start = agent.nodes.require(served.head)
    assert start.payload == store.require(served.head).payload
    assert agent.nodes.missing([h.step, "0000000000000"]) == {"0000000000000"}
    text = agent.nodes.put(h.text, "an answer")
    assert store.require(text).payload == "an answer"
    schema = agent.nodes.put_schema({"type": "object", "required": ["n"]})
    assert agent.nodes.put(schema, {"n": 1}) in store.index(schema)
    assert agent.nodes.index(schema) == store.index(schema)
    assert agent.nodes.ensure_meta() == h.meta
    # puts are validated by uwf, and its errors cross the relay as themselves
    with pytest.raises(SchemaViolation) as info:
        agent.nodes.put(schema, {"m": 1})
    assert str(info.value).startswith(f"payload does not match schema {schema}: ")
    # a step's nodes in one message, each validated as a put
    many = agent.nodes.put_many([(h.text, "one"), (schema, {"n": 2})])
    assert [store.require(x).payload for x in many] == ["one", {"n": 2}]
    with pytest.raises(SchemaViolation):
        agent.nodes.put_many([(h.text, "two"), (schema, {"m": 2})])
    with pytest.raises(UwfError) as shape:
        relay.RelayClient(agent.fd).call("put_many", [["not a pair"]])
    assert str(shape.value) == "put_many takes a list of [type, payload] pairs"
    assert agent.nodes.get("0000000000000") is None
    with pytest.raises(UwfError) as bad:  # a hash is checked before it is used
        relay.RelayClient(agent.fd).call("missing", ["../../etc/passwd"])
    assert str(bad.value).startswith('invalid hash: "../../etc/passwd"')


def test_an_agent_validates_its_own_nodes_instead_of_asking_uwf(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node an agent puts is validated in the agent (against the schema it read once),
    not preceded by a question to uwf whether it is stored (each a statement on PostgreSQL);
    a schema is still asked about (its check would import jsonschema into the agent)."""
    nodes, h = served.agent.nodes, schemas.hashes()
    ops: list[str] = []
    call = nodes.client.call

    def counted(op: str, *args: Any) -> Any:
        ops.append(op)
        return call(op, *args)

    monkeypatch.setattr(nodes.client, "call", counted)
    batch = Batch(nodes)
    first = batch.put(h.text, "an answer")
    second = batch.put(h.text, "another")
    with pytest.raises(SchemaViolation):  # refused in the agent, before uwf sees it
        batch.put(h.text, {"not": "text"})
    assert "missing" not in ops and ops.count("get") <= 1  # the schema, read once
    batch.flush()
    assert served.backend.nodes.require(first).payload == "an answer"
    assert served.backend.nodes.require(second).payload == "another"
    ops.clear()
    batch.put_schema({"type": "object", "required": ["fresh"]})
    assert "missing" in ops


def test_the_relay_refuses_what_an_agent_has_no_business_doing(served: Served) -> None:
    agent = served.agent
    cases = {
        "reading the thread table": lambda: agent.threads.active(),
        "moving a head": lambda: agent.threads.move(served.plan.thread, served.head, served.head),
        "reading the registry": lambda: agent.registry.read(),
        "a step lock": lambda: agent.locks.step(served.plan.thread, wait=False),
        "deleting a node": lambda: agent.nodes.delete(served.head),
        "listing the store": lambda: list(agent.nodes.iter_hashes()),
    }
    for what, call in cases.items():
        with pytest.raises(UwfError) as info:
            call()
        assert str(info.value) == (
            f"{what} is not available to an agent through the step's store relay"
        )
    client = relay.RelayClient(agent.fd)
    with pytest.raises(UwfError) as info:
        client.call("delete", served.head)
    assert str(info.value) == "unknown request: delete"


def test_the_relay_pauses_only_a_configured_provider_for_at_most_an_hour(
    served: Served, root: Path
) -> None:
    """The agent kit's 429 back-off (docs/format.md, "Limits") crosses the relay: uwf pauses
    a provider of its config.yaml, cut to an hour, and nothing else."""
    import yaml

    from uwf.backend.base import LONGEST_PAUSE
    from uwf.util.ulid import now_ms

    config = {"providers": {"local": {"baseUrl": "http://127.0.0.1:9/v1", "apiKeyEnv": "K"}}}
    (root / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    limits = served.agent.limits
    soon = now_ms() + 5_000
    assert limits.pause("providers/local", soon) == soon
    assert served.backend.limits.paused("providers/local") == soon
    later = limits.pause("providers/local", now_ms() + 10 * int(LONGEST_PAUSE * 1000))
    assert soon < later <= now_ms() + int(LONGEST_PAUSE * 1000)
    for name in ("providers/other", "agents/local", "local"):
        with pytest.raises(UwfError) as info:
            limits.pause(name, soon)
        assert str(info.value) == f"not a provider of config.yaml: {name}"
        assert served.backend.limits.paused(name) is None
    with pytest.raises(UwfError) as info:
        relay.RelayClient(served.agent.fd).call("pause", "providers/local", "soon")
    assert str(info.value) == "a pause ends at a time in unix ms"
    with pytest.raises(UwfError) as info:
        limits.paused("providers/local")
    assert str(info.value) == (
        "reading the limits is not available to an agent through the step's store relay"
    )


def test_a_malformed_or_stalled_request_ends_the_relay(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = MemoryBackend(root)
    plan = StepPlan(
        ThreadId("01J00000000000000000000000"),
        NodeHash("A"),
        "w",
        NodeHash("B"),
        NodeHash("B"),
        0,
        None,
    )
    monkeypatch.setattr(server_side, "READ_TIMEOUT", 0.2)
    for request in (
        (relay.MAX_MESSAGE + 1).to_bytes(4, "big"),  # too large
        (3).to_bytes(4, "big") + b"[1]",  # not a request
        (10).to_bytes(4, "big") + b"{",  # never finished
    ):
        server = server_side.Server(backend, plan)
        server.theirs.sendall(request)
        assert server.serve_one() is False
        server.close()


def test_take_claims_the_offer_and_keeps_it_from_children(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent opening its store takes the relay offered in ``$UWF_STORE_RELAY``: the
    variable is removed and the descriptor made non-inheritable; an offer that is not a
    descriptor is removed too, and the agent opens the store itself."""
    ours, theirs = socket.socketpair()
    fd = os.dup(theirs.fileno())
    os.set_inheritable(fd, True)
    monkeypatch.setenv(RELAY_ENV, str(fd))
    backend = open_for_agent()
    assert isinstance(backend, relay.RelayBackend) and backend.fd == fd
    assert RELAY_ENV not in os.environ and not os.get_inheritable(fd)
    backend.close()
    monkeypatch.setenv(RELAY_ENV, "not a descriptor")
    monkeypatch.delenv("UWF_STORE", raising=False)
    with open_for_agent() as fallback:
        assert not isinstance(fallback, relay.RelayBackend) and fallback.root == root
    assert RELAY_ENV not in os.environ
    assert relay.take(root, "not a descriptor") is None
    for end in (ours, theirs):
        end.close()


def test_a_closed_relay_fails_the_agent_with_one_line(root: Path) -> None:
    ours, theirs = socket.socketpair()
    agent = relay.RelayBackend(os.dup(theirs.fileno()), root)
    ours.close()
    with pytest.raises(UwfError) as info:
        agent.nodes.get(schemas.hashes().step)
    assert str(info.value) in (
        "the step's store relay closed (its uwf process is gone)",
        "the step's store relay failed: Broken pipe",
    )
    agent.close()
    theirs.close()
