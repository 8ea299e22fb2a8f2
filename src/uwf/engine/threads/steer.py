"""Steering a thread by hand: fork with an edited output, re-run a step, answer a waiting role,
retry a failed thread.

Every function takes the backend and returns plain data. Nothing here rewrites a node: an
edit is a new StepNode beside the old one (same ``start``, ``prev``, ``role``) at the head of
a new thread; a re-run forks at the step's parent and runs the role again; an answer is the
step a person writes for the role a thread waits for, committed like an agent's
(docs/format.md, "Steps written by hand").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from uwf.backend.base import Backend
from uwf.engine.step import StepResult, step
from uwf.engine.step.commit import commit_step
from uwf.engine.step.plan import after_failures, plan_step
from uwf.engine.step.run import Runner, process_runner
from uwf.engine.threads import lifecycle as threads
from uwf.model import answer, chain
from uwf.model.threads import not_active, require_active
from uwf.moderator.evaluate import rules_of
from uwf.util.base32 import check_hash
from uwf.util.errors import Deferred, InvalidInput, UwfError, oneline
from uwf.util.frontmatter import split
from uwf.util.log import ProcessLog

if TYPE_CHECKING:
    from pathlib import Path

    from uwf.util.outputs import ForkedEdited, Prioritized, RerunLine, Retried


def _step_node(backend: Backend, node_hash: str, what: str) -> chain.Step:
    h = check_hash(node_hash)
    node = chain.load_head(backend.nodes, h)
    if not isinstance(node, chain.Step):
        raise InvalidInput(f"{what} needs a StepNode; {h} is a StartNode")
    return node


def _prev_of(backend: Backend, step: chain.Step) -> chain.Start | chain.Step:
    """The node a step follows: its previous StepNode, or its StartNode."""
    return chain.load_head(backend.nodes, step.prev or step.start)


def edit_template(backend: Backend, node_hash: str) -> str:
    """The text ``thread fork --edit`` opens: the step's output as frontmatter, its content
    after it."""
    from uwf.model.turns import last_assistant_content

    step_node = _step_node(backend, node_hash, "thread fork --edit")
    store = backend.nodes
    workflow = chain.load_workflow(store, chain.start_of(store, step_node).workflow)
    _, schema = answer.role_schema(store, workflow, step_node.role)
    output = chain.output_of(store, step_node)
    return answer.template(
        schema,
        output if isinstance(output, dict) else {},
        split(last_assistant_content(store, step_node.payload.get("detail")) or "")[1],
        notes=[
            f"Edit the output of step {step_node.hash} ({step_node.role}); save and quit to "
            "fork the thread from the edited step.",
            "Leave it unchanged to create nothing.",
        ],
    )


def fork_edited(
    backend: Backend,
    node_hash: str,
    text: str,
    *,
    via: str,
    duration_ms: int | None = None,
    cwd: str | Path | None = None,
) -> ForkedEdited:
    """A new thread whose head is a copy of a step with the output ``text`` gives (a
    frontmatter document, or YAML/JSON), checked against the role's schema and the graph.
    ``cwd``: the new thread's working directory (``--cwd``)."""
    original = _step_node(backend, node_hash, via)
    store = backend.nodes
    start = chain.start_of(store, original)
    workflow = chain.load_workflow(store, start.workflow)
    given = answer.parse_answer(text)
    output = answer.accept(store, workflow, original.role, given.output)
    head = answer.write_step(
        store,
        _prev_of(backend, original),
        role=original.role,
        edge_prompt=str(original.payload.get("edgePrompt") or ""),
        output=output,
        body=given.body,
        detail={"via": via, "editedFrom": original.hash},
        duration_ms=duration_ms,
    )
    thread = threads.fork(backend, head, cwd)["thread"]  # a new thread at the edited step
    return {"thread": thread, "head": head, "forkedFrom": {"step": original.hash, "edited": True}}


