"""What an agent knows when it starts: the thread, its chain, the workflow and its role.

Building it reads a bounded number of nodes: the head, the StartNode, the workflow, the
role's schema and the index of summaries recorded by hand. History is read on demand and
only as far as it is needed: ``history`` is the newest compaction summary and the steps
after it within the context budget (written first when they no longer fit:
``agent_kit.history``); ``since_last_visit`` the steps since this role's last visit, whose
outputs and contents are loaded lazily. ``steps`` (the whole chain) exists for agents that
really need all of it.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from uwf.agent_kit import children
from uwf.backend.base import Backend
from uwf.cas.batch import Batch
from uwf.cas.store import Store
from uwf.model import chain, compact
from uwf.model.cost import Meter
from uwf.model.threads import require_active
from uwf.model.window import StepView
from uwf.protocol.workflow import Workflow
from uwf.util.base32 import NodeHash
from uwf.util.errors import InvalidInput
from uwf.util.ulid import ThreadId

if TYPE_CHECKING:
    from uwf.agent_kit.history import History
    from uwf.model.agentcall import AgentCall, Stderr

__all__ = ["AgentContext", "StepView", "build_context"]


class AgentContext:
    """What the agent kit knows of the step it runs: the thread, its head and start, the
    workflow and the role. A plain class, not a dataclass: the agents that run at once load
    no ``dataclasses`` (tests/test_startup.py)."""

    def __init__(
        self,
        *,
        backend: Backend,
        thread: ThreadId,
        role: str,
        edge_prompt: str,
        head: NodeHash,
        start: chain.Start,
        head_node: chain.Start | chain.Step,
        prev: NodeHash | None,
        depth: int,
        workflow: dict[str, Any],
        role_def: dict[str, Any],
        schema_hash: str,
        schema: dict[str, Any] | None,
        format_instruction: str | None = None,
        meter: Meter | None = None,
        compact: NodeHash | None = None,
        children: list[NodeHash] | None = None,
        call: AgentCall | None = None,
        previous_attempts: dict[str, Any] | None = None,
    ) -> None:
        self.backend = backend
        self.thread = thread
        self.role = role
        self.edge_prompt = edge_prompt
        self.head = head
        self.start = start
        self.head_node = head_node
        self.prev = prev  # the StepNode hash the new step follows (None on the first step)
        self.depth = depth  # steps so far; the new step is depth + 1
        self.workflow = workflow
        self.role_def = role_def
        self.schema_hash = schema_hash
        self.schema = schema
        # the role's ``## Deliverable Format`` block, built on first read (``format_instruction``)
        self._format_instruction = format_instruction
        # the step's duration and model calls so far
        self.meter = Meter() if meter is None else meter
        # the summary the new step records as ``compact``: one recorded by hand for this head
        # (``thread compact``), or the one ``history`` wrote because the steps no longer fit
        self.compact = compact
        # the final heads of the children this step joins (``UWF_CHILDREN``), None if none
        self.children = children
        # the call of a Python agent run in uwf's process (docs/api.md), None in a process
        self.call = call
        # the failed attempts at this head before this step (``UWF_PREVIOUS_ATTEMPTS``), which
        # its detail keeps (docs/format.md, "Previous attempts"); None when there were none
        self.previous_attempts = previous_attempts
        self._since: tuple[list[StepView], StepView | None] | None = None
        # Every node the step writes is held here and written at once by ``flush``, before
        # the StepNode's hash is printed (one pack, one transaction: ``cas.batch``).
        self._batch = Batch(backend.nodes)

    # -- where the agent runs: its process, or uwf's (``call``) -------------------------------

    @property
    def cwd(self) -> Path:
        """Where the agent works: the step's directory (a Python agent never changes the
        process's directory: uwf's is shared), else the current directory."""
        if self.call is not None and self.call.cwd is not None:
            return Path(self.call.cwd)
        return Path.cwd()

    @functools.cached_property
    def env(self) -> Mapping[str, str]:
        """The agent's environment: the one uwf built for this step when it runs in uwf's
        process (``os.environ`` is uwf's own), else ``os.environ``; without the live-turns
        file either way (``agent_kit.live``: a command run for a model never gets it)."""
        if self.call is None:
            return os.environ  # the kit took the file out of it (``live.installed``)
        from uwf.model.live import ENV as LIVE_ENV

        return {k: v for k, v in self.call.env.items() if k != LIVE_ENV}

    @property
    def artifacts_dir(self) -> Path | None:
        """The run's fresh directory for the files the agent produces (``$UWF_ARTIFACTS_DIR``
        in a process); the kit stores what is left there (docs/format.md, "Artifacts")."""
        if self.call is not None:
            return Path(self.call.artifacts) if self.call.artifacts else None
        found = os.environ.get("UWF_ARTIFACTS_DIR")
        return Path(found) if found else None

    @property
    def stderr(self) -> TextIO | Stderr:
        """Where the agent writes its stderr lines (shown live with its name before them)."""
        if self.call is not None and self.call.stderr is not None:
            return self.call.stderr
        return sys.stderr

    @property
    def deadline(self) -> float | None:
        """When the step times out (``uwf.util.clock.monotonic``); None without a timeout, or
        in a process (which is killed at its timeout)."""
        return self.call.deadline if self.call is not None else None

    def should_stop(self) -> bool:
        """Whether the step no longer wants the answer (its timeout passed, the thread was
        killed, a stop was asked for): an agent in uwf's process should return soon. Always
        False in a process, which is killed instead."""
        return self.call is not None and self.call.should_stop()

    def sleep(self, seconds: float) -> bool:
        """Pause ``seconds``, or less when the step stops wanting the answer; whether it
        still wants it."""
        if self.call is not None:
            return self.call.sleep(seconds)
        import time

        time.sleep(seconds)
        return True

    @property
    def root(self) -> Path:
        """This machine's storage root: config.yaml, .env, caches."""
        return self.backend.root

    @property
    def store(self) -> Store:
        """The store, as the step sees it: puts are checked at once and held until
        ``flush`` (reads see them); everything else is the backend's store."""
        return self._batch

    def flush(self) -> None:
        """Write the nodes the step put, together (``Store.put_many``)."""
        self._batch.flush()

    @property
    def task(self) -> str:
        return self.start.prompt

    @property
    def format_instruction(self) -> str:
        """The ``## Deliverable Format`` block of the role's output schema (``""`` without
        one), built on first read: only an agent that prompts a model reads it, and building it
        imports its module, ``deliverable`` (``uwf-mock`` never does: docs/performance.md,
        "Processes and start-up")."""
        if self._format_instruction is None:
            from uwf.agent_kit import deliverable

            key = self.routing_key
            self._format_instruction = deliverable.build_output_format_instruction(
                self.schema, key if key == "$status" else None
            )
        return self._format_instruction

    @format_instruction.setter
    def format_instruction(self, text: str) -> None:
        self._format_instruction = text

    @property
    def routing_key(self) -> str:
        """The output field routing reads: ``status``, or ``$status`` (a version-1 workflow)."""
        from uwf.moderator.evaluate import rules_of

        return rules_of(Workflow(self.start.workflow, self.workflow)).key

    def _walk_to_last_visit(self) -> tuple[list[StepView], StepView | None]:
        if self._since is None:
            since: list[StepView] = []
            last: StepView | None = None
            for step in chain.iter_steps(self.store, self.head_node):
                view = StepView(self.store, step)
                if step.role == self.role:
                    last = view
                    break
                since.append(view)
            since.reverse()
            self._since = (since, last)
        return self._since

    def since_last_visit(self) -> tuple[list[StepView], int]:
        """The steps after this role's last visit, oldest first, and how many steps come
        before them (the prompts number steps from there)."""
        since, _ = self._walk_to_last_visit()
        return since, self.depth - len(since)

    @property
    def last_visit(self) -> StepView | None:
        """This role's most recent step in the thread, or None."""
        return self._walk_to_last_visit()[1]

    @property
    def is_first_visit(self) -> bool:
        return self.last_visit is None

    @functools.cached_property
    def history(self) -> History:
        """The newest summary and the steps after it that fit the context budget (a summary
        is written first when the steps since the last one no longer fit, or every
        ``compactAfter`` steps). What every agent's prompt shows of the thread."""
        from uwf.agent_kit.history import build_history

        return build_history(self)

    @functools.cached_property
    def cli_reference(self) -> bool:
        """Whether this role's prompt embeds the uwf CLI reference (``cliReference`` and
        ``cliReferenceOverrides`` in config.yaml; on by default)."""
        from uwf.config.config import load_config

        name = self.workflow.get("name")
        return load_config(self.root).wants_cli_reference(str(name), self.role)

    @functools.cached_property
    def steps(self) -> list[StepView]:
        """The whole chain, oldest first (reads every StepNode: O(thread length))."""
        return [
            StepView(self.store, s) for s in chain.steps_oldest_first(self.store, self.head_node)
        ]

    @property
    def visit(self) -> int:
        """1-based visit number of this role in the thread (this step included)."""
        return 1 + sum(1 for s in self.steps if s["role"] == self.role)


