"""``thread fork <node> --workflow <ident>``: go on from a step under another workflow version.

A StepNode names its StartNode and the StartNode names its workflow, so a chain cannot move to
another workflow in place: the fork copies it (docs/format.md, "Forking onto another
workflow"). A new StartNode carries the same task (and ``maxRounds``) with the new workflow;
each step of the chain, oldest first, becomes a new StepNode with the same role, agent,
detail, edge prompt and depth, linked to the new StartNode and to the previous copy. Outputs
are shared when the role's output schema is the same in both versions, and re-stored under the
new schema (which must accept them) when it changed. Nothing is written before every role of
the chain has been found in the new version.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uwf.backend.base import Backend, ThreadInfo
from uwf.model import chain
from uwf.protocol import schemas
from uwf.protocol.workflow import Workflow
from uwf.util.base32 import NodeHash, check_hash
from uwf.util.errors import InvalidInput
from uwf.util.log import ProcessLog
from uwf.util.ulid import new_thread_id

if TYPE_CHECKING:
    from uwf.cas.store import Store
    from uwf.util.outputs import ForkedOnto


def fork_onto(
    backend: Backend, node_hash: str, workflow_ident: str, cwd: str | Path | None = None
) -> ForkedOnto:
    """A new active thread that continues the chain ending at ``node_hash`` under the
    workflow ``workflow_ident`` (a hash, a file or a name, resolved as ``thread start`` does,
    from ``cwd`` when given). ``cwd``: the new thread's working directory (``--cwd``).

    Returns ``{"thread", "forkedFrom": {"step"}, "workflow", "head"}``. Onto the workflow
    the chain already runs, this is a plain fork (the head is ``node_hash`` itself).
    """
    from uwf.engine.threads.lifecycle import thread_dir
    from uwf.engine.workflows import stored as workflows
    from uwf.model.threads import task_line

    h = check_hash(node_hash)
    workdir = thread_dir(cwd) if cwd is not None else None
    store = backend.nodes
    head = chain.load_head(store, h)
    start = chain.start_of(store, head)
    steps = chain.steps_oldest_first(store, head)
    target = workflows.resolve_for_start(
        backend, workflow_ident, Path(workdir) if workdir is not None else Path.cwd()
    )
    if target == start.workflow:  # the same version: a plain fork, nothing to copy
        from uwf.engine.threads.lifecycle import fork

        return {**fork(backend, h, workdir), "workflow": target, "head": h}
    workflow = chain.load_workflow(store, target)
    roles = _roles_of(workflow, steps)
    retyped = _retyped_outputs(store, workflow, steps)  # checked before any write
    types = schemas.ensure(store)
    payload: dict[str, Any] = {"workflow": target, "prompt": start.prompt}
    if start.max_rounds is not None:
        payload["maxRounds"] = start.max_rounds
    new_start = store.put(types.start, payload)
    new_head = new_start
    for step in steps:
        copy = dict(step.payload, start=new_start, prev=None if new_head == new_start else new_head)
        if step.hash in retyped:
            copy["output"] = store.put(roles[step.role]["meta"], retyped[step.hash])
        new_head = store.put(schemas.step_type(copy), copy)  # compact, children kept
    thread = new_thread_id()
    backend.threads.create(thread, new_head, ThreadInfo(target, task_line(start.prompt), workdir))
    ProcessLog(backend.root, thread=thread, workflow=target).write(
        "W4F7K2Q9", f"thread forked from={h} onto workflow={target} head={new_head}"
    )
    return {"thread": thread, "forkedFrom": {"step": h}, "workflow": target, "head": new_head}


def _roles_of(workflow: Workflow, steps: list[chain.Step]) -> Mapping[str, Any]:
    """The target's roles, once every role the chain ran is known to be among them."""
    roles = workflow.roles
    missing = list(dict.fromkeys(s.role for s in steps if s.role not in roles))
    if missing:
        raise InvalidInput(
            f"cannot fork onto workflow {_name(workflow)} ({workflow.hash}): it has no role "
            f"{', '.join(missing)} (the forked chain ran {'it' if len(missing) == 1 else 'them'})"
        )
    return roles


def _retyped_outputs(
    store: Store, workflow: Workflow, steps: list[chain.Step]
) -> dict[NodeHash, Any]:
    """Step -> output payload, for the steps whose role has another output schema in the
    target; each payload checked against that schema (nothing is written here)."""
    from uwf.cas import schema

    out: dict[NodeHash, Any] = {}
    for step in steps:
        meta = str(workflow.roles[step.role]["meta"])
        node = store.get(str(step.payload.get("output")))
        if node is None or node.type == meta:
            continue  # the same schema (or a missing node, which `cas verify` reports)
        schema_node = store.get(meta)
        problems = (
            schema.field_problems(schema_node.payload, node.payload, meta) if schema_node else []
        )
        if problems:
            raise InvalidInput(
                f"cannot fork onto workflow {_name(workflow)} ({workflow.hash}): the output of "
                f"step {step.hash} ({step.role}) does not match the role's schema there: "
                f"{problems[0]}"
            )
        out[step.hash] = node.payload
    return out


def _name(workflow: Workflow) -> str:
    return workflow.name or "?"