def rerun(
    backend: Backend,
    node_hash: str,
    *,
    agent: str | None = None,
    timeout: float | None = None,
    edge_prompt: str | None = None,
    cwd: str | Path | None = None,
    runner: Runner = process_runner,
) -> RerunLine:
    """Fork at a step's parent and run its role once more; the original is untouched.
    ``cwd``: the fork's working directory (``--cwd``), where the role's agent starts.

    A re-run whose step fails leaves no thread behind: its fork is archived as ``killed`` (the
    error says which), so trying again does not pile up idle threads. One whose agent defers
    keeps its fork, which waits for an answer like any thread."""
    original = _step_node(backend, node_hash, "thread rerun")
    parent = original.prev or original.start
    forked = threads.fork(backend, parent, cwd)["thread"]
    try:
        result = step(
            backend, forked, agent=agent, timeout=timeout, edge_prompt=edge_prompt, runner=runner
        )
    except UwfError as exc:
        if isinstance(exc, Deferred):
            exc.message = f"{exc.message} (re-run thread {forked}, forked at {parent})"
        else:
            threads.kill(backend, forked)
            exc.message = (
                f"{exc.message} (the re-run's thread {forked}, forked at {parent}, was archived "
                "as killed)"
            )
        exc.args = (exc.message,)
        raise
    return {**result.as_json(), "rerunOf": original.hash}


def parse_sets(sets: Sequence[str]) -> dict[str, Any]:
    """``--set field=value`` pairs; a value that parses as JSON is that value, else a string."""
    out: dict[str, Any] = {}
    for item in sets:
        name, sep, raw = item.partition("=")
        if not sep or not name.strip():
            raise InvalidInput(f"--set expects field=value, got: {oneline(item)}")
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        out[name.strip()] = value
    return out


def answer_step(
    backend: Backend,
    thread: str,
    *,
    fields: dict[str, Any],
    text: str | None = None,
    message: str | None = None,
    wait: bool = False,
    status: str | None = None,
) -> StepResult:
    """Write the step of the role ``thread`` waits for (or runs next) from a person's answer:
    ``text`` (a frontmatter document), then ``fields`` over it, then ``status`` as the field
    the workflow routes on (``status``, or ``$status`` in a version-1 workflow), ``message``
    as its content; checked and committed under the step lock like an agent's step."""
    given = answer.parse_answer(text) if text is not None else answer.Answer({}, "")
    output = {**given.output, **fields}
    body = message if message is not None else given.body
    tid, _ = require_active(backend, thread)
    with backend.locks.step(tid, wait=wait) as lock:
        head = backend.threads.head(tid)
        if head is None:
            raise not_active(backend, tid)
        record = backend.threads.get(tid)
        plan = plan_step(backend, tid, head, by=("uwf thread answer",))
        plan = after_failures(plan, record.failure if record is not None else None)
        if plan.role is None:
            raise InvalidInput(
                f"thread {tid} has no role to answer: it ends here ({plan.archive}); "
                f"uwf thread step {tid} closes it"
            )
        lock.note(role=plan.role, agent="uwf thread answer")
        store = backend.nodes
        workflow = chain.load_workflow(store, plan.workflow)
        if status is not None:
            output[rules_of(workflow).key] = status
        output_hash = answer.accept(store, workflow, plan.role, output)
        h = answer.write_step(
            store,
            chain.load_head(store, head),
            role=plan.role,
            edge_prompt=plan.prompt,
            output=output_hash,
            body=body,
            detail={"via": "thread answer"},
            children=plan.children,
            previous_attempts=dict(plan.previous_attempts) if plan.previous_attempts else None,
        )
        log = ProcessLog(backend.root, thread=tid, workflow=plan.workflow)
        log.write("E3N8V5Q1", f"answered role={plan.role} step={h}")
        return commit_step(backend, plan, h, log)


def retry(backend: Backend, thread: str) -> Retried:
    """``thread retry``: end a thread's last failure, so that a ``failed`` thread (a dead
    letter) or one backing off is stepped again at once, its attempts counted anew
    (docs/format.md, "Retries"). The head does not move."""
    from uwf.model.threads import failure_json

    tid, _ = require_active(backend, thread)
    cleared = backend.threads.retry(tid)
    if cleared is None:
        raise InvalidInput(f"thread {tid} has no failed attempts to retry")
    ProcessLog(backend.root, thread=tid).write(
        "J6R3X8M5", f"thread retried attempts={cleared.attempts} exhausted={cleared.exhausted}"
    )
    return {"thread": tid, "retried": True, "failure": failure_json(cleared)}


def prioritize(backend: Backend, thread: str, priority: int) -> Prioritized:
    """``thread priority``: set how soon ``--next`` and workers take the thread
    (docs/format.md, "Priorities")."""
    threads.check_priority(priority)
    tid, _ = require_active(backend, thread)
    previous = backend.threads.prioritize(tid, priority)
    return {"thread": tid, "priority": priority, "previous": previous}