def build_context(
    backend: Backend, thread: str, role: str, edge_prompt: str, call: AgentCall | None = None
) -> AgentContext:
    """The context of ``role``'s step of ``thread``; ``call``: the step's call when the agent
    runs in uwf's process (the children it joins come from it, not from the environment)."""
    if call is not None and call.thread == thread:
        # the step holds its thread: the head is the one it planned from, read once by the
        # step (docs/api.md, "Python agents"), as the store relay answers a process agent
        tid, head_hash = call.thread, call.head
    else:
        tid, head_hash = require_active(backend, thread)
    store = backend.nodes
    head = chain.load_head(store, head_hash)
    start = chain.start_of(store, head)
    workflow = chain.load_workflow(store, start.workflow)
    found = workflow.role(role)
    if found is None:
        raise InvalidInput(f'unknown role "{role}" in workflow "{workflow.payload.get("name")}"')
    role_def = found.spec
    schema_hash = str(role_def.get("meta"))
    schema_node = store.get(schema_hash)
    return AgentContext(
        backend=backend,
        thread=tid,
        role=role,
        edge_prompt=edge_prompt,
        head=head_hash,
        start=start,
        head_node=head,
        prev=None if isinstance(head, chain.Start) else head.hash,
        depth=chain.depth_of(store, head),
        workflow=workflow.payload,
        role_def=role_def,
        schema_hash=schema_hash,
        schema=schema_node.payload if schema_node is not None else None,
        compact=compact.pending(store, tid, head_hash),
        children=children.from_env() if call is None else _listed(call.children),
        call=call,
        previous_attempts=_previous_attempts(os.environ if call is None else call.env),
    )


def _listed(heads: tuple[NodeHash, ...] | None) -> list[NodeHash] | None:
    return list(heads) if heads is not None else None


def _previous_attempts(env: Mapping[str, str]) -> dict[str, Any] | None:
    """``UWF_PREVIOUS_ATTEMPTS`` of the agent's environment (its process's, or the call's of a
    Python agent), checked (read only when set: most steps had none)."""
    raw = env.get("UWF_PREVIOUS_ATTEMPTS")
    if not raw:
        return None
    from uwf.model import attempts

    return attempts.from_env(raw)
