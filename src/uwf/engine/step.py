"""One step: moderator -> agent -> checks -> compare-and-swap of the head (PORT §6).

Order matters for "nothing lost": the thread lock is taken first (a second step on the same
thread is refused before anything runs); the agent writes only immutable nodes; the returned
StepNode is checked and routed by the moderator BEFORE the head moves; the head moves by
compare-and-swap under the threads.yaml lock. Any failure before that leaves the head where
it was; nodes an agent wrote for a failed step are unreachable garbage for ``cas gc``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from uwf.engine import chain
from uwf.engine.spawn import run_agent
from uwf.engine.state import State
from uwf.engine.threads import lock_path, not_active
from uwf.moderator import evaluate
from uwf.moderator.evaluate import START, Decision, ModeratorError
from uwf.protocol import schemas
from uwf.protocol.store import open_store
from uwf.util import fsio
from uwf.util.base32 import describe, is_hash
from uwf.util.errors import AgentFailed, Conflict, InvalidInput, UwfError
from uwf.util.log import ProcessLog
from uwf.util.ulid import check_thread_id, now_ms


def _decide(store: Any, workflow: dict[str, Any], head: chain.Start | chain.Step) -> Decision:
    if isinstance(head, chain.Start):
        return evaluate(workflow["graph"], START, {})
    return evaluate(workflow["graph"], head.role, chain.output_of(store, head))


def _max_rounds(start: chain.Start, config: Any) -> int | None:
    if start.max_rounds is not None:
        return start.max_rounds
    value = getattr(config, "max_rounds", None)
    return value if isinstance(value, int) else None


def step(
    root: Path,
    thread: str,
    *,
    agent: str | None = None,
    dry_run: bool = False,
    timeout: float | None = None,
    wait: bool = False,
) -> dict[str, Any]:
    """Run exactly one step of ``thread`` and return the StepOutput."""
    check_thread_id(thread)
    if timeout is not None and not 0 < timeout < float("inf"):  # also refuses nan
        raise InvalidInput(f"--timeout must be a positive number of seconds, got: {timeout}")
    state = State(root)
    if state.head(thread) is None:
        raise not_active(root, thread)
    if dry_run:
        return _step_locked(root, thread, agent, True, timeout)
    with fsio.locked(lock_path(root, thread), wait=wait, busy_message=f"thread {thread} is busy"):
        return _step_locked(root, thread, agent, False, timeout)


def _step_locked(
    root: Path, thread: str, agent: str | None, dry_run: bool, timeout: float | None
) -> dict[str, Any]:
    from uwf.config.config import agent_command, load_config, load_dotenv

    state = State(root)
    old_head = state.head(thread)
    if old_head is None:
        raise not_active(root, thread)
    store = open_store(root)
    head = chain.load_head(store, old_head)
    start = chain.start_of(store, head)
    workflow = chain.load_workflow(store, start.workflow)
    log = ProcessLog(root, thread=thread, workflow=start.workflow)
    result: dict[str, Any] = {"workflow": start.workflow, "thread": thread}

    try:
        decision = _decide(store, workflow, head)
    except ModeratorError as exc:
        log.write("P4W7H2M9", f"moderator failed: {exc}")
        raise UwfError(f"moderator evaluate failed: {exc}") from None
    log.write("M3K8V9T1", f"moderator role={decision.role} prompt={decision.prompt}")

    if decision.done:  # e.g. a fork of a step that already routes to $END
        if dry_run:
            return {**result, "head": old_head, "role": decision.role, "done": True, "dryRun": True}
        _archive(state, log, thread, start.workflow, "completed", old_head)
        return {**result, "head": old_head, "role": None, "done": True}

    if not schemas.is_name(decision.role):  # e.g. a Workflow node put around the validator
        raise InvalidInput(
            f"workflow routes to an invalid role name: {describe(decision.role)} "
            "(role names are plain identifiers)"
        )
    config = load_config(root)
    depth = chain.depth_of(store, head)
    limit = _max_rounds(start, config)
    if limit is not None and depth >= limit:
        if dry_run:
            return {
                **result,
                "head": old_head,
                "role": None,
                "done": True,
                "dryRun": True,
                "status": "max_rounds",
            }
        _archive(state, log, thread, start.workflow, "max_rounds", old_head)
        return {**result, "head": old_head, "role": None, "done": True, "status": "max_rounds"}

    argv = [
        *agent_command(config, str(workflow["name"]), decision.role, agent),
        thread,
        decision.role,
    ]
    if dry_run:
        return {
            **result,
            "head": old_head,
            "role": decision.role,
            "prompt": decision.prompt,
            "agent": argv,
            "done": False,
            "dryRun": True,
        }

    env = dict(os.environ)
    for key, value in load_dotenv(root).items():
        env.setdefault(key, value)
    env["UWF_EDGE_PROMPT"] = decision.prompt
    env["WORKFLOW_STORAGE_ROOT"] = str(root)
    if timeout is None:
        timeout = getattr(config, "agent_timeout", None)
    log.write("R5J2W8N4", f"spawning agent command={argv[0]}", args=" ".join(argv[1:]))
    run = run_agent(argv, env, timeout)
    if run.timed_out:
        log.write("N6J4S8P3", f"agent timed out after {timeout}s")
        raise AgentFailed(
            f"agent timed out after {timeout:g}s ({argv[0]}); its process group was killed"
        )
    if run.code != 0:
        tail = stderr_summary(run.stderr_tail)
        log.write("B8T5N1V6", f"agent failed code={run.code}")
        raise AgentFailed(
            f"agent command failed ({argv[0]}) with exit code {run.code}"
            + (f": {tail}" if tail else "")
        )
    lines = run.stdout.strip().splitlines()
    last = lines[-1].strip() if lines else ""
    if not is_hash(last):
        shown = last[:80] if last else "(empty)"
        raise AgentFailed(f"agent stdout is not a valid CAS hash: {shown}")
    log.write("C6P9E3H7", f"agent returned hash={last}")

    new_head = _check_step_node(store, last, start, head, decision.role, depth)
    try:
        after = _decide(store, workflow, new_head)
    except ModeratorError as exc:
        raise UwfError(f"post-step moderator evaluate failed: {exc} (head not moved)") from None

    with state.edit_threads() as threads:
        current = threads.get(thread)
        if current != old_head:
            raise Conflict(
                f"thread {thread} changed while the step ran (head is "
                f"{current or 'gone'}, expected {old_head}); the step was not recorded"
            )
        threads[thread] = new_head.hash
    out = {**result, "head": new_head.hash, "role": decision.role, "done": False}

    new_depth = depth + 1
    if after.done or (limit is not None and new_depth >= limit):
        status = "completed" if after.done else "max_rounds"
        try:
            _archive(state, log, thread, start.workflow, status, new_head.hash)
        except InvalidInput:
            # `thread kill` (which does not take the step lock) archived the thread between
            # the head move and here: the step is recorded all the same, as the killed head.
            entry = state.history_entry(thread)
            if state.head(thread) is not None or entry is None:
                raise
            status = entry["status"]
        out["done"] = True
        if status != "completed":
            out["status"] = status
    return out


def stderr_summary(text: str, limit: int = 500) -> str:
    """What to quote of an agent's stderr: its last ``error:`` line (head kept, so the part
    that says what failed survives a long quote), else the tail of everything."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("error: "):
            flat = " ".join(line.split())
            return flat if len(flat) <= limit else flat[: limit - 1] + "…"
    flat = " ".join(" ".join(lines).split())
    return flat if len(flat) <= limit else "…" + flat[-(limit - 1) :]


