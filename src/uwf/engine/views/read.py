"""Markdown views of threads and steps (docs/format.md, "Markdown views") and step details
(docs/format.md, "Nodes", references).

``thread read`` walks back from the head only as far as its quota reaches, and no further
than the newest compaction summary (shown in place of the steps it covers, unless
``--full``): step numbers come from the steps' ``depth``, so a 10,000-step thread costs what
a 10-step one does. Each step lists the artifacts its detail records.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Iterator
from typing import Any

from uwf.backend.base import Backend
from uwf.cas import refs
from uwf.cas.store import Store
from uwf.model import artifacts, attempts, chain
from uwf.model.threads import ThreadRef, fanned_out, locate, task_line
from uwf.model.turns import last_assistant_content, turns
from uwf.model.window import text_of
from uwf.protocol.workflow import Workflow
from uwf.util.base32 import check_hash
from uwf.util.errors import InvalidInput, NotFound, UwfError
from uwf.util.fences import code_span, fence, one_line
from uwf.util.numbers import as_positive_int

DEFAULT_QUOTA = 4000
SEPARATOR = "\n\n---\n\n"
# v0.5.0 counts 6 for the 7-character separator (docs/format.md, "Markdown views")
SEPARATOR_COST = 6


def parse_quota(value: str | int) -> int:
    """A positive integer quota (``uwf.util.numbers``), else the error line of v0.5.0."""
    quota = as_positive_int(str(value))
    if quota is None:
        raise InvalidInput("invalid --quota: must be a positive integer")
    return quota


def _time(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _bytes(size: int) -> str:
    return f"{size:,} byte{'s' if size != 1 else ''}"


class _Blocks:
    """The markdown of each step of one thread, as ``thread read`` shows them."""

    def __init__(self, store: Store, workflow: Workflow) -> None:
        self.store = store
        self.workflow = workflow

    def header(self, step: chain.Step, number: int) -> str:
        marks = f" | **Summary:** `{step.compact}`" if step.compact else ""
        agent = one_line(str(step.payload.get("agent", "")))
        return (
            f"## Step {number}: {step.role} `{step.hash}`\n"
            f"**Agent:** {agent} | **Time:** {_time(step.timestamp)}" + marks
        )

    def prompt(self, step: chain.Step) -> str:
        role = self.workflow.role(step.role)
        return f"\n\n<prompt>\n{role.spec.get('goal', '')}\n</prompt>" if role is not None else ""

    def body(self, step: chain.Step) -> str:
        """The edge prompt the step was given, its answer (its structured output as the
        frontmatter, then its content), then the artifacts it recorded. Agent text is fenced
        (docs/format.md, "Markdown views")."""
        edge = step.payload.get("edgePrompt")
        detail = step.payload.get("detail")
        tried = attempts.of_detail(self.store, detail)  # the failures the step came after
        out = f"\n\n{attempts.line(tried)}" if tried is not None else ""
        out += f"\n\n**Edge prompt:**\n\n{fence(edge, 'text')}" if isinstance(edge, str) else ""
        answer = answer_text(
            chain.output_of(self.store, step), last_assistant_content(self.store, detail)
        )
        out += f"\n\n**Output:**\n\n{fence(answer, 'markdown')}" if answer else ""
        listed = artifacts.of_detail(self.store, detail)
        if listed:
            lines = [f"- `{a.path}` ({_bytes(a.size)}, `{a.hash}`)" for a in listed]
            out += "\n\n**Artifacts:**\n" + "\n".join(lines)
        return out + self.joined(step)

    def joined(self, step: chain.Step) -> str:
        """A join's children (docs/format.md, "Fan-out and join"): each child's last step,
        which `uwf step read` shows, with the child's task (agent text: in a code span)."""
        children = step.payload.get("children")
        if not isinstance(children, list) or not children:
            return ""
        lines = []
        for head in children:
            try:
                task = chain.start_of(
                    self.store, chain.load_head(self.store, check_hash(str(head)))
                ).prompt
            except UwfError:
                task = "(the child's chain is missing: uwf cas verify)"
            lines.append(f"- `{one_line(str(head))}` {code_span(task_line(task))}")
        return "\n\n**Joined children** (their last steps: `uwf step read <hash>`):\n" + (
            "\n".join(lines)
        )

    def select(
        self, thread: str, steps: Iterator[chain.Step], quota: int, used: int, full: bool
    ) -> tuple[list[tuple[chain.Step, int, str]], str | None]:
        """The steps that fit ``quota`` (``used`` of it taken), newest first, as (step, number,
        body); and the summary block that ends the walk (None with ``full`` or when the walk
        reached no summary)."""
        selected: list[tuple[chain.Step, int, str]] = []
        number: int | None = None
        for step in steps:
            number = chain.depth_of(self.store, step) if number is None else number - 1
            body = self.body(step)
            cost = len(self.header(step, number) + self.prompt(step) + body)
            if used > 0:
                cost += SEPARATOR_COST
            if selected and used + cost > quota:
                break
            used += cost
            selected.append((step, number, body))
            if step.compact is not None and not full and number > 1:
                return selected, self.summary(thread, step, number)
        return selected, None

    def summary(self, thread: str, step: chain.Step, number: int) -> str:
        assert step.compact is not None
        text = text_of(self.store, step.compact)
        covered = f"steps 1–{number - 1}" if number > 2 else "step 1"
        return (
            f"## Summary of {covered} `{step.compact}`\n\n"
            f"{fence(text, 'markdown') if text is not None else '(the summary node is missing)'}"
            "\n\n"
            f"*(recorded by step {number}; `uwf thread read {thread} --full --before "
            f"{step.hash}` shows the steps it covers)*"
        )


