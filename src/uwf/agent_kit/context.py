"""What an agent knows when it starts: the thread, its chain, the workflow and its role."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from uwf.cas.fs import FsStore
from uwf.engine import chain
from uwf.engine.read import last_assistant_content
from uwf.engine.state import State
from uwf.protocol.store import open_store
from uwf.util.errors import InvalidInput, NotFound
from uwf.util.ulid import check_thread_id


@dataclass
class AgentContext:
    root: Path
    store: FsStore
    thread: str
    role: str
    edge_prompt: str
    head: str
    start: chain.Start
    prev: str | None  # the StepNode hash the new step follows (None on the first step)
    depth: int  # steps so far; the new step is depth + 1
    workflow: dict[str, Any]
    role_def: dict[str, Any]
    schema_hash: str
    schema: dict[str, Any] | None
    steps: list[dict[str, Any]] = field(default_factory=list)  # oldest first
    format_instruction: str = ""

    @property
    def task(self) -> str:
        return self.start.prompt

    @property
    def is_first_visit(self) -> bool:
        return not any(s["role"] == self.role for s in self.steps)

    @property
    def visit(self) -> int:
        """1-based visit number of this role in the thread (this step included)."""
        return 1 + sum(1 for s in self.steps if s["role"] == self.role)


def build_context(root: Path, thread: str, role: str, edge_prompt: str) -> AgentContext:
    check_thread_id(thread)
    head_hash = State(root).head(thread)
    if head_hash is None:
        raise NotFound(f"thread not found in threads.yaml: {thread}")
    store = open_store(root)
    head = chain.load_head(store, head_hash)
    start = chain.start_of(store, head)
    workflow = chain.load_workflow(store, start.workflow)
    role_def = workflow.get("roles", {}).get(role)
    if not isinstance(role_def, dict):
        raise InvalidInput(f'unknown role "{role}" in workflow "{workflow.get("name")}"')
    schema_hash = str(role_def.get("meta"))
    schema_node = store.get(schema_hash)
    steps = []
    for step in chain.steps_oldest_first(store, head):
        steps.append(
            {
                "hash": step.hash,
                "role": step.role,
                "output": chain.output_of(store, step),
                "detail": step.payload.get("detail"),
                "agent": step.payload.get("agent", ""),
                "edgePrompt": step.payload.get("edgePrompt", ""),
                "content": last_assistant_content(store, step.payload.get("detail")),
            }
        )
    return AgentContext(
        root=root,
        store=store,
        thread=thread,
        role=role,
        edge_prompt=edge_prompt,
        head=head_hash,
        start=start,
        prev=None if isinstance(head, chain.Start) else head.hash,
        depth=len(steps),
        workflow=workflow,
        role_def=role_def,
        schema_hash=schema_hash,
        schema=schema_node.payload if schema_node is not None else None,
        steps=steps,
    )