def _archive(
    state: State, log: ProcessLog, thread: str, workflow: str, status: str, head: str
) -> None:
    """Archive the thread at ``head`` (compare-and-swap) and log it once."""
    state.archive(thread, workflow, status, now_ms(), expected_head=head)
    log.write("F4D8Q2K5", f"thread archived status={status} head={head}")


def _check_step_node(
    store: Any, h: str, start: chain.Start, head: chain.Start | chain.Step, role: str, depth: int
) -> chain.Step:
    node = store.get(h)
    if node is None:
        raise AgentFailed(f"agent returned a hash that is not in the store: {h}")
    if node.type != schemas.hashes().step:
        raise AgentFailed(f"agent returned hash that is not a StepNode: {h}")
    step = chain.Step(h, node.payload, node.timestamp)
    expected_prev = None if isinstance(head, chain.Start) else head.hash
    problems = []
    if step.start != start.hash:
        problems.append(f"start is {step.start}, expected {start.hash}")
    if step.prev != expected_prev:
        problems.append(f"prev is {step.prev or 'null'}, expected {expected_prev or 'null'}")
    if step.role != role:
        problems.append(f'role is "{step.role}", expected "{role}"')
    if step.depth is not None and step.depth != depth + 1:
        problems.append(f"depth is {step.depth}, expected {depth + 1}")
    if problems:
        raise AgentFailed(f"agent returned StepNode {h} for another step: {'; '.join(problems)}")
    return step


def step_many(
    root: Path, thread: str, count: int, *, progress: Callable[[str], None], **kwargs: Any
) -> list[dict[str, Any]]:
    """Up to ``count`` steps, stopping when the thread is done; one progress line per step."""
    results = []
    for i in range(1, count + 1):
        out = step(root, thread, **kwargs)
        results.append(out)
        if count > 1:
            status = " (done)" if out.get("done") else ""
            progress(f"step {i}/{count}: {out.get('role') or '-'} -> {out['head']}{status}")
        if out.get("done") or out.get("dryRun"):
            break
    return results