def output_yaml(output: Any) -> str:
    """A structured output as YAML: its fields in block style, or (an output that is not a
    mapping, written by another tool) its JSON, which YAML reads the same."""
    from uwf.util.jsonfmt import dump_yaml, dumps

    return dump_yaml(output) if isinstance(output, dict) else dumps(output) + "\n"


def answer_text(output: Any, content: str | None) -> str:
    """A step's answer as its writer gave it: the structured output as a frontmatter block
    (``output_yaml``), then the content without the frontmatter it may start with ("" for
    neither). A step whose output node is missing shows its content only."""
    from uwf.util.frontmatter import body

    parts = []
    if output not in ({}, None):
        parts.append(f"---\n{output_yaml(output)}---")
    if content is not None and (text := body(content).strip("\n")):
        parts.append(text)
    return "\n".join(parts)


def _attempts(n: int) -> str:
    return f"{n} failed attempt{'s' if n != 1 else ''}"


def state_line(backend: Backend, ref: ThreadRef) -> str | None:
    """What ``thread read`` says of an active thread that is not simply idle, under its
    title: running, waiting (for a person, or for its fan-out's children), failing or failed,
    with what to run next. None for an idle or an ended thread (their task section is as
    v0.5.0 printed it). Agent text (a reason, an error line) is in a code span."""
    if not ref.active:
        return None
    tid = ref.thread
    holder = backend.locks.holder(tid)
    if holder is not None:
        who = f" of {holder.role}" if holder.role else ""
        since = f" since {_time(holder.since)}" if holder.since is not None else ""
        where = f" on {one_line(holder.host)}" if holder.host else ""
        return f"running: a step{who}{since}{where}"
    waiting = ref.waiting
    if waiting is not None and fanned_out(waiting):
        children = waiting.children or ()
        active = sum(1 for child in children if backend.threads.head(child) is not None)
        noun = "child thread" if len(children) == 1 else "child threads"
        left = f"{active} still active" if active else "all ended: it joins at its next step"
        return (
            f"fanned out since {_time(waiting.since)}: {len(children)} {noun}, {left}; "
            f"{waiting.role} joins them (`uwf thread list --parent {tid}`)"
        )
    if waiting is not None:
        said = f": {code_span(waiting.reason)}" if waiting.reason else ""
        return (
            f"waiting for {waiting.role} since {_time(waiting.since)}{said} "
            f"(`uwf thread resume {tid} -p …` runs it again with your text, "
            f"`uwf thread answer {tid}` writes its step)"
        )
    failure = ref.failure
    if failure is None:
        return None
    role = f" of {failure.role}" if failure.role else ""
    last = code_span(f"exit {failure.code}: {failure.error}")
    since = _time(failure.since if failure.since is not None else failure.at)
    if failure.exhausted:
        return (
            f"failed: {_attempts(failure.attempts)}{role} since {since}, the last: {last} "
            f"(`uwf thread retry {tid}` steps it again)"
        )
    after = f"; next attempt after {_time(failure.retry_at)}" if failure.retry_at else ""
    return f"failing: {_attempts(failure.attempts)}{role} since {since}, the last: {last}{after}"


