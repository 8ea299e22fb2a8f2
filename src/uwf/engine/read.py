"""Markdown views of threads and steps (REFERENCE §4.6, §4.6b) and step details (§1.12).

``thread read`` walks back from the head only as far as its quota reaches: step numbers
come from the steps' ``depth``, so a 10,000-step thread costs what a 10-step one does.
"""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any

from uwf.cas import refs
from uwf.cas.store import Store
from uwf.engine import chain
from uwf.engine.threads import locate
from uwf.protocol import schemas
from uwf.protocol.store import open_store
from uwf.util.base32 import check_hash
from uwf.util.errors import InvalidInput, NotFound

DEFAULT_QUOTA = 4000
SEPARATOR = "\n\n---\n\n"
SEPARATOR_COST = 6  # REFERENCE §9.2: the reference counts 6 for the 7-character separator


def parse_quota(value: str | int) -> int:
    """A positive integer quota, else the reference's error line."""
    try:
        quota = int(str(value).strip())
    except ValueError:
        quota = 0
    if quota < 1:
        raise InvalidInput("invalid --quota: must be a positive integer")
    return quota


def _turns(store: Store, detail_hash: Any) -> list[dict[str, Any]]:
    """The turn payloads of a detail node (missing turn nodes skipped)."""
    if not isinstance(detail_hash, str) or not detail_hash:
        return []
    node = store.get(detail_hash)
    if node is None or not isinstance(node.payload, dict):
        return []
    turn_refs = node.payload.get("turns")
    if not isinstance(turn_refs, list):
        return []
    out = []
    for ref in turn_refs:
        if isinstance(ref, str):
            turn = store.get(ref)
            if turn is not None and isinstance(turn.payload, dict):
                out.append(turn.payload)
    return out


def last_assistant_content(store: Store, detail_hash: Any) -> str | None:
    """The newest non-blank assistant turn text of a step's detail, or None."""
    for turn in reversed(_turns(store, detail_hash)):
        content = turn.get("content")
        if turn.get("role") == "assistant" and isinstance(content, str) and content.strip():
            return content
    return None


def _time(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def read_thread(
    root: Path,
    thread: str,
    quota: int = DEFAULT_QUOTA,
    before: str | None = None,
    show_start: bool = False,
) -> str:
    ref = locate(root, thread)
    if before is not None:
        check_hash(before)
    store = open_store(root)
    head = chain.load_head(store, ref.head)
    start = chain.start_of(store, head)
    workflow = chain.load_workflow(store, start.workflow)
    roles: dict[str, Any] = workflow.get("roles", {})

    include_start = before is None or show_start
    start_section = (
        f"# Thread `{thread}`\n\n**Workflow:** {workflow.get('name')} (`{start.workflow}`)"
        f"\n\n## Task\n\n{start.prompt}"
    )
    candidates = chain.iter_steps(store, head)
    if before is not None:
        for step in candidates:
            if step.hash == before:
                break
        else:
            raise NotFound(f"step {before} not found in thread {thread}")

    def header(step: chain.Step, number: int) -> str:
        return (
            f"## Step {number}: {step.role} `{step.hash}`\n"
            f"**Agent:** {step.payload.get('agent', '')} | **Time:** {_time(step.timestamp)}"
        )

    def prompt_part(step: chain.Step) -> str:
        role = roles.get(step.role)
        return f"\n\n<prompt>\n{role.get('goal', '')}\n</prompt>" if isinstance(role, dict) else ""

    def output_part(step: chain.Step) -> str:
        content = last_assistant_content(store, step.payload.get("detail"))
        return f"\n\n<output>\n{content}\n</output>" if content is not None else ""

    total = len(start_section) if include_start else 0
    selected: list[tuple[chain.Step, int, str]] = []  # newest first: step, number, output part
    number: int | None = None
    for step in candidates:
        number = chain.depth_of(store, step) if number is None else number - 1
        out_part = output_part(step)
        cost = len(header(step, number) + prompt_part(step) + out_part)
        if total > 0:
            cost += SEPARATOR_COST
        if selected and total + cost > quota:
            break
        total += cost
        selected.append((step, number, out_part))

    pieces: list[str] = []
    if include_start:
        pieces.append(start_section)
    if selected:
        oldest_step, oldest_number, _ = selected[-1]
        earlier = oldest_number - 1
        if earlier > 0:
            noun = "step" if earlier == 1 else "steps"
            pieces.append(
                f"*({earlier} earlier {noun}, load with `uwf thread read {thread} "
                f"--before {oldest_step.hash}`)*"
            )
    shown_roles: set[str] = set()
    for step, num, out_part in reversed(selected):
        block = header(step, num)
        if step.role not in shown_roles:
            block += prompt_part(step)
            if step.role in roles:
                shown_roles.add(step.role)
        pieces.append(block + out_part)
    return SEPARATOR.join(pieces)


def _require_step(store: Store, h: str) -> chain.Step:
    check_hash(h)
    node = store.get(h)
    if node is None:
        raise NotFound(f"CAS node not found: {h}")
    if node.type != schemas.hashes().step:
        raise InvalidInput(f"node {h} is not a StepNode")
    return chain.Step(h, node.payload, node.timestamp)


def step_details(root: Path, step_hash: str) -> Any:
    """The step's detail node with every cas_ref expanded into the payload it names."""
    store = open_store(root)
    step = _require_step(store, step_hash)
    detail = step.payload.get("detail")
    if not isinstance(detail, str) or not detail:
        raise NotFound(f"step {step_hash} has no detail")
    node = store.get(detail)
    if node is None:
        raise NotFound(f"detail node not found: {detail}")
    schema = store.get(node.type)
    if schema is None:
        return node.payload
    return refs.expand(store, schema.payload, node.payload, frozenset({detail}))


def read_step(root: Path, step_hash: str, quota: int = DEFAULT_QUOTA) -> str:
    store = open_store(root)
    step = _require_step(store, step_hash)
    head = (
        f"# Step {step_hash}\n\n**Role:** {step.role}\n**Agent:** {step.payload.get('agent', '')}"
    )
    detail = step.payload.get("detail")
    if isinstance(detail, str) and detail and store.get(detail) is None:
        raise NotFound(f"detail node not found: {detail}")
    turns = []
    for position, turn in enumerate(
        t for t in _turns(store, detail) if isinstance(t.get("content"), str)
    ):
        index = turn.get("index")
        turns.append((index if isinstance(index, int) else position, turn["content"]))
    if not turns:
        return head
    available = quota - len(head) - 200
    chosen: list[tuple[int, str]] = []
    used = 0
    for index, content in reversed(turns):
        cost = len(f"## Turn {index + 1}\n\n{content}") + (2 if chosen else 0)
        if chosen and used + cost > available:
            break
        used += cost
        chosen.append((index, content))
    chosen.reverse()
    lines = [head]
    if len(chosen) < len(turns):
        lines += ["", "_[Earlier turns omitted due to quota. Use --quota to increase.]_"]
    for index, content in chosen:
        lines += ["", f"## Turn {index + 1}", "", content]
    return "\n".join(lines)