def read_thread(
    backend: Backend,
    thread: str,
    quota: int = DEFAULT_QUOTA,
    before: str | None = None,
    show_start: bool = False,
    full: bool = False,
) -> str:
    """The thread as markdown, newest steps first within ``quota``: walking back stops at the
    first step carrying a compaction summary, shown in place of the steps before it, unless
    ``full``."""
    ref = locate(backend, thread)
    if before is not None:
        check_hash(before)
    store = backend.nodes
    head = chain.load_head(store, ref.head)
    start = chain.start_of(store, head)
    workflow = chain.load_workflow(store, start.workflow)
    blocks = _Blocks(store, workflow)

    include_start = before is None or show_start
    state = state_line(backend, ref) if include_start else None
    start_section = (
        f"# Thread `{thread}`\n\n**Workflow:** {workflow.name} (`{start.workflow}`)"
        + (f"\n\n**State:** {state}" if state is not None else "")
        + f"\n\n## Task\n\n{start.prompt}"
    )
    candidates = chain.iter_steps(store, head)
    if before is not None:
        for step in candidates:
            if step.hash == before:
                break
        else:
            raise NotFound(f"step {before} not found in thread {thread}")
    used = len(start_section) if include_start else 0
    selected, summary = blocks.select(thread, candidates, quota, used, full)

    pieces: list[str] = [start_section] if include_start else []
    if summary is not None:
        pieces.append(summary)
    elif selected:
        oldest_step, oldest_number, _ = selected[-1]
        earlier = oldest_number - 1
        if earlier > 0:
            noun = "step" if earlier == 1 else "steps"
            pieces.append(
                f"*({earlier} earlier {noun}, load with `uwf thread read {thread} "
                f"--before {oldest_step.hash}`)*"
            )
    shown_roles: set[str] = set()
    for step, num, body in reversed(selected):
        block = blocks.header(step, num)
        if step.role not in shown_roles:
            block += blocks.prompt(step)
            if step.role in blocks.workflow.roles:
                shown_roles.add(step.role)
        pieces.append(block + body)
    return SEPARATOR.join(pieces)


def step_details(backend: Backend, step_hash: str) -> Any:
    """The step's detail node with every cas_ref expanded into the payload it names."""
    store = backend.nodes
    step = chain.require_step(store, step_hash)
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


def _turn_section(position: int, turn: dict[str, Any]) -> tuple[int, str] | None:
    """``## Turn <n>: <role>``, its text, then each tool call the turn made (name and
    arguments); None for a turn with neither text nor tool calls."""
    content = turn.get("content")
    calls = [c for c in turn.get("toolCalls") or [] if isinstance(c, dict)]
    if not isinstance(content, str) and not calls:
        return None
    index = turn.get("index")
    number = (index if isinstance(index, int) else position) + 1
    role = turn.get("role")
    who = one_line(role) if isinstance(role, str) and role else ""
    parts = [f"## Turn {number}: {who}" if who else f"## Turn {number}"]
    if isinstance(content, str) and (content or not calls):
        parts.append(fence(content, "markdown"))
    for call in calls:
        args = call.get("args")
        args_text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        name = one_line(str(call.get("name"))).replace("`", "'")
        parts.append(f"**Tool call:** `{name}`\n\n{fence(args_text)}")
    return number, "\n\n".join(parts)


def read_step(backend: Backend, step_hash: str, quota: int = DEFAULT_QUOTA) -> str:
    """A step's structured output, then its turns as markdown, each labelled with who spoke,
    tool calls included; the newest turns first to fit ``quota``. Agent text is fenced."""
    store = backend.nodes
    step = chain.require_step(store, step_hash)
    head = (
        f"# Step {step_hash}\n\n**Role:** {step.role}\n"
        f"**Agent:** {one_line(str(step.payload.get('agent', '')))}"
    )
    detail = step.payload.get("detail")
    if isinstance(detail, str) and detail and store.get(detail) is None:
        raise NotFound(f"detail node not found: {detail}")
    tried = attempts.of_detail(store, detail)
    if tried is not None:
        head += f"\n{attempts.line(tried)}"
    output = chain.output_of(store, step)
    if output not in ({}, None):
        head += f"\n\n**Output:**\n\n{fence(output_yaml(output), 'yaml')}"
    shown: list[tuple[int, str]] = []
    for turn in turns(store, detail):
        section = _turn_section(len(shown), turn)  # without an index: numbered as shown
        if section is not None:
            shown.append(section)
    if not shown:
        return head
    available = quota - len(head) - 200
    chosen: list[str] = []
    used = 0
    for _, text in reversed(shown):
        cost = len(text) + (2 if chosen else 0)
        if chosen and used + cost > available:
            break
        used += cost
        chosen.append(text)
    chosen.reverse()
    lines = [head]
    if len(chosen) < len(shown):
        lines += ["", "_[Earlier turns omitted due to quota. Use --quota to increase.]_"]
    for text in chosen:
        lines += ["", text]
    return "\n".join(lines)
